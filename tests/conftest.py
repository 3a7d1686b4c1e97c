"""Test-suite wiring: the ``slow`` marker.

``make test-fast`` runs ``pytest -m "not slow"``: everything but notebook executions (papermill and
nbval), the headless-browser checks, the reader fuzzing and the fleet-scale runs.  A test is slow when
it carries the ``notebook`` marker or lives in one of :data:`SLOW_MODULES`; ``make test`` runs all.
"""

from __future__ import annotations

import pytest

#: Modules whose every test is slow (notebook chains, the browser, fuzzing, fleet scale).
SLOW_MODULES = frozenset({
    "test_browser.py",
    "test_notebooks.py",
    "test_report.py",
    "test_report_pages.py",
    "test_fleet_notebook.py",
    "test_program_notebook.py",
    "test_regress_notebook.py",
    "test_runtime_notebook.py",
    "test_scheduling_notebook.py",
    "test_fuzz_readers.py",
    "test_fleet_scale.py",
})


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark notebook tests and the tests of :data:`SLOW_MODULES` as ``slow``."""
    for item in items:
        if item.get_closest_marker("notebook") is not None or item.path.name in SLOW_MODULES:
            item.add_marker(pytest.mark.slow)
