"""The rung-1 command line: ``fleetlib scheduling`` and ``fleetlib synth allocations``.

Expected values come from outside the code under test: the synthetic fleet's injected ground truth
(built piece by piece in ``fleetlib.scheduling.synth``, not by the sweep), and a plain pandas pass over
the raw Helios minute files (running / total, idle while ``pending_gpujob_num > 0``).
"""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pandas as pd
import pytest

from fleetlib.cli import main
from fleetlib.commands_common import cli_window
from fleetlib.scheduling.commands import render_scheduling
from fleetlib.scheduling.schema import LOSS_KEYS

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "data" / "scheduler"
HELIOS = DATA / "helios_earth_may2020"
VCS = sorted(HELIOS.glob("vc*.csv.gz"))
QUOTA = HELIOS / "Earth_gpu_number.csv"
SLURM = [DATA / "slurm_sample" / n for n in ("sacct.txt", "sacctmgr_events.txt", "sinfo_nodes.txt")]
OPENB = [DATA / "alibaba_openb_2023" / "openb_pod_list_default.csv.gz",
         DATA / "alibaba_openb_2023" / "openb_node_list_gpu_node.csv"]
TOP_KEYS = {"scheduling_goodput", "capacity_device_s", "held_device_s", "availability", "losses",
            "cross_pool_losses", "pools", "ledger", "window", "collection_gaps", "unobserved"}
POOL_KEYS = TOP_KEYS - {"pools", "ledger", "window", "collection_gaps", "unobserved"}


