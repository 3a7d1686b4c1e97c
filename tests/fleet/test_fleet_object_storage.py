"""A fleet bundle in object storage: ``fleetlib fleet s3://bucket/prefix/fleet.yaml`` on a real S3 server.

moto's server mode runs on loopback for the test alone (:func:`cluster_support.s3_server`); the
bundle ``data/fleet/synthetic`` is uploaded to it and the walk through fsspec must equal the walk of
the local folder (S, R, P, MPG, the ledger; to 1e-12), every file named as in the local walk (relative
to the bundle: never a local copy's path).  A manifest naming a URL outside its own prefix is
refused, naming that URL.  Credentials come from the environment only and are never printed.  On a
``dask scheduler`` with two ``dask worker`` processes the walk's tasks read the bucket on the workers.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cluster_support import Cluster, bucket_in_environment, s3_server

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
BUNDLE = ROOT / "data" / "fleet" / "synthetic"


@pytest.fixture(scope="module")
def s3() -> Iterator[tuple[dict[str, str], Any]]:
    """A moto S3 server holding the synthetic bundle under ``s3://bucket/synthetic/``."""
    pytest.importorskip("moto.server")
    pytest.importorskip("s3fs")
    with s3_server(BUNDLE) as (env, fs):
        fs.mkdir("bucket/other")
        fs.pipe_file("bucket/other/sacct.txt", (BUNDLE / "scheduler" / "sacct.txt").read_bytes())
        yield env, fs


