"""``fleetlib report`` with ``DASK_SCHEDULER_ADDRESS`` set writes the summary.json numbers it writes without.

The cluster is a real ``dask scheduler`` with two ``dask worker`` processes on loopback
(:class:`cluster_support.Cluster`, as the fleet walk's cluster tests); the report runs in a fresh
process whose environment names the scheduler (as ``make report`` does when the environment names
one).  The measured block of summary.json does not depend on the chain, so the chain is one small
notebook: the two runs must agree on every number of that block (1e-12) and the walk's tasks must
have run on the named cluster.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import nbformat
import pytest
from cluster_support import Cluster, assert_json_close, worker_environment

distributed = pytest.importorskip("distributed")

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
MANIFEST = ROOT / "data" / "fleet" / "synthetic" / "fleet.yaml"


def _report(out: Path, notebook: Path, env: dict[str, str]) -> dict[str, Any]:
    """Run ``fleetlib report`` on the synthetic bundle in a fresh process; return its summary.json."""
    done = subprocess.run(
        [sys.executable, "-m", "fleetlib", "report", "--fleet", str(MANIFEST), "--notebook", str(notebook),
         "--out", str(out), "--quiet"],
        env=env, capture_output=True, text=True, timeout=600, cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads((out / "summary.json").read_text(encoding="utf-8"))


def test_report_on_the_scheduler_of_the_environment_writes_the_same_numbers(tmp_path: Path) -> None:
    notebook = tmp_path / "small.ipynb"
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# A small page"), nbformat.v4.new_code_cell("x = 1")]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, notebook)
    env = worker_environment()  # this checkout first on the import path; no scheduler named
    alone = _report(tmp_path / "alone", notebook, env)
    cluster = Cluster(tmp_path, workers=2)
    try:
        named = {**env, "DASK_SCHEDULER_ADDRESS": cluster.address}
        on_cluster = _report(tmp_path / "cluster", notebook, named)
        with distributed.Client(cluster.address, timeout=30) as c:
            prefixes = c.run_on_scheduler(lambda dask_scheduler: list(dask_scheduler.task_prefixes))
            assert len(c.scheduler_info()["workers"]) == 2  # the cluster is left running
    finally:
        cluster.stop()
    assert any(str(k).startswith("fleet-timeline") for k in prefixes)  # the walk ran on the named cluster
    assert alone["measured"], "summary.json has no measured block"
    assert_json_close(alone["measured"], on_cluster["measured"], abs_tol=1e-12)