def cli(*argv: object) -> tuple[int, str, str]:
    """Run ``fleetlib`` in-process; return (status, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([str(a) for a in argv])
    return code, out.getvalue(), err.getvalue()


def cli_json(*argv: object) -> dict:
    code, out, err = cli(*argv, "--json")
    assert code == 0, err
    return json.loads(out)  # exactly one JSON document, or this raises


# ---------------------------------------------------------------------------------------------------
# Synthetic fleet: synth -> Parquet -> scheduling reproduces the injected truth
# ---------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def synth(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    path = tmp_path_factory.mktemp("synth") / "fleet.parquet"
    made = cli_json("synth", "allocations", "--n", 3000, "--seed", 11, "--out", path)
    return path, made


def test_synth_writes_the_file_it_describes(synth):
    path, made = synth
    assert path.is_file() and made["path"] == str(path)
    assert made["allocations"] == 3000
    assert made["pools"] == sorted(made["truth"]["pools"])
    assert 0 < made["truth"]["scheduling_goodput"] < 1


def test_round_trip_reproduces_the_injected_partition(synth):
    path, made = synth
    res = cli_json("scheduling", path, "--format", "canonical")
    assert set(res) == TOP_KEYS
    truth = made["truth"]["pools"]
    assert set(res["pools"]) == set(truth)
    for name, t in truth.items():
        p = res["pools"][name]
        assert set(p) == POOL_KEYS
        # whole-second records: the sweep and the injected pieces agree exactly
        assert p["capacity_device_s"] == t["capacity_device_s"]
        assert p["held_device_s"] == t["held_device_s"]
        for k in LOSS_KEYS:
            assert p["losses"][k] == t[k], (name, k)
        assert p["cross_pool_losses"] == {"idle_with_queue": t["cross_pool_idle_with_queue"],
                                          "idle_empty_queue": t["cross_pool_idle_empty_queue"]}
        assert p["availability"] == pytest.approx(t["capacity_device_s"] / t["installed_device_s"], rel=1e-15)
    # every category is exercised by this fleet, and nothing is left unexplained
    tot = {k: sum(t[k] for t in truth.values()) for k in next(iter(truth.values()))}
    for k in ("partial_gang_hold", "reservation", "idle_with_queue", "idle_empty_queue",
              "out_of_service_device_s"):
        assert tot[k] > 0, k
    assert res["losses"]["unattributed"] == 0.0
    assert res["scheduling_goodput"] == pytest.approx(made["truth"]["scheduling_goodput"], rel=1e-15)
    assert res["held_device_s"] + sum(res["losses"].values()) == res["capacity_device_s"]
    assert res["ledger"]["read"] == res["ledger"]["kept"] and res["ledger"]["rejected"] == 0


def test_installed_denominator_is_explicit(synth):
    path, made = synth
    res = cli_json("scheduling", path, "--format", "canonical", "--denominator", "installed")
    truth = made["truth"]["pools"]
    installed = sum(t["installed_device_s"] for t in truth.values())
    oos = sum(t["out_of_service_device_s"] for t in truth.values())
    held = sum(t["held_device_s"] for t in truth.values())
    assert res["capacity_device_s"] == installed
    assert res["losses"]["out_of_service"] == oos > 0
    assert res["scheduling_goodput"] == pytest.approx(held / installed, rel=1e-15)
    in_service = cli_json("scheduling", path, "--format", "canonical")
    assert res["scheduling_goodput"] < in_service["scheduling_goodput"]
    assert "out_of_service" not in in_service["losses"]


def test_window_halves_add_up_to_the_whole(synth):
    path, made = synth
    start, end = made["window"]["start"], made["window"]["end"]
    mid = (pd.Timestamp(start) + (pd.Timestamp(end) - pd.Timestamp(start)) / 2).isoformat()
    whole = cli_json("scheduling", path, "--format", "canonical", "--window", start, end)
    a = cli_json("scheduling", path, "--format", "canonical", "--window", start, mid)
    b = cli_json("scheduling", path, "--format", "canonical", "--window", mid, end)
    for key in ("capacity_device_s", "held_device_s"):
        assert a[key] + b[key] == pytest.approx(whole[key], rel=1e-12)
    for k in LOSS_KEYS:
        assert a["losses"][k] + b["losses"][k] == pytest.approx(whole["losses"][k], rel=1e-12, abs=1e-6)
    assert a["capacity_device_s"] == pytest.approx(whole["capacity_device_s"] / 2, rel=0.2)


def test_synth_text_output(tmp_path):
    code, out, err = cli("synth", "allocations", "--n", 200, "--seed", 1, "--out", tmp_path / "f.parquet",
                         "--days", 2)
    assert code == 0, err
    assert "wrote 200 allocations" in out and str(tmp_path / "f.parquet") in out
    assert "injected scheduling goodput" in out and "--format canonical" in out


# ---------------------------------------------------------------------------------------------------
# Helios through the command line: the raw files' own arithmetic
# ---------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def raw_helios() -> dict[str, pd.DataFrame]:
    return {p.name.split(".")[0]: pd.read_csv(p, parse_dates=["time"]) for p in VCS}


def _raw_numbers(raw: pd.DataFrame) -> dict[str, float]:
    assert (raw["running_gpu_num"] + raw["idle_gpu_num"] == raw["total_gpu_num"]).all()
    queued = raw["pending_gpujob_num"] > 0
    return {
        "capacity_device_s": raw["total_gpu_num"].sum() * 60.0,
        "held_device_s": raw["running_gpu_num"].sum() * 60.0,
        "idle_with_queue": raw.loc[queued, "idle_gpu_num"].sum() * 60.0,
        "idle_empty_queue": raw.loc[~queued, "idle_gpu_num"].sum() * 60.0,
    }


def test_helios_through_the_cli(raw_helios):
    res = cli_json("scheduling", *VCS, QUOTA, "--format", "helios-sequence")
    assert set(res) == TOP_KEYS and set(res["pools"]) == set(raw_helios) and len(raw_helios) == 5
    for name, raw in raw_helios.items():
        want = _raw_numbers(raw)
        p = res["pools"][name]
        assert p["scheduling_goodput"] == pytest.approx(want["held_device_s"] / want["capacity_device_s"],
                                                        rel=1e-12)
        assert p["capacity_device_s"] == want["capacity_device_s"]
        assert p["held_device_s"] == want["held_device_s"]
        assert p["losses"]["idle_with_queue"] == want["idle_with_queue"]
        assert p["losses"]["idle_empty_queue"] == want["idle_empty_queue"]
        assert p["losses"]["unattributed"] == 0.0
        assert p["losses"]["partial_gang_hold"] is None and p["losses"]["reservation"] is None  # unobservable
    # cross-pool: idle while *any* VC had a pending GPU job
    any_queued = pd.concat([r.set_index("time")["pending_gpujob_num"] > 0 for r in raw_helios.values()],
                           axis=1).any(axis=1)
    cross = sum((r.set_index("time")["idle_gpu_num"] * any_queued).sum() * 60.0 for r in raw_helios.values())
    assert res["cross_pool_losses"]["idle_with_queue"] == cross
    # the glitch day in the quota file is a named repair, not a silent fix
    (entry,) = res["ledger"]["entries"]
    assert entry["action"] == "repaired" and entry["row"] == 40 and "glitch" in entry["reason"]


def test_helios_window_in_local_time(raw_helios):
    res = cli_json("scheduling", *VCS, "--format", "helios-sequence",
                   "--window", "2020-05-10T00:00+08:00", "2020-05-11T00:00+08:00")
    for name, raw in raw_helios.items():
        day = raw[(raw["time"] >= "2020-05-10") & (raw["time"] < "2020-05-11")]
        assert len(day) == 1440
        want = _raw_numbers(day)
        p = res["pools"][name]
        assert p["capacity_device_s"] == want["capacity_device_s"]
        assert p["held_device_s"] == want["held_device_s"]
        assert p["losses"]["idle_with_queue"] == want["idle_with_queue"]


def test_helios_text_output_has_units():
    code, out, err = cli("scheduling", *VCS[:2], "--format", "helios-sequence")
    assert code == 0, err
    assert "scheduling goodput S" in out and "device-h" in out and "availability" in out
    assert VCS[0].name.split(".")[0] in out and "ledger:" in out
    assert "nan" not in out.lower()


# ---------------------------------------------------------------------------------------------------
# Other formats
# ---------------------------------------------------------------------------------------------------


def test_slurm_sample_through_the_cli():
    res = cli_json("scheduling", *SLURM, "--format", "slurm", "--tz", "UTC",
                   "--window", "2024-03-04T00:00Z", "2024-03-05T00:00Z")
    assert set(res["pools"]) == {"gpu", "h100"}
    observed = [v for v in res["losses"].values() if v is not None]  # null: not observable in sacct
    assert res["held_device_s"] + sum(observed) == pytest.approx(res["capacity_device_s"], rel=1e-12)
    led = res["ledger"]
    assert led["read"] == led["kept"] + led["repaired"] + led["rejected"]


def test_openb_gives_cohorts_not_goodput():
    res = cli_json("scheduling", *OPENB, "--format", "openb")
    assert res["format"] == "openb" and "scheduling_goodput" not in res
    pods = pd.read_csv(OPENB[0])
    assert sum(c["pods"] for c in res["cohorts"]) == len(pods)
    eight = res["cohorts"][[c["cohort"] for c in res["cohorts"]].index("8 GPUs")]
    assert eight["pods"] == int((pods["num_gpu"] == 8).sum())
    assert sum(r["devices"] for r in res["installed"]) == 6212
    code, out, _ = cli("scheduling", *OPENB, "--format", "openb")
    assert code == 0 and "8 GPUs" in out and "installed GPUs: 6,212" in out


def test_render_handles_a_pool_without_capacity():
    res = {"scheduling_goodput": 0.5, "capacity_device_s": 7200.0, "held_device_s": 3600.0,
           "availability": None, "losses": dict.fromkeys(LOSS_KEYS, 0.0) | {"idle_empty_queue": 3600.0},
           "cross_pool_losses": {"idle_with_queue": 0.0, "idle_empty_queue": 3600.0},
           "pools": {"a": {"scheduling_goodput": None, "capacity_device_s": 0.0, "held_device_s": 0.0,
                           "losses": dict.fromkeys(LOSS_KEYS, 0.0)}},
           "ledger": {"read": 1, "kept": 1, "repaired": 0, "rejected": 0, "flags": ["allocated above"]}}
    text = render_scheduling(res)
    assert "2.0 device-h" in text and "availability             -" in text
    assert "flag: allocated above" in text


# ---------------------------------------------------------------------------------------------------
# Bad arguments and unreadable input: exit 2, one line, no traceback
# ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["scheduling", "missing.csv", "--format", "helios-sequence"], "not found"),
        (["scheduling", "data/scheduler/README.md", "--format", "canonical"], "Parquet"),
        (["scheduling", "data/scheduler/README.md", "--format", "helios-sequence"], "README.md"),
        (["scheduling", "data/scheduler", "--format", "slurm", "--tz", "UTC"], "folder"),
        (["scheduling", *map(str, SLURM), "--format", "slurm"], "tz"),
        (["scheduling", *map(str, SLURM), "--format", "slurm", "--tz", "Mars/Olympus"], "zone"),
        (["scheduling", str(VCS[0]), "--format", "sge"], "invalid choice"),
        (["scheduling", str(VCS[0]), "--format", "helios-sequence", "--denominator", "quota"],
         "invalid choice"),
        (["scheduling", "--format", "helios-sequence"], "FILE"),
        (["scheduling", str(VCS[0]), "--format", "helios-sequence", "--window", "2020-05-10"], "window"),
        (["scheduling", str(VCS[0]), "--format", "helios-sequence", "--window", "2020-05-10", "2020-05-11"],
         "no zone"),
        (["scheduling", str(VCS[0]), "--format", "helios-sequence", "--window", "soon", "2020-05-11T00:00Z"],
         "ISO 8601"),
        (["scheduling", str(VCS[0]), "--format", "helios-sequence", "--window", "2020-05-11T00:00Z",
          "2020-05-10T00:00Z"], "after"),
        (["scheduling", str(VCS[0]), "--format", "helios-sequence", "--window", "2021-01-01T00:00Z",
          "2021-01-02T00:00Z"], "no in-service capacity"),
        (["synth", "allocations", "--n", "0", "--out", "/tmp/never-written.parquet"], "n must be"),
        (["synth", "allocations", "--n", "ten", "--out", "/tmp/never-written.parquet"], "invalid int"),
        (["synth", "allocations", "--n", "10", "--out", "/no/such/folder/f.parquet"], "does not exist"),
        (["synth", "allocations", "--n", "10", "--days", "-1", "--out", "/tmp/never-written.parquet"],
         "days"),
        (["synth", "allocations", "--out", "/tmp/never-written.parquet"], "--n"),
    ],
)
def test_bad_arguments_exit_2_with_one_line(argv, needle, monkeypatch):
    monkeypatch.chdir(ROOT)
    code, out, err = cli(*argv, "--json")
    assert code == 2, err
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "error" in lines[0] and needle in lines[0], lines[0]
    assert "Traceback" not in err
    assert not Path("/tmp/never-written.parquet").exists()


def test_parse_window():
    w = cli_window(["2020-05-10T00:00+08:00", "2020-05-10T01:00Z"], None)
    s, e = w.start, w.end
    assert s == pd.Timestamp("2020-05-09T16:00Z") and e == pd.Timestamp("2020-05-10T01:00Z")
    assert str(s.tz) == "UTC" and w.exclusions == ()