def fleet_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``fleetlib`` in a fresh process (the credentials live in its environment only)."""
    code = "from fleetlib.cli import main; raise SystemExit(main())"
    return subprocess.run([sys.executable, "-c", code, *args],
                          env={**os.environ, **(env or {})}, capture_output=True, text=True, timeout=300)


def numbers(a: Any, b: Any, where: str = "") -> None:
    """Assert two JSON results equal: numbers to 1e-12, text exactly."""
    if isinstance(a, dict):
        assert a.keys() == b.keys(), where
        for k in a:
            numbers(a[k], b[k], f"{where}/{k}")
    elif isinstance(a, list):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            numbers(x, y, f"{where}[{i}]")
    elif isinstance(a, float) and isinstance(b, float):
        assert math.isclose(a, b, rel_tol=1e-12, abs_tol=1e-12), (where, a, b)
    else:
        assert a == b, (where, a, b)


@pytest.fixture(scope="module")
def local() -> dict[str, Any]:
    """The walk of the local folder, as JSON."""
    out = fleet_cli("fleet", str(BUNDLE / "fleet.yaml"), "--json")
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout)


def test_fleet_from_a_bucket_equals_the_local_folder(s3: tuple[dict[str, str], Any],
                                                     local: dict[str, Any]) -> None:
    env, _ = s3
    remote = fleet_cli("fleet", "s3://bucket/synthetic/fleet.yaml", "--json", env=env)
    assert remote.returncode == 0, remote.stderr[-2000:]
    numbers(local, json.loads(remote.stdout))
    assert "fleetlib-urls-" not in remote.stdout  # no local copy's path stands for a URL
    assert env["AWS_SECRET_ACCESS_KEY"] not in remote.stdout + remote.stderr


COMMANDS = {  # each command's arguments, @ standing for the bundle's folder or its URL prefix
    "scheduling": ["--tz", "UTC", "@/scheduler/sacct.txt", "@/scheduler/sacctmgr_events.txt",
                   "@/scheduler/sinfo_nodes.txt"],
    "runtime": ["@/timelines/70001.parquet"],
    "program": ["@/traces/70003", "--no-cache"],
    "compare": ["@", "@/fleet.yaml", "--boot", "50", "--cycle", "6h"],
}


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_command_reads_urls_as_it_reads_the_local_files(s3: tuple[dict[str, str], Any],
                                                          command: str) -> None:
    env, _ = s3
    args = [command, *COMMANDS[command], "--json"]
    copies = set(Path(tempfile.gettempdir()).glob("fleetlib-urls-*"))
    local = fleet_cli(*(a.replace("@", str(BUNDLE)) for a in args))
    remote = fleet_cli(*(a.replace("@", "s3://bucket/synthetic") for a in args), env=env)
    assert local.returncode == 0, local.stderr[-2000:]
    assert remote.returncode == 0, remote.stderr[-2000:]
    # the same result, every file named by its URL where the local run names its path
    numbers(json.loads(local.stdout.replace(str(BUNDLE), "s3://bucket/synthetic")), json.loads(remote.stdout))
    assert "fleetlib-urls-" not in remote.stdout + remote.stderr
    assert set(Path(tempfile.gettempdir()).glob("fleetlib-urls-*")) <= copies  # a copy made is removed


def test_a_url_outside_the_manifest_prefix_is_refused(s3: tuple[dict[str, str], Any]) -> None:
    env, fs = s3
    text = (BUNDLE / "fleet.yaml").read_text(encoding="utf-8")
    fs.pipe_file("bucket/synthetic/escape.yaml",
                 text.replace("- scheduler/sacct.txt", "- s3://bucket/other/sacct.txt").encode())
    out = fleet_cli("fleet", "s3://bucket/synthetic/escape.yaml", "--json", env=env)
    assert out.returncode != 0, out.stdout[:300] + out.stderr[-1500:]
    assert "s3://bucket/other/sacct.txt" in out.stderr
    assert "outside the manifest's prefix s3://bucket/synthetic" in out.stderr
    dotted = text.replace("- scheduler/sacct.txt", "- ../other/sacct.txt").encode()
    fs.pipe_file("bucket/synthetic/dotted.yaml", dotted)
    out = fleet_cli("fleet", "s3://bucket/synthetic/dotted.yaml", "--json", env=env)
    assert out.returncode != 0 and "../other/sacct.txt" in out.stderr
    # the same URL is read once --allow-path opens its prefix
    out = fleet_cli("--allow-path", "s3://bucket/other", "fleet", "s3://bucket/synthetic/escape.yaml",
                    "--json", env=env)
    assert "outside" not in out.stderr


def test_the_walk_of_a_bucket_reads_on_the_cluster_workers(
    s3: tuple[dict[str, str], Any], local: dict[str, Any], tmp_path: Path
) -> None:
    distributed = pytest.importorskip("distributed")
    env, _ = s3
    cluster = Cluster(tmp_path, workers=2, env=env)  # the workers hold the credentials themselves
    try:
        remote = fleet_cli("fleet", "s3://bucket/synthetic/fleet.yaml", "--scheduler", cluster.address,
                           "--json", env=env)
        assert remote.returncode == 0, remote.stderr[-2000:]
        numbers(local, json.loads(remote.stdout))
        assert env["AWS_SECRET_ACCESS_KEY"] not in remote.stdout + remote.stderr

        def opened_buckets() -> int:  # the S3 filesystems this worker process opened
            import s3fs

            return len(s3fs.S3FileSystem._cache)

        with distributed.Client(cluster.address, timeout=30) as c:
            opened = c.run(opened_buckets)
            prefixes = c.run_on_scheduler(lambda dask_scheduler: list(dask_scheduler.task_prefixes))
        keys = {str(k) for k in prefixes}
        # the trace and timeline tasks were handed URLs and read the bucket where they ran
        assert any(k.startswith("fleet-timeline") for k in keys)
        assert sum(opened.values()) > 0, opened
    finally:
        cluster.stop()


@pytest.fixture
def s3_here(s3: tuple[dict[str, str], Any], monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """The bucket named by this process's environment (as a user's would name it); yields its filesystem."""
    yield from bucket_in_environment(s3, monkeypatch)


def copies_of(prefix: str) -> list[Path]:
    """The local copies (:func:`fleetlib._io.local_path`) any process holds of objects under ``prefix``."""
    return list(Path(tempfile.gettempdir()).glob(f"fleetlib-urls-*/s3/{prefix}"))


def test_a_canonical_parquet_file_reads_through_arrow_without_a_copy(s3_here: Any, tmp_path: Path) -> None:
    import pandas as pd

    from fleetlib.scheduling import read, synthetic_fleet, write_allocations

    made = synthetic_fleet(300, seed=5, days=2.0)
    path = write_allocations(made.allocations, made.capacity, tmp_path / "canonical.parquet",
                             reservations=made.reservations)
    s3_here.put_file(str(path), "bucket/synthetic/arrow-only/canonical.parquet")
    url = "s3://bucket/synthetic/arrow-only/canonical.parquet"
    local, local_ledger = read(path, "canonical")
    for fmt in ("canonical", None):  # named, and told from the bytes (the head is read by range too)
        remote, ledger = read(url, fmt)
        assert ledger.to_dict() == local_ledger.to_dict()
        assert remote.source == url
        for name in ("allocations", "capacity", "reservations"):
            pd.testing.assert_frame_equal(getattr(remote, name), getattr(local, name))
    assert len(local.allocations) == len(made.allocations)  # and the file is the generator's
    assert not copies_of("bucket/synthetic/arrow-only")  # Arrow read the object by range: no local copy


HELIOS = ROOT / "data" / "scheduler" / "helios_earth_may2020"


@pytest.mark.parametrize(("fmt", "files", "tz"), [
    ("slurm", ["sacct.txt", "sacctmgr_events.txt", "sinfo_nodes.txt"], "UTC"),
    ("helios-sequence", ["vc6YE.csv.gz", "Earth_gpu_number.csv"], "Asia/Shanghai"),
])
def test_scheduler_text_records_read_from_the_bucket_without_a_copy(s3_here: Any, fmt: str,
                                                                    files: list[str], tz: str) -> None:
    import pandas as pd

    from fleetlib.scheduling import read

    folder = BUNDLE / "scheduler" if fmt == "slurm" else HELIOS
    for name in files:
        s3_here.put_file(str(folder / name), f"bucket/synthetic/text-only/{fmt}/{name}")
    urls = [f"s3://bucket/synthetic/text-only/{fmt}/{name}" for name in files]
    local, local_ledger = read([folder / name for name in files], fmt, tz=tz)
    remote, ledger = read(urls, fmt, tz=tz)
    assert remote.source == ",".join(urls)
    shown = json.dumps(ledger.to_dict()).replace(f"s3://bucket/synthetic/text-only/{fmt}", str(folder))
    assert json.loads(shown) == json.loads(json.dumps(local_ledger.to_dict()))
    for name in ("allocations", "capacity", "reservations", "queue", "occupancy"):
        if getattr(local, name) is None:
            assert getattr(remote, name) is None
        else:
            pd.testing.assert_frame_equal(getattr(remote, name), getattr(local, name))
    if fmt == "helios-sequence":  # the pool is named by the file's name, the same for its URL
        assert "vc6YE" in set(remote.occupancy["pool"].astype(str))
    assert not copies_of("bucket/synthetic/text-only")


def test_a_parquet_timeline_reads_from_the_bucket_without_a_copy(s3_here: Any) -> None:
    import pandas as pd

    from fleetlib.runtime import read

    local, local_ledger = read(BUNDLE / "timelines" / "70002.parquet", "canonical")
    remote, ledger = read("s3://bucket/synthetic/timelines/70002.parquet", "canonical")
    shown = json.dumps(ledger.to_dict()).replace("s3://bucket/synthetic", str(BUNDLE))
    assert json.loads(shown) == json.loads(json.dumps(local_ledger.to_dict()))
    assert set(remote) == set(local) and len(local["steps"]) > 0 and len(local["events"]) > 0
    for name in local:  # every row and value, each row naming the object it came from
        assert set(remote[name]["source_file"].astype(str)) == {"s3://bucket/synthetic/timelines/70002.parquet"}
        pd.testing.assert_frame_equal(remote[name].drop(columns="source_file"),
                                      local[name].drop(columns="source_file"))
    assert not copies_of("bucket/synthetic/timelines")
