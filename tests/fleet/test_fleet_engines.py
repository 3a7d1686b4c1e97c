"""One answer from both engines: every bundle of data/fleet and of the test corpus, by Dask and by pandas."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fleet_support import assert_same

from fleetlib.fleet import measure_fleet
from fleetlib.quality import InputError

distributed = pytest.importorskip("distributed")

ROOT = Path(__file__).resolve().parents[2]
BUNDLES = sorted(
    p.parent for folder in (ROOT / "data" / "fleet", ROOT / "tests" / "corpus" / "fleet_bundles")
    for p in folder.glob("*/fleet.yaml")
)
TWO_FILES = ROOT / "tests" / "corpus" / "fleet_bundles" / "two_file_timeline"


@pytest.fixture(scope="module")
def client() -> Iterator[Any]:
    """One in-process worker (threads): the tasks run as on a cluster, without starting processes."""
    with (
        distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=":0")
        as cluster,
        distributed.Client(cluster) as c,
    ):
        yield c


def test_the_bundles_include_a_timeline_split_into_a_steps_and_an_events_file() -> None:
    assert TWO_FILES in BUNDLES and {p.name for p in BUNDLES} >= {"synthetic", "slurm_sample", "good"}


def _param(bundle: Path) -> Any:
    """The bundled samples take seconds each (slow); the corpus' small bundles well under one."""
    marks = [pytest.mark.slow] if bundle.parent.name == "fleet" else []
    return pytest.param(bundle, marks=marks, id=f"{bundle.parent.name}/{bundle.name}")


@pytest.mark.parametrize("bundle", [_param(b) for b in BUNDLES])
def test_dask_gives_the_pandas_answer(client: Any, bundle: Path) -> None:
    try:
        by_pandas = measure_fleet(bundle)
    except InputError as exc:  # a bad bundle: the same refusal, word for word
        with pytest.raises(InputError) as by_dask:
            measure_fleet(bundle, engine="dask", client=client, progress=False)
        assert str(by_dask.value) == str(exc)
        return
    assert_same(by_pandas, measure_fleet(bundle, engine="dask", client=client, progress=False))


def test_a_timeline_split_across_files_is_measured_whole(client: Any) -> None:
    # the steps file and the events file hold one timeline per job: productive time is each retained
    # step's wall time less its input wait, times the job's 8 devices (counted here from the raw rows)
    import csv

    rows = list(csv.DictReader((TWO_FILES / "timelines" / "steps.csv").open()))
    retained = {("101", "1"), ("101", "2"), ("102", "1"), ("102", "2")}  # attempt 0's step 3 is rework
    retained_rows = [r for r in rows if (r["job_id"], r["step"]) in retained or r["attempt"] == "1"]
    expected: dict[str, float] = {}
    for r in retained_rows:
        expected[r["job_id"]] = expected.get(r["job_id"], 0.0) + 8 * (600.0 - float(r["input_wait_s"]))
    m = measure_fleet(TWO_FILES, engine="dask", client=client, progress=False)
    assert m.jobs["productive_device_s"].to_dict() == expected
    assert m.jobs["rework"].to_dict()["101"] > 0 and m.jobs["observed"].all()
