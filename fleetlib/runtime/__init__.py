"""Rung 2: job timeline -> runtime goodput (measured) and its analytical model (equation 4).

* :mod:`fleetlib.runtime.schema` -- the vocabulary: columns, event kinds, partition terms and labels;
* :mod:`fleetlib.runtime.readers` -- one module per format and the ``READERS`` registry;
* :mod:`fleetlib.runtime.timeline` -- validation of the canonical tables and the restart structure;
* :mod:`fleetlib.runtime.goodput` -- the exact partition of held time (``runtime_goodput``);
* :func:`measure` (module ``fleetlib/runtime/measure.py``) -- read and measure in one call; the result
  answers to ``.factor()``, ``.ledger``, ``.window`` and ``.to_dict()``;
* :mod:`fleetlib.runtime.model`, :mod:`fleetlib.runtime.compare` -- equation 4 and the comparison of a
  measurement with it; :mod:`fleetlib.runtime.synth` -- timelines with ground truth;
  :mod:`fleetlib.runtime.commands` -- the command line.

``fleetlib.runtime.measure`` is the function (it shadows the module of the same name as an attribute;
``from fleetlib.runtime.measure import ...`` still reaches the module).
"""

from fleetlib.runtime.measure import measure

__all__ = ["measure"]
