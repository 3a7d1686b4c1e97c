"""Deprecated location of the course-notebook golden-output tooling, kept for one release.

The tooling moved out of the installed package to the repository's ``tests/golden.py`` (it refreshes
and checks committed course notebooks; an analyst's installation has no use for it).  In a checkout,
``import fleetlib.golden`` still works and warns; ``python tests/golden.py`` is the command now.
"""

from __future__ import annotations

import importlib.util
import sys
import warnings
from pathlib import Path

_TOOL = Path(__file__).resolve().parents[1] / "tests" / "golden.py"

warnings.warn("fleetlib.golden moved to the repository's tests/golden.py; import it from there",
              DeprecationWarning, stacklevel=2)

if not _TOOL.is_file():  # an installed wheel: the tooling is not shipped
    raise ImportError("fleetlib.golden is course tooling and moved to tests/golden.py in the fleetlib "
                      "repository; it is not part of the installed package")

_spec = importlib.util.spec_from_file_location("fleetlib_golden_tool", _TOOL)
assert _spec is not None and _spec.loader is not None
_module = importlib.util.module_from_spec(_spec)
sys.modules.setdefault("fleetlib_golden_tool", _module)
_spec.loader.exec_module(_module)

globals().update({k: v for k, v in vars(_module).items() if not k.startswith("__")})
__all__ = list(getattr(_module, "__all__", ()))
