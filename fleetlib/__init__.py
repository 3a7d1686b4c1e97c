"""fleetlib: where did the fleet's capacity go? A workbook for ML fleet goodput.

ML productivity goodput = scheduling x runtime x program goodput, each read from its own record
(scheduler records, job timeline, step traces).  The accounting core lives in
:mod:`fleetlib.accounting`; analytical models in :mod:`fleetlib.runtime.model`,
:mod:`fleetlib.program` and :mod:`fleetlib.frontier`; axes-level plots in :mod:`fleetlib.plots`;
the papermill report pipeline in :mod:`fleetlib.report`.

Importing fleetlib is cheap: plotting and notebook machinery load only when their modules are used.
"""

from fleetlib.accounting import Factor, GoodputProduct, Window, mpg
from fleetlib.quality import DomainError, FleetlibError, InputError, Ledger, WindowMismatchError

__version__ = "0.1.0"

__all__ = [
    "DomainError",
    "Factor",
    "FleetlibError",
    "GoodputProduct",
    "InputError",
    "Ledger",
    "Window",
    "WindowMismatchError",
    "__version__",
    "mpg",
]
