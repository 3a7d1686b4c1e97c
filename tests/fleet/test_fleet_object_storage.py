"""A fleet bundle in object storage: ``fleetlib fleet s3://bucket/prefix/fleet.yaml`` on a real S3 server.

moto's server mode runs on loopback for the test alone; the bundle ``data/fleet/synthetic`` is
uploaded to it and the walk through fsspec must equal the walk of the local folder (S, R, P, MPG, the
ledger; to 1e-12), file paths aside.  A manifest naming a URL outside its own prefix is refused,
naming that URL.  Credentials come from the environment only.
"""

from __future__ import annotations

import json
import math
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
BUNDLE = ROOT / "data" / "fleet" / "synthetic"


@pytest.fixture(scope="module")
def s3() -> Iterator[tuple[dict[str, str], Any]]:
    """A moto S3 server on 127.0.0.1 holding the synthetic bundle under ``s3://bucket/synthetic/``."""
    server = pytest.importorskip("moto.server")
    s3fs = pytest.importorskip("s3fs")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    moto = server.ThreadedMotoServer(ip_address="127.0.0.1", port=port)
    moto.start()
    env = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing-secret",
           "AWS_DEFAULT_REGION": "us-east-1", "AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}"}
    try:
        fs = s3fs.S3FileSystem(key=env["AWS_ACCESS_KEY_ID"], secret=env["AWS_SECRET_ACCESS_KEY"],
                               endpoint_url=env["AWS_ENDPOINT_URL"], skip_instance_cache=True)
        fs.mkdir("bucket")
        for f in sorted(BUNDLE.rglob("*")):
            if f.is_file():
                fs.put_file(str(f), f"bucket/synthetic/{f.relative_to(BUNDLE).as_posix()}")
        fs.mkdir("bucket/other")
        fs.pipe_file("bucket/other/sacct.txt", (BUNDLE / "scheduler" / "sacct.txt").read_bytes())
        yield env, fs
    finally:
        moto.stop()


def fleet_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``fleetlib`` in a fresh process (the credentials live in its environment only)."""
    code = "from fleetlib.cli import main; raise SystemExit(main())"
    return subprocess.run([sys.executable, "-c", code, *args],
                          env={**os.environ, **(env or {})}, capture_output=True, text=True, timeout=300)


def numbers(a: Any, b: Any, where: str = "") -> None:
    """Assert two JSON results equal: numbers to 1e-12, text exactly, the fetched traces' paths aside."""
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
    elif not (isinstance(b, str) and "fleetlib-urls-" in b):  # a trace's fetched copy names a file
        assert a == b, (where, a, b)


def test_fleet_from_a_bucket_equals_the_local_folder(s3: tuple[dict[str, str], Any]) -> None:
    env, _ = s3
    remote = fleet_cli("fleet", "s3://bucket/synthetic/fleet.yaml", "--json", env=env)
    local = fleet_cli("fleet", str(BUNDLE / "fleet.yaml"), "--json")
    assert remote.returncode == 0, remote.stderr[-2000:]
    assert local.returncode == 0, local.stderr[-2000:]
    a, b = json.loads(local.stdout), json.loads(remote.stdout)
    numbers(a, b)
    assert env["AWS_SECRET_ACCESS_KEY"] not in remote.stdout + remote.stderr


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
