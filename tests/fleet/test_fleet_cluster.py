"""The fleet walk on a cluster fleetlib did not start: a ``dask scheduler`` and two ``dask worker`` processes.

The scheduler and its workers are real processes on loopback (no LocalCluster), started and stopped
here; the workers import this checkout's fleetlib (PYTHONPATH).  ``fleetlib fleet --scheduler``
gives every bundled sample's pandas answer, leaves the cluster running, and survives a worker killed
while it runs a timeline task (Dask reruns the task on the other worker).
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cluster_support import Cluster, assert_json_close
from fleet_support import assert_same

from fleetlib import cli
from fleetlib.fleet import measure_fleet
from fleetlib.fleet.scale import synth_fleet_scale

distributed = pytest.importorskip("distributed")

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
BUNDLES = sorted(p.parent for p in (ROOT / "data" / "fleet").glob("*/fleet.yaml"))


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    started = Cluster(tmp_path_factory.mktemp("cluster"), workers=2)
    try:
        yield started
    finally:
        started.stop()


def _cli_json(argv: list[str], capsys: pytest.CaptureFixture[str],
              err: list[str] | None = None) -> dict[str, Any]:
    """Run ``fleetlib ARGV`` here; return its JSON (its stderr lines appended to ``err``)."""
    capsys.readouterr()
    assert cli.main(argv) == 0
    out = capsys.readouterr()
    if err is not None:
        err += out.err.splitlines()
    return json.loads(out.out)


@pytest.mark.parametrize("bundle", BUNDLES, ids=[b.name for b in BUNDLES])
def test_fleet_on_a_named_scheduler_gives_the_pandas_answer(
    cluster: Cluster, bundle: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    by_pandas = _cli_json(["fleet", str(bundle / "fleet.yaml"), "--json"], capsys)
    on_cluster = _cli_json(["fleet", str(bundle / "fleet.yaml"), "--scheduler", cluster.address, "--json"],
                           capsys)
    assert_json_close(by_pandas, on_cluster)
    # the cluster fleetlib did not start is left running, its workers with it
    with distributed.Client(cluster.address, timeout=30) as c:
        assert len(c.scheduler_info()["workers"]) == 2


def test_the_scheduler_is_taken_from_dask_configuration(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import dask

    bundle = ROOT / "data" / "fleet" / "synthetic" / "fleet.yaml"
    with dask.config.set({"scheduler-address": cluster.address}):
        on_cluster = _cli_json(["fleet", str(bundle), "--json"], capsys)
        with distributed.Client(cluster.address, timeout=30) as c:
            # the walk's tasks ran on the named cluster (their keys stay in its task log)
            prefixes = c.run_on_scheduler(lambda dask_scheduler: list(dask_scheduler.task_prefixes))
    keys = {str(k) for k in prefixes}
    assert any(k.startswith("fleet-timeline") for k in keys)
    assert_json_close(_cli_json(["fleet", str(bundle), "--json"], capsys), on_cluster)


def test_workers_of_another_fleetlib_version_are_named_in_one_line(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import fleetlib

    monkeypatch.setattr(fleetlib, "__version__", "0.0.0-other")
    bundle = ROOT / "data" / "fleet" / "synthetic" / "fleet.yaml"
    err: list[str] = []
    _cli_json(["fleet", str(bundle), "--scheduler", cluster.address, "--json"], capsys, err)
    lines = [ln for ln in err if "import fleetlib" in ln]
    assert lines == [f"fleetlib: 2 of 2 workers of {cluster.address} import fleetlib {fleetlib_version()}, "
                     "not 0.0.0-other as this process does"]


def fleetlib_version() -> str:
    """The version the workers import: this checkout's, read from its source (not the patched attribute)."""
    text = (ROOT / "fleetlib" / "__init__.py").read_text()
    return next(ln.split('"')[1] for ln in text.splitlines() if ln.startswith("__version__"))


def test_a_worker_killed_mid_walk_is_survived(tmp_path: Path) -> None:
    bundle = tmp_path / "bundle"
    synth_fleet_scale(bundle, devices=64, days=1.0, seed=5, partitions=8, steps_per_job=(200, 400))
    by_pandas = measure_fleet(bundle)
    own = Cluster(tmp_path, workers=2)
    try:
        with distributed.Client(own.address, timeout=30) as watcher:
            pids = watcher.run(os.getpid)  # worker address -> process id
            by_pid = {pid: p for p in own.workers for pid in [p.pid]}
            result: dict[str, Any] = {}

            def walk() -> None:
                try:
                    result["m"] = measure_fleet(bundle, engine="dask", scheduler=own.address, progress=False)
                except BaseException as exc:  # handed to the test's thread
                    result["error"] = exc

            runner = threading.Thread(target=walk)
            runner.start()
            killed = None
            deadline = time.monotonic() + 120
            while killed is None and runner.is_alive() and time.monotonic() < deadline:
                for address, keys in watcher.processing().items():
                    if any(str(k).startswith("fleet-timeline") for k in keys) and address in pids:
                        killed = by_pid[pids[address]]
                        os.kill(killed.pid, signal.SIGKILL)
                        break
                time.sleep(0.005)
            runner.join(timeout=300)
        assert killed is not None, "the walk ended before a worker could be killed"
        assert killed.wait(timeout=30) == -signal.SIGKILL
        assert "error" not in result, result.get("error")
        assert_same(by_pandas, result["m"])
    finally:
        own.stop()


def test_compare_and_program_on_a_named_scheduler_give_their_local_answers(
    cluster: Cluster, capsys: pytest.CaptureFixture[str]
) -> None:
    synthetic = ROOT / "data" / "fleet" / "synthetic"
    compare = ["compare", str(synthetic), str(synthetic), "--boot", "50", "--cycle", "6h", "--json"]
    attached = _cli_json([*compare, "--scheduler", cluster.address], capsys)
    assert_json_close(_cli_json(compare, capsys), attached)
    traces = sorted((synthetic / "traces").iterdir())[0]
    program = ["program", str(traces), "--no-cache", "--json"]
    attached = _cli_json([*program, "--scheduler", cluster.address], capsys)
    assert_json_close(_cli_json(program, capsys), attached)


def test_the_dashboard_link_is_printed_with_the_progress_bars(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    synthetic = ROOT / "data" / "fleet" / "synthetic"
    own = Cluster(tmp_path, workers=1, dashboard=True)
    try:
        with distributed.Client(own.address, timeout=30) as c:
            link = c.dashboard_link
        for argv in (["fleet", str(synthetic / "fleet.yaml")],
                     ["program", str(sorted((synthetic / "traces").iterdir())[0]), "--no-cache"]):
            command = [*argv, "--scheduler", own.address, "--json"]
            monkeypatch.delenv("FLEETLIB_PROGRESS", raising=False)
            quiet: list[str] = []
            _cli_json(command, capsys, quiet)
            assert not any("dask dashboard" in ln for ln in quiet)  # --json off a terminal: no bar, no link
            monkeypatch.setenv("FLEETLIB_PROGRESS", "1")
            shown: list[str] = []
            _cli_json(command, capsys, shown)
            assert f"dask dashboard: {link}" in shown, (argv[0], shown[-5:])
    finally:
        own.stop()
