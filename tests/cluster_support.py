"""Real components on loopback for the cluster and object-storage tests: Dask processes and an S3 server.

:class:`Cluster` starts a ``dask scheduler`` and worker processes with distributed's own command lines
(no LocalCluster); :func:`s3_server` runs moto's S3 server holding a copy of a bundle.  Both are
started and stopped by the tests that use them; the workers import this checkout's fleetlib.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def worker_environment(extra: dict[str, str] | None = None) -> dict[str, str]:
    """This process's environment with this checkout first on the import path (and ``extra`` added)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [env.get("PYTHONPATH")])])
    env.pop("DASK_SCHEDULER_ADDRESS", None)
    env.update(extra or {})
    return env


class Cluster:
    """A scheduler and worker processes started with distributed's command lines; stopped by :meth:`stop`.

    ``env`` is added to the processes' environment (object-storage credentials for the workers);
    ``dashboard`` serves the scheduler's dashboard on a free loopback port.
    """

    def __init__(self, folder: Path, workers: int, env: dict[str, str] | None = None,
                 dashboard: bool = False) -> None:
        import distributed

        self.file = folder / "scheduler.json"
        environ = worker_environment(env)
        self.scheduler = subprocess.Popen(
            [sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1", "--port", "0",
             *(["--dashboard-address", "127.0.0.1:0"] if dashboard else ["--no-dashboard"]),
             "--scheduler-file", str(self.file)],
            env=environ, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 60
        while not self.file.exists():
            if time.monotonic() > deadline or self.scheduler.poll() is not None:
                self.stop()
                raise RuntimeError("the dask scheduler did not start")
            time.sleep(0.1)
        time.sleep(0.2)  # the file is written whole before the scheduler listens; read it after
        self.address = json.loads(self.file.read_text())["address"]
        self.workers = [
            subprocess.Popen(
                [sys.executable, "-m", "distributed.cli.dask_worker", self.address, "--nthreads", "1",
                 "--no-dashboard", "--no-nanny", "--memory-limit", "2GiB", "--name", f"w{i}"],
                env=environ, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )
            for i in range(workers)
        ]
        with distributed.Client(self.address, timeout=60) as c:
            c.wait_for_workers(workers, timeout=120)

    def stop(self) -> None:
        """Stop the workers, then the scheduler (SIGTERM; SIGKILL after 5 s)."""
        for p in [*getattr(self, "workers", []), self.scheduler]:
            if p.poll() is None:
                p.terminate()
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


@contextlib.contextmanager
def s3_server(bundle: Path, prefix: str = "bucket/synthetic") -> Iterator[tuple[dict[str, str], Any]]:
    """Run moto's S3 server on 127.0.0.1 holding ``bundle`` under ``s3://PREFIX/``.

    Yields the environment that names the server and its (test) credentials, and an ``s3fs``
    filesystem on it.  The server logs nothing (its request lines would drown a failure's output).
    """
    import logging

    import s3fs
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    moto = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    moto.start()
    env = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing-secret",
           "AWS_DEFAULT_REGION": "us-east-1", "AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}"}
    try:
        fs = s3fs.S3FileSystem(key=env["AWS_ACCESS_KEY_ID"], secret=env["AWS_SECRET_ACCESS_KEY"],
                               endpoint_url=env["AWS_ENDPOINT_URL"], skip_instance_cache=True)
        fs.mkdir(prefix.split("/", 1)[0])
        for f in sorted(bundle.rglob("*")):
            if f.is_file():
                fs.put_file(str(f), f"{prefix}/{f.relative_to(bundle).as_posix()}")
        yield env, fs
    finally:
        moto.stop()


def assert_json_close(a: Any, b: Any, where: str = "", abs_tol: float = 1e-9) -> None:
    """Assert two JSON values equal, numbers to 1e-12 relative (``abs_tol`` near zero), NaN equal to NaN."""
    if isinstance(a, dict):
        assert isinstance(b, dict) and a.keys() == b.keys(), where
        for k in a:
            assert_json_close(a[k], b[k], f"{where}.{k}", abs_tol)
    elif isinstance(a, list):
        assert isinstance(b, list) and len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            assert_json_close(x, y, f"{where}[{i}]", abs_tol)
    elif isinstance(a, float) and isinstance(b, float):
        assert math.isclose(a, b, rel_tol=1e-12, abs_tol=abs_tol) or (math.isnan(a) and math.isnan(b)), where
    else:
        assert a == b, where


def bucket_in_environment(bucket: tuple[dict[str, str], Any], monkeypatch: Any) -> Iterator[Any]:
    """Name a moto bucket's server and credentials in this process's environment, as a user's would be.

    A fixture body: yields the bucket's filesystem, with s3fs's instance cache cleared on both sides.
    """
    import s3fs

    env, fs = bucket
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    s3fs.S3FileSystem.clear_instance_cache()
    yield fs
    s3fs.S3FileSystem.clear_instance_cache()
