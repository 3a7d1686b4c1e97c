"""Capture ml-goodput-measurement 0.2.3's elastic and exclusion scenarios with a fixed clock (run by hand).

Runs the peer's ``tests/goodput_elastic_test.py`` (every class) and the class
``GoodputExclusionIntegrationTest`` of ``tests/goodput_test.py`` (Apache-2.0) from the peer's source
tree at its v0.2.3 release commit (57092cf; the git tree imports ``cloud_goodput.ml_goodput_measurement``,
the wheel ``ml_goodput_measurement``: both names are mapped to ``SRC_DIR/ml_goodput_measurement``),
with the cloud dependencies stubbed as in ``generate.py`` and ``datetime.datetime.now`` fixed at
:data:`FIXED_NOW` in the elastic recorder and its tests, so that every run writes the same records
(the exclusion tests give every time themselves).  For each test
method it writes the records its ``MockCloudLogger`` received as ``<Class>__<test>_timeline.jsonl`` and,
in ``elastic_results.json``, what the peer computed on them: the exclusion windows each call of
``get_job_goodput_with_exclusions`` was given with its answer (goodput %, badput breakdown %, excluded
seconds), the ``get_job_goodput`` answers, the unproductive buckets of
``_get_current_productive_and_unproductive_time`` and the slice efficiencies of
``get_job_goodput_details`` / ``_compute_time_weighted_efficiency``.  Not run by the test suite.

Usage: python generate_elastic.py OUT_DIR SRC_DIR
"""

from __future__ import annotations

import datetime
import json
import os
import sys
import tempfile
import types
import unittest
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from generate import _install_stubs, _stub, _tests

#: The instant the peer's ``datetime.datetime.now`` returns (after every scenario's records).
FIXED_NOW = datetime.datetime(2026, 6, 1, 0, 0, 0, tzinfo=datetime.UTC)


class _FixedDatetime(datetime.datetime):
    @classmethod
    def now(cls, tz: Any = None) -> Any:
        return FIXED_NOW if tz is not None else FIXED_NOW.replace(tzinfo=None)

    @classmethod
    def utcnow(cls) -> Any:
        return FIXED_NOW.replace(tzinfo=None)


def _fixed_clock(*modules: Any) -> None:
    shim = types.ModuleType("datetime")
    shim.__dict__.update(vars(datetime))
    shim.datetime = _FixedDatetime
    for module in modules:
        if getattr(module, "datetime", None) is datetime:
            module.datetime = shim


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(getattr(k, "name", k)): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, datetime.datetime):
        return value.timestamp()
    if hasattr(value, "item"):
        return value.item()
    return value


def _fixture_case(goodput_elastic: Any, elastic_test: Any) -> type:
    """fleetlib's issue-33 scenario recorded through the peer's elastic recorder, and its calculator's
    answer on it (not a peer test: the job the acceptance fixture describes)."""

    class Issue33ElasticFixture(unittest.TestCase):
        def test_slice_loss_and_regain(self) -> None:
            start = datetime.datetime(2026, 5, 28, 0, 0, 0, tzinfo=datetime.UTC)
            logger = elastic_test.MockCloudLogger("issue33-elastic", "test-log")
            rec = goodput_elastic.ElasticGoodputRecorder("issue33-elastic", "test-log", True, logger)

            def at(seconds: float) -> datetime.datetime:
                return start + datetime.timedelta(seconds=seconds)

            rec.record_job_start_time(at(0))
            rec.record_elastic_slice_counts(4, 4, 4, at(0))
            for step, t in enumerate([10, 20, 30, 40, 50]):  # 10 s steps on four slices
                rec.record_step_start_time(step, at(t))
            rec.record_elastic_slice_counts(0, 4, 3, at(60))  # a slice is lost after step 4
            rec.record_elastic_wait_start_time("slice_down", at(60))
            rec.record_elastic_wait_end_time("slice_down", at(80))
            rec.record_elastic_reinit_start_time(at(80))
            rec.record_elastic_reinit_end_time(at(95))
            rec.record_elastic_slice_counts(3, 4, 3, at(95))
            for step, t in zip(range(5, 10), [95, 107, 119, 131, 143], strict=True):  # 12 s on three
                rec.record_step_start_time(step, at(t))
            rec.record_elastic_slice_counts(0, 4, 4, at(155))  # the slice is back
            rec.record_elastic_wait_start_time("scale_up", at(155))
            rec.record_elastic_wait_end_time("scale_up", at(160))
            rec.record_elastic_reinit_start_time(at(160))
            rec.record_elastic_reinit_end_time(at(170))
            rec.record_elastic_slice_counts(4, 4, 4, at(170))
            for step, t in zip(range(10, 12), [170, 180], strict=True):
                rec.record_step_start_time(step, at(t))
            rec.record_job_end_time(at(190))
            calc = goodput_elastic.ElasticGoodputCalculator("issue33-elastic", "test-log", logger)
            calc.get_job_goodput(include_badput_breakdown=True)
            calc.get_job_goodput_details()
            # a window over 10 s of steps 5-9: are the elastic buckets kept?
            calc.get_job_goodput_with_exclusions([(at(100), at(110))], include_badput_breakdown=True)

    return Issue33ElasticFixture


