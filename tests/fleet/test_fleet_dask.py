"""The Dask engine of measure_fleet gives the pandas engine's numbers (one LocalCluster of 2 workers)."""

from __future__ import annotations

import argparse
import math
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from fleet_support import assert_same

from fleetlib.fleet import commands as fleet_commands
from fleetlib.fleet import measure_fleet
from fleetlib.fleet.scale import synth_fleet_scale
from fleetlib.quality import InputError

distributed = pytest.importorskip("distributed")

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def client() -> Iterator[Any]:
    with (
        distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0", memory_limit="2GiB"
        ) as cluster,
        distributed.Client(cluster) as c,
    ):
        yield c


@pytest.fixture(scope="module")
def partitioned(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("scale") / "bundle"
    synth_fleet_scale(out, devices=64, days=1.0, seed=3, partitions=3, steps_per_job=(20, 40))
    return out


def test_dask_equals_pandas_and_the_truth_on_partitioned_timelines(client: Any, partitioned: Path) -> None:
    import json

    pandas_m = measure_fleet(partitioned)
    dask_m = measure_fleet(partitioned, engine="dask", client=client, progress=False)
    assert_same(pandas_m, dask_m)
    truth = json.loads((partitioned / "truth.json").read_text())
    assert math.isclose(dask_m.mpg, truth["mpg"], rel_tol=1e-9)
    assert dask_m.traces  # the sampled traces were parsed on the cluster


def test_dask_refuses_two_timelines_for_one_job(client: Any, partitioned: Path, tmp_path: Path) -> None:
    bundle = tmp_path / "b"
    shutil.copytree(partitioned, bundle)
    first = bundle / "timelines" / "part-00000.parquet"
    shutil.copy(first, bundle / "timelines" / "copy.parquet")
    man = (bundle / "fleet.yaml").read_text()
    man = man.replace("    - timelines/part-00000.parquet\n",
                      "    - timelines/part-00000.parquet\n    - timelines/copy.parquet\n")
    (bundle / "fleet.yaml").write_text(man)
    with pytest.raises(InputError, match="two timelines for job"):
        measure_fleet(bundle, engine="dask", client=client)


def test_dask_raises_the_first_bad_file_in_manifest_order_as_pandas_does(
    client: Any, partitioned: Path, tmp_path: Path
) -> None:
    # the results are taken in manifest order as they come back: whichever task fails first, the
    # error raised is the first bad file's, the one the pandas engine (reading in order) names
    bundle = tmp_path / "b"
    shutil.copytree(partitioned, bundle)
    for name in ("part-00001.parquet", "part-00002.parquet"):
        (bundle / "timelines" / name).write_bytes(b"PAR1 not a parquet file PAR1")
    with pytest.raises(InputError) as by_pandas:
        measure_fleet(bundle)
    with pytest.raises(InputError) as by_dask:
        measure_fleet(bundle, engine="dask", client=client, progress=False)
    assert "part-00001.parquet" in str(by_pandas.value)
    assert str(by_dask.value) == str(by_pandas.value)


def test_cli_engine_dask_with_workers(partitioned: Path) -> None:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command")
    synth = sub.add_parser("synth").add_subparsers(dest="synth")
    fleet_commands.register(sub, synth, lambda p: p.add_argument("--json", action="store_true"))
    args = parser.parse_args(["fleet", str(partitioned), "--engine", "dask", "--workers", "1", "--json"])
    res = args.func(args)
    assert res["mpg"] == measure_fleet(partitioned).mpg


def test_the_cluster_starting_in_the_background_is_closed_when_the_bundle_is_refused(tmp_path: Path) -> None:
    """A bad bundle is refused while the cluster starts; the cluster is still started and closed."""
    import threading

    from fleetlib.fleet import engine

    closed: list[bool] = []
    real = engine.dask_client

    def watched(*args: Any, **kwargs: Any) -> Any:
        manager = real(*args, **kwargs)

        class Watch:
            def __enter__(self) -> Any:
                return manager.__enter__()

            def __exit__(self, *exc: Any) -> Any:
                closed.append(True)
                return manager.__exit__(*exc)

        return Watch()

    bad = tmp_path / "fleet.yaml"
    bad.write_text("name: x\nscheduler: {format: canonical, files: [missing.parquet]}\n"
                   "timelines: {format: canonical, files: [missing.parquet]}\n")
    before = threading.active_count()
    monkey = pytest.MonkeyPatch()
    monkey.setattr(engine, "dask_client", watched)
    try:
        with pytest.raises(InputError, match=r"missing\.parquet"):
            measure_fleet(bad, engine="dask", workers=1)
    finally:
        monkey.undo()
    assert closed == [True]
    assert threading.active_count() <= before + 1  # no cluster thread left running (allow a pool reaper)


@pytest.mark.parametrize("workers", [0, -1, 1.5, True])
def test_a_bad_worker_count_is_refused_before_any_cluster_starts(workers: Any) -> None:
    from fleetlib.fleet.engine import dask_client_in_background
    from fleetlib.quality import DomainError

    with pytest.raises(DomainError, match="workers must be a whole number"):
        with dask_client_in_background(None, workers):
            pass


def test_a_worker_count_past_the_local_bound_is_refused_before_any_cluster_starts() -> None:
    import os

    from fleetlib.fleet.engine import dask_client_in_background
    from fleetlib.program import local_cluster
    from fleetlib.quality import DomainError

    bound = max(8, 4 * (os.cpu_count() or 1))
    message = rf"^workers {bound + 1} is more than the {bound} local worker processes .*distributed\.Client"
    with pytest.raises(DomainError, match=message):
        with dask_client_in_background(None, bound + 1):
            pass
    with pytest.raises(DomainError, match=message):
        local_cluster(bound + 1)


def test_a_failed_cluster_start_is_raised_when_the_client_is_asked_for() -> None:
    from fleetlib.fleet.engine import dask_client_in_background

    with pytest.raises((ValueError, TypeError)):
        with dask_client_in_background(None, 1, memory_limit="not a size") as cluster:
            cluster.client()


def test_the_fleet_cluster_workers_keep_freed_memory_and_run_no_profiler() -> None:
    import os

    from fleetlib.fleet.engine import WORKER_MALLOC, dask_client

    def settings() -> tuple[dict[str, str | None], bool]:
        import dask

        return ({k: os.environ.get(k) for k in WORKER_MALLOC},
                bool(dask.config.get("distributed.worker.profile.enabled")))

    # what an earlier cluster (or the user) left in this process's environment neither overrides the
    # workers' settings nor is lost: distributed's nannies write theirs into this process's environment
    left = "65536"
    monkey = pytest.MonkeyPatch()
    monkey.setenv("MALLOC_TRIM_THRESHOLD_", left)
    monkey.delenv("MALLOC_TOP_PAD_", raising=False)
    try:
        with dask_client(None, 1) as client:
            (env, profiling), = client.run(settings).values()
        assert os.environ.get("MALLOC_TRIM_THRESHOLD_") == left and "MALLOC_TOP_PAD_" not in os.environ
    finally:
        monkey.undo()
    assert env == WORKER_MALLOC and not profiling
    assert int(WORKER_MALLOC["MALLOC_TRIM_THRESHOLD_"]) >= int(WORKER_MALLOC["MALLOC_MMAP_THRESHOLD_"])


def test_dask_equals_pandas_with_a_job_map_unknown_jobs_and_a_job_without_steps(
    client: Any, partitioned: Path, tmp_path: Path
) -> None:
    # one partition rewritten: a job under another id (mapped back by job_map), a job the scheduler
    # never saw (flagged, its rows counted unused), and a job whose steps are gone (a zombie)
    from fleetlib.runtime import read, write_timeline

    bundle = tmp_path / "b"
    shutil.copytree(partitioned, bundle)
    part = bundle / "timelines" / "part-00001.parquet"
    tables, _ = read([part], "canonical")
    steps, events = (tables[k].drop(columns=["source_file", "source_row"]) for k in ("steps", "events"))
    renamed, emptied = sorted(set(events["job_id"]))[:2]
    ghost_s = steps[steps["job_id"] == renamed].assign(job_id="ghost")
    ghost_e = events[events["job_id"] == renamed].assign(job_id="ghost")
    steps = pd.concat([steps[steps["job_id"] != emptied], ghost_s], ignore_index=True)
    events = pd.concat([events, ghost_e], ignore_index=True)
    steps["job_id"] = steps["job_id"].replace({renamed: f"t-{renamed}"})
    events["job_id"] = events["job_id"].replace({renamed: f"t-{renamed}"})
    write_timeline(steps, events, part)
    with (bundle / "fleet.yaml").open("a") as f:
        f.write(f'job_map: {{"t-{renamed}": "{renamed}"}}\n')
    pandas_m = measure_fleet(bundle)
    dask_m = measure_fleet(bundle, engine="dask", client=client, progress=False)
    assert_same(pandas_m, dask_m)
    jobs = dask_m.jobs
    assert jobs.loc[renamed, "observed"] and jobs.loc[renamed, "steps_in_timeline"] > 0
    assert jobs.loc[emptied, "zombie_job"]
    assert "timeline_job_unknown" in dask_m.ledger.codes()


def test_dask_flags_a_timeline_an_hour_away_as_pandas_does(client: Any, tmp_path: Path) -> None:
    from test_fleet_timezones import SAMPLE, _shift_timeline

    bundle = tmp_path / "b"
    shutil.copytree(SAMPLE, bundle)
    _shift_timeline(bundle / "timelines" / "41006.csv", 1.0)
    pandas_m = measure_fleet(bundle)
    dask_m = measure_fleet(bundle, engine="dask", client=client, progress=False)
    def flags(m: Any) -> list[tuple[Any, ...]]:
        return [(f.job_id, f.file, f.message) for f in m.ledger.flags if f.code == "timezone_mismatch"]

    assert flags(dask_m) == flags(pandas_m)
    assert [f[0] for f in flags(dask_m)] == ["41006"]
