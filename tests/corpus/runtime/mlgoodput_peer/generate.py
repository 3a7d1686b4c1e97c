"""Regenerate this folder's fixtures from ml-goodput-measurement 0.2.3's own test suite (run once, by hand).

Runs the peer's ``ml_goodput_measurement/tests/goodput_test.py`` (Apache-2.0; the unpacked wheel, by
default at /tmp/mlg/x) with its cloud dependencies stubbed, and writes every record each test
method's ``MockCloudLogger`` received as ``<Class>__<test>_timeline.jsonl`` -- the peer's real
recorder shapes -- plus ``results.json`` with the goodput the peer's calculator computed
(``get_job_goodput``).  ``peer_values.json`` holds those values with the line numbers of the test
methods in goodput_test.py.  Not run by the test suite: nothing is downloaded or imported from the
peer at test time.  Tests that record with ``datetime.now()`` give new times on every run.

Usage: python generate.py OUT_DIR [WHEEL_DIR]
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import types
import unittest
from typing import Any

import numpy as np


def _stub(name: str, **attrs: Any) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__dict__.update(attrs)
    sys.modules[name] = module
    return module


class _TestCase(unittest.TestCase):
    """The absltest helpers goodput_test.py uses, on a plain unittest.TestCase."""

    def create_tempdir(self) -> types.SimpleNamespace:
        return types.SimpleNamespace(full_path=tempfile.mkdtemp())

    def assertLen(self, container: Any, n: int, msg: Any = None) -> None:
        self.assertEqual(len(container), n, msg)

    def assertNotEmpty(self, container: Any, msg: Any = None) -> None:
        self.assertTrue(len(container) > 0, msg)

    def assertEmpty(self, container: Any, msg: Any = None) -> None:
        self.assertEqual(len(container), 0, msg)


def _install_stubs(wheel_dir: str) -> None:
    for name in ("requests", "urllib3", "urllib3.util", "google", "google.cloud", "google3",
                 "google3.testing", "google3.testing.pybase"):
        _stub(name)
    sys.modules["urllib3.util"].retry = types.SimpleNamespace(Retry=object)
    sys.modules["google.cloud"].storage = _stub("google.cloud.storage", Client=object)
    sys.modules["google.cloud"].logging = _stub("google.cloud.logging", Client=object)
    sys.modules["scipy"] = _stub("scipy")
    sys.modules["scipy"].stats = _stub(
        "scipy.stats", median_abs_deviation=lambda x: float(np.median(np.abs(np.asarray(x) - np.median(x)))))
    sys.modules["google3.testing.pybase"].googletest = _stub(
        "google3.testing.pybase.googletest", TestCase=_TestCase, main=unittest.main)
    package = _stub("ml_goodput_measurement")  # its __init__ imports the GCP clients: skip it
    package.__path__ = [os.path.join(wheel_dir, "ml_goodput_measurement")]


def _tests(suite: unittest.TestSuite) -> Any:
    for test in suite:
        if isinstance(test, unittest.TestSuite):
            yield from _tests(test)
        else:
            yield test


def main(out: str, wheel_dir: str = "/tmp/mlg/x") -> None:
    """Run the peer's goodput_test.py and write each test's records and computed goodput to ``out``."""
    _install_stubs(wheel_dir)
    from ml_goodput_measurement.src import goodput as peer_goodput
    from ml_goodput_measurement.tests import goodput_test

    os.makedirs(out, exist_ok=True)
    loggers: list[Any] = []
    calls: list[float] = []
    init = goodput_test.MockCloudLogger.__init__

    def recording_init(self: Any, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        loggers.append(self)

    goodput_test.MockCloudLogger.__init__ = recording_init
    get_goodput = peer_goodput.GoodputCalculator.get_job_goodput

    def recording_get(self: Any, *args: Any, **kwargs: Any) -> Any:
        result = get_goodput(self, *args, **kwargs)
        calls.append(result[0])
        return result

    peer_goodput.GoodputCalculator.get_job_goodput = recording_get
    results = {}
    for test in _tests(unittest.defaultTestLoader.loadTestsFromModule(goodput_test)):
        loggers.clear()
        calls.clear()
        outcome = unittest.TestResult()
        test.run(outcome)
        name = test.id().split(".", 3)[-1]
        entries = [entry for logger in loggers for _, entry in logger.entries]
        results[name] = {"ok": outcome.wasSuccessful(), "entries": len(entries), "goodput_pct": list(calls)}
        if entries:
            with open(os.path.join(out, name.replace(".", "__") + "_timeline.jsonl"), "w") as f:
                for entry in entries:
                    f.write(json.dumps(entry) + "\n")
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump(results, f, indent=1)
    for name, r in results.items():
        print(r["ok"], r["entries"], name, r["goodput_pct"][-1:] or "")


if __name__ == "__main__":
    main(*sys.argv[1:])