def main(out: str, src_dir: str) -> None:
    """Run the peer's elastic and exclusion tests and write each test's records and computed values."""
    _install_stubs(src_dir)
    cloud = _stub("cloud_goodput")
    cloud.__path__ = [src_dir]
    sys.modules["cloud_goodput.ml_goodput_measurement"] = sys.modules["ml_goodput_measurement"]
    from cloud_goodput.ml_goodput_measurement.src import goodput, goodput_elastic
    from cloud_goodput.ml_goodput_measurement.tests import goodput_elastic_test, goodput_test

    # the recorder and the elastic tests only: the calculator reads "now" to fetch entries up to it
    # (any real clock after the scenarios gives the same answers) and its cache writes datetimes
    _fixed_clock(goodput_elastic, goodput_elastic_test)
    os.makedirs(out, exist_ok=True)
    loggers: list[Any] = []
    calls: list[dict[str, Any]] = []

    def recording(cls: Any) -> None:
        init = cls.__init__

        def recording_init(self: Any, *args: Any, **kwargs: Any) -> None:
            init(self, *args, **kwargs)
            loggers.append(self)

        cls.__init__ = recording_init

    recording(goodput_test.MockCloudLogger)
    recording(goodput_elastic_test.MockCloudLogger)

    def wrap(cls: Any, method: str, keep: Any) -> None:
        raw = next(c.__dict__[method] for c in cls.__mro__ if method in c.__dict__)
        label = f"{cls.__name__}.{method}"
        if isinstance(raw, staticmethod):
            original = raw.__func__

            def static(*args: Any, **kwargs: Any) -> Any:
                result = original(*args, **kwargs)
                calls.append({"call": label, **keep((None, *args), kwargs, result)})
                return result

            setattr(cls, method, staticmethod(static))
            return

        def wrapped(self: Any, *args: Any, **kwargs: Any) -> Any:
            result = raw(self, *args, **kwargs)
            calls.append({"call": label, **keep(args, kwargs, result)})
            return result

        setattr(cls, method, wrapped)

    calc = goodput.GoodputCalculator
    calc_init = calc.__init__

    def fresh_cache_init(self: Any, *args: Any, **kwargs: Any) -> None:
        # a calculator caches its entries in <cache_dir>/<job>_timeline.jsonl, by default in /tmp: a
        # fresh folder per calculator, so that no earlier run's entries are read back
        if len(args) < 4 and "cache_dir" not in kwargs:
            kwargs["cache_dir"] = tempfile.mkdtemp()
        calc_init(self, *args, **kwargs)

    calc.__init__ = fresh_cache_init
    wrap(calc, "get_job_goodput_with_exclusions", lambda a, k, r: {
        "exclusions": _plain(a[0] if a else k.get("exclusions")), "goodput_pct": _plain(r[0]),
        "badput_pct": _plain(r[1]), "excluded_s": _plain(r[3])})
    wrap(calc, "get_job_goodput", lambda a, k, r: {"goodput_pct": _plain(r[0]), "badput_pct": _plain(r[1])})
    wrap(calc, "_get_current_productive_and_unproductive_time", lambda a, k, r: {
        "productive_s": _plain(r[0]), "unproductive_s": _plain(r[1])})
    ecalc = goodput_elastic.ElasticGoodputCalculator
    wrap(ecalc, "_get_current_productive_and_unproductive_time", lambda a, k, r: {
        "productive_s": _plain(r[0]), "unproductive_s": _plain(r[1])})
    wrap(ecalc, "get_job_goodput_details", lambda a, k, r: {
        "stepping_slice_efficiency": _plain(r.get("stepping_slice_efficiency")),
        "available_slice_efficiency": _plain(r.get("available_slice_efficiency"))})
    wrap(ecalc, "_compute_time_weighted_efficiency", lambda a, k, r: {
        "interval": _plain([a[2], a[3]]), "efficiency": _plain(list(r))})
    suites = [unittest.defaultTestLoader.loadTestsFromModule(goodput_elastic_test),
              unittest.defaultTestLoader.loadTestsFromTestCase(
                  _fixture_case(goodput_elastic, goodput_elastic_test)),
              unittest.defaultTestLoader.loadTestsFromTestCase(goodput_test.GoodputExclusionIntegrationTest)]
    results = {}
    for suite in suites:
        for test in _tests(suite):
            loggers.clear()
            calls.clear()
            outcome = unittest.TestResult()
            test.run(outcome)
            name = test.id().split(".")[-2:]
            key = ".".join(name)
            entries = [entry for logger in loggers for _, entry in logger.entries]
            problems = [str(e[1]).splitlines()[-1] for e in outcome.errors + outcome.failures]
            results[key] = {"ok": outcome.wasSuccessful(), "problems": problems, "entries": len(entries),
                            "file": "__".join(name) + "_timeline.jsonl" if entries else None,
                            "calls": [dict(c) for c in calls]}
            if entries:
                with open(os.path.join(out, "__".join(name) + "_timeline.jsonl"), "w") as f:
                    for entry in entries:
                        f.write(json.dumps(entry) + "\n")
    with open(os.path.join(out, "elastic_results.json"), "w") as f:
        json.dump(results, f, indent=1, sort_keys=True)
        f.write("\n")
    for name, r in results.items():
        print(r["ok"], r["entries"], name, r["problems"])


if __name__ == "__main__":
    main(*sys.argv[1:])
