"""Tests of the scheduler-record readers (fleetlib.scheduling.readers) and the bad-input corpus.

Expected values come from hand arithmetic on the bundled sample files, from the field notes' published
figures (openb waits, node totals, the Helios glitch day), or from a second, plain pandas pass over the
raw files -- never from the reader itself.
"""

from __future__ import annotations

import gzip
import json
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fleetlib.accounting import Window
from fleetlib.quality import DomainError, InputError, Ledger
from fleetlib.scheduling.commands import scheduling_command
from fleetlib.scheduling.goodput import scheduling_partition
from fleetlib.scheduling.readers import READERS, read
from fleetlib.scheduling.readers._common import queue_from_pending
from fleetlib.scheduling.readers.helios import detect_quota_glitch_days
from fleetlib.scheduling.readers.kueue import KUEUE_EVICTED_STATES, KUEUE_FINISHED_STATES
from fleetlib.scheduling.readers.slurm import SLURM_END_STATES, expand_hostlist
from fleetlib.scheduling.records import (
    SchedulerRecords,
    validate_allocations,
    validate_capacity,
    validate_occupancy,
    validate_queue,
)
from fleetlib.scheduling.schema import (
    ALLOCATION_COLUMNS,
    CAPACITY_COLUMNS,
    END_STATES,
    OCCUPANCY_COLUMNS,
    QUEUE_COLUMNS,
    WAIT_COLUMNS,
)
from fleetlib.scheduling.views import openb_cohorts, silent_stretches

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "data" / "scheduler"
CORPUS = Path(__file__).resolve().parents[1] / "corpus" / "scheduling"
HELIOS = DATA / "helios_earth_may2020"
VCS = sorted(HELIOS.glob("vc*.csv.gz"))
SLURM = [DATA / "slurm_sample" / n for n in ("sacct.txt", "sacctmgr_events.txt", "sinfo_nodes.txt")]
SLURM_WINDOW = ("2024-03-04T00:00Z", "2024-03-05T00:00Z")
KUEUE = DATA / "kueue_sample" / "workloads.yaml"
KUEUE_WINDOW = ("2024-05-06T08:00Z", "2024-05-06T16:00Z")
VOLCANO = DATA / "volcano_sample" / "podgroups.jsonl"
VOLCANO_WINDOW = ("2024-06-03T09:00Z", "2024-06-03T16:00Z")
OPENB = DATA / "alibaba_openb_2023"


def T(text: str) -> pd.Timestamp:
    return pd.Timestamp(text, tz="UTC")


def balanced(ledger: Ledger) -> bool:
    return ledger.read == ledger.kept + ledger.repaired + ledger.rejected and ledger.balanced()


def entries(ledger: Ledger, action: str | None = None) -> list:
    return [e for e in ledger.entries if action is None or e.action == action]


def only_entry(ledger: Ledger, action: str):
    found = entries(ledger, action)
    assert len(found) == 1, found
    return found[0]


def only_flag(ledger: Ledger):
    assert len(ledger.flags) == 1, ledger.flags
    return ledger.flags[0]


def row_of(alloc: pd.DataFrame, job_id: str, attempt: int = 0) -> pd.Series:
    sub = alloc[(alloc["job_id"] == job_id) & (alloc["attempt"] == attempt)]
    assert len(sub) == 1, (job_id, attempt, sub)
    return sub.iloc[0]


def at(table: pd.DataFrame, pool: str, when: str) -> pd.Series:
    t = T(when)
    sub = table[(table["pool"] == pool) & (table["start"] <= t) & (table["end"] > t)]
    assert len(sub) == 1, (pool, when, sub)
    return sub.iloc[0]


@pytest.fixture(scope="module")
def slurm():
    return READERS["slurm"].read(SLURM, tz="UTC", window=SLURM_WINDOW)


@pytest.fixture(scope="module")
def kueue():
    return READERS["kueue"].read(KUEUE, window=KUEUE_WINDOW)


@pytest.fixture(scope="module")
def volcano():
    return READERS["volcano"].read(VOLCANO, window=VOLCANO_WINDOW)


@pytest.fixture(scope="module")
def helios():
    return READERS["helios-sequence"].read([*VCS, HELIOS / "Earth_gpu_number.csv"])


@pytest.fixture(scope="module")
def openb():
    return READERS["openb"].read([OPENB / "openb_pod_list_default.csv.gz",
                                  OPENB / "openb_node_list_gpu_node.csv"])


# ------------------------------------------------------------------------------------------------
# Bundled data: what is shipped and its licences
# ------------------------------------------------------------------------------------------------


def test_bundled_data_sits_beside_its_licences():
    assert len(VCS) == 5
    assert {p.name.split(".")[0] for p in VCS} == {"vc6YE", "vcvlY", "vchbv", "vcMod", "vc3sl"}
    assert (HELIOS / "LICENSE.HeliosArtifact").read_text().startswith("MIT License")
    assert "Apache License" in (OPENB / "LICENSE.kubernetes-scheduler-simulator").read_text()
    total = sum(p.stat().st_size for p in DATA.rglob("*") if p.is_file())
    assert total < 2_000_000  # small: the Helios VCs are the bulk


# ------------------------------------------------------------------------------------------------
# Slurm: sacct --parsable2 + sacctmgr events + sinfo nodes
# ------------------------------------------------------------------------------------------------


def test_slurm_sample_ledger_accounts_for_every_line(slurm):
    rec, ledger = slurm
    assert isinstance(rec, SchedulerRecords) and rec.source == ",".join(str(p) for p in SLURM)
    # 46 sacct records + 4 events + 4 node lines (headers are not rows)
    assert ledger.read == 46 + 4 + 4
    assert balanced(ledger)
    # job steps (123.batch, 123.0) and the cluster's registration line are kept, used by nothing, counted
    assert ledger.unused == {"sacct job step (123.batch, 123.0)": 25,
                             "sacctmgr Cluster Registered TRES line": 1}
    assert not any("step" in e.reason or "cluster-level" in e.reason for e in ledger.entries)
    cpu = [e for e in entries(ledger, "rejected") if "CPU-only" in e.reason]
    assert [(e.row, e.field) for e in cpu] == [(36, "AllocTRES")]
    assert (ledger.rejected, ledger.repaired, ledger.kept) == (1 + 1, 3, 54 - 2 - 3)
    json.dumps(ledger.to_dict())  # JSON-ready for the CLI


def test_slurm_step_lines_and_the_tres_line_are_unused_and_other_cluster_events_rejected(tmp_path):
    head, *lines = (DATA / "slurm_sample" / "sacct.txt").read_text().splitlines()
    jobs = [ln for ln in lines if "." not in ln.split("|")[0]]
    steps = [ln for ln in lines if "." in ln.split("|")[0]]
    sacct = tmp_path / "sacct.txt"
    sacct.write_text("\n".join([head, *jobs, *steps, *steps[:2]]) + "\n")  # two steps printed twice
    ev_head, *events = (DATA / "slurm_sample" / "sacctmgr_events.txt").read_text().splitlines()
    tres = [e for e in events if "Cluster Registered TRES" in e]
    other = "atlas||2024-03-04T01:00:00|2024-03-04T02:00:00|DOWN|cluster-wide power event|root(0)"
    ev = tmp_path / "sacctmgr_events.txt"
    ev.write_text("\n".join([ev_head, *events, *tres, other]) + "\n")
    _, ledger = read([sacct, ev, SLURM[2]], "slurm", tz="UTC", window=SLURM_WINDOW)
    assert len(steps) == 25 and len(tres) == 1
    # a step printed twice is still a duplicate; every other step and each TRES line is counted unused
    assert ledger.unused == {"sacct job step (123.batch, 123.0)": 25,
                             "sacctmgr Cluster Registered TRES line": 2}
    assert len([e for e in ledger.entries if e.reason.startswith("duplicate")]) == 2
    (cluster,) = [e for e in ledger.entries if "cluster-level" in e.reason]
    assert cluster.row == len(events) + len(tres) + 2 and cluster.field == "NodeName"
    assert balanced(ledger)


def test_slurm_allocations_hand_checked(slurm):
    a = slurm[0].allocations
    assert tuple(a.columns) == ALLOCATION_COLUMNS
    assert str(a["first_assigned"].dtype) == "datetime64[ns, UTC]"
    started = a["first_assigned"].notna()
    # Slurm allocates atomically: Start is both the first assignment and gang completion
    assert (a.loc[started, "first_assigned"] == a.loc[started, "gang_complete"]).all()
    r = row_of(a, "41004", 0)
    assert (r.pool, r.devices, r.end_state) == ("h100", 16, "node_fail")
    assert (r.first_assigned, r.release) == (T("2024-03-04 00:01:00"), T("2024-03-04 04:30:05"))
    r = row_of(a, "41004", 1)  # requeued after the node failure, waited for both nodes
    assert (r.submit, r.first_assigned, r.end_state) == (
        T("2024-03-04 04:30:05"),
        T("2024-03-04 08:05"),
        "completed",
    )
    assert row_of(a, "41005", 0).end_state == "preempted"
    assert row_of(a, "41005", 1).first_assigned == T("2024-03-04 10:00:40")
    r = row_of(a, "41003")  # "CANCELLED by 20311"
    assert (r.devices, r.end_state) == (32, "cancelled")
    assert row_of(a, "41002").devices == 8  # typed and untyped gres/gpu both present: counted once
    assert row_of(a, "41008_2").devices == 2  # array task ids kept as printed
    r = row_of(a, "41010")  # still running: censored at the window end
    assert (r.release, r.end_state) == (T("2024-03-05"), "running")
    r = row_of(a, "41011")  # still pending: a row without devices, leaves the queue at the window end
    assert pd.isna(r.first_assigned) and pd.isna(r.gang_complete)
    assert (r.devices, r.requested_devices, r.release, r.end_state) == (0, 32, T("2024-03-05"), "pending")
    r = row_of(a, "41012")  # cancelled while pending (Start = End = cancel time, no AllocTRES)
    assert pd.isna(r.first_assigned) and (r.release, r.end_state) == (T("2024-03-04 13:00"), "cancelled")
    assert "41013" not in set(a["job_id"])  # CPU-only
    assert len(a) == 20 and not a["elastic"].any()


def test_slurm_held_time_matches_a_second_pass_over_the_raw_text(slurm):
    rec = slurm[0]
    # independent: plain Python over the sacct text
    held: dict[str, float] = {}
    lines = (DATA / "slurm_sample" / "sacct.txt").read_text().splitlines()
    header = lines[0].split("|")
    for line in lines[1:]:
        f = dict(zip(header, line.split("|"), strict=True))
        if "." in f["JobID"] or "gres/gpu=" not in f["AllocTRES"]:
            continue
        gpus = int(f["AllocTRES"].split("gres/gpu=")[1].split(",")[0])
        end = T("2024-03-05") if f["End"] == "Unknown" else T(f["End"])
        held[f["Partition"]] = held.get(f["Partition"], 0.0) + gpus * (end - T(f["Start"])).total_seconds()
    part = scheduling_partition(rec.allocations, rec.capacity, queue=rec.queue)
    assert part.table["held_device_s"].to_dict() == pytest.approx(held, rel=1e-12)
    # h100 by hand: 16*16145 + 8*11400 + 16*21300 + 8*14280 + 16*14400 s
    assert held["h100"] == 1_034_960.0


def test_slurm_capacity_from_events_and_inventory(slurm):
    cap = slurm[0].capacity
    assert tuple(cap.columns) == CAPACITY_COLUMNS
    h = cap[cap["pool"] == "h100"]
    assert h["devices_in_service"].tolist() == [16, 8, 16, 8, 16]
    assert h["start"].tolist()[1:3] == [T("2024-03-04 04:30:05"), T("2024-03-04 08:01:10")]
    assert at(cap, "h100", "2024-03-04 16:00")["devices_out_of_service"] == 8  # the drain
    assert at(cap, "gpu", "2024-03-04 23:00")["devices_in_service"] == 24  # drain still open: censored
    dur = (cap["end"] - cap["start"]).dt.total_seconds()
    in_service_s = (cap["devices_in_service"] * dur).groupby(cap["pool"]).sum().to_dict()
    # by hand: 32*86400 - 8*5400 ; 16*86400 - 8*12665 - 8*9000
    assert in_service_s == {"gpu": 2_721_600.0, "h100": 1_209_080.0}
    assert "cpu" not in set(cap["pool"])  # the CPU node has no GPUs


def test_slurm_queue_hand_checked(slurm):
    q = slurm[0].queue
    assert tuple(q.columns) == QUEUE_COLUMNS
    r = at(q, "gpu", "2024-03-04 03:00")  # 41003 (32 GPUs) and the requeued 41005 (8) wait
    assert (r.pending_jobs, r.pending_devices) == (2, 40)
    r = at(q, "gpu", "2024-03-04 12:45")  # 41012 waits until it is cancelled at 13:00
    assert (r.pending_jobs, r.pending_devices) == (1, 16)
    r = at(q, "gpu", "2024-03-04 21:00")  # 41011 still pending at the end
    assert (r.pending_jobs, r.pending_devices) == (1, 32)
    r = at(q, "h100", "2024-03-04 05:00")  # 41004 waits for both nodes after the failure
    assert (r.pending_jobs, r.pending_devices) == (1, 16)


def test_slurm_tables_pass_the_canonical_validators(slurm):
    rec = slurm[0]
    _, la = validate_allocations(rec.allocations)
    assert la.entries == [] and la.kept == la.read == len(rec.allocations)
    for validate, table in ((validate_capacity, rec.capacity), (validate_queue, rec.queue)):
        _, lv = validate(table)
        assert lv.kept == lv.read == len(table)


def test_end_state_maps_only_name_canonical_states():
    for mapping in (SLURM_END_STATES, KUEUE_FINISHED_STATES, KUEUE_EVICTED_STATES):
        assert set(mapping.values()) <= set(END_STATES)
    assert SLURM_END_STATES["REQUEUED"] == "preempted" and SLURM_END_STATES["PENDING"] == "pending"


def test_slurm_naive_times_need_a_zone():
    with pytest.raises(InputError) as exc:
        READERS["slurm"].read(SLURM[0])
    assert exc.value.field == "Submit" and exc.value.row == 2 and "tz=" in str(exc.value)


def test_slurm_zone_is_applied():
    rec, _ = READERS["slurm"].read(SLURM, tz="America/Chicago",
                                   window=("2024-03-04T06:00Z", "2024-03-05T06:00Z"))
    # 2024-03-04 is before the US DST change: Chicago is UTC-6
    assert row_of(rec.allocations, "41001").first_assigned == T("2024-03-04 06:07:40")
    with pytest.raises(DomainError):
        READERS["slurm"].read(SLURM, tz="Mars/Olympus")


def test_slurm_window_must_be_aware_and_ordered():
    with pytest.raises(DomainError):
        READERS["slurm"].read(SLURM, tz="UTC", window=("2024-03-04", "2024-03-05"))
    with pytest.raises(DomainError):
        READERS["slurm"].read(SLURM, tz="UTC", window=("2024-03-05T00:00Z", "2024-03-04T00:00Z"))


def test_slurm_overlapping_dumps_are_deduplicated(tmp_path, slurm):
    lines = (DATA / "slurm_sample" / "sacct.txt").read_text().splitlines()
    (tmp_path / "a.txt").write_text("\n".join(lines[:30]) + "\n")
    (tmp_path / "b.txt").write_text("\n".join([lines[0], *lines[20:]]) + "\n")
    rec, ledger = READERS["slurm"].read(
        [tmp_path / "a.txt", tmp_path / "b.txt", *SLURM[1:]], tz="UTC", window=SLURM_WINDOW
    )
    dups = [e for e in ledger.entries if e.reason.startswith("duplicate row")]
    assert len(dups) == 10 and all(e.file.endswith("b.txt") for e in dups)
    pd.testing.assert_frame_equal(rec.allocations, slurm[0].allocations)
    assert balanced(ledger)


def test_slurm_without_inventory_has_no_capacity():
    rec, ledger = READERS["slurm"].read(SLURM[0], tz="UTC")
    assert rec.capacity is None and balanced(ledger)
    assert rec.extra["notes"]["window"].startswith("2024-03-04T00:00:30")


def test_expand_hostlist():
    assert expand_hostlist("gpu-a[001-003,007],gpu-h01") == [
        "gpu-a001",
        "gpu-a002",
        "gpu-a003",
        "gpu-a007",
        "gpu-h01",
    ]
    assert expand_hostlist("r[1-2]n[01-02]") == ["r1n01", "r1n02", "r2n01", "r2n02"]
    for bad in ("gpu-a[001-003", "gpu-a001]", "gpu-a[x-y]"):
        with pytest.raises(ValueError):
            expand_hostlist(bad)


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 50), st.integers(0, 5)), min_size=1, max_size=4), st.integers(1, 4))
def test_expand_hostlist_counts(ranges, width):
    expr = "n[" + ",".join(f"{lo:0{width}d}-{lo + k:0{width}d}" for lo, k in ranges) + "]"
    names = expand_hostlist(expr)
    assert len(names) == sum(k + 1 for _, k in ranges)
    assert all(n.startswith("n") for n in names)


_SACCT_HEADER = "JobID|Partition|Submit|Eligible|Start|End|State|AllocTRES|ReqTRES"


@st.composite
def sacct_rows(draw):
    rows = []
    for i in range(draw(st.integers(1, 25))):
        kind = draw(st.sampled_from(["job", "job", "job", "step", "pending", "garbage", "backwards", "dup"]))
        sub = draw(st.integers(0, 20_000))
        wait = draw(st.integers(0, 5_000))
        dur = draw(st.integers(1, 20_000))
        gpus = draw(st.sampled_from([1, 2, 4, 8, 16]))
        state = draw(st.sampled_from(["COMPLETED", "FAILED", "CANCELLED by 7", "TIMEOUT", "WEIRD"]))
        part = draw(st.sampled_from(["a", "b"]))

        def t(s):
            return (pd.Timestamp("2024-01-01") + pd.Timedelta(seconds=s)).strftime("%Y-%m-%dT%H:%M:%S")

        tres = f"cpu=8,gres/gpu={gpus},node=1"
        if kind == "step":
            rows.append(f"{i}.batch||{t(sub)}|Unknown|{t(sub)}|{t(sub + dur)}|COMPLETED|{tres}|")
        elif kind == "pending":
            rows.append(f"{i}|{part}|{t(sub)}|{t(sub)}|Unknown|Unknown|PENDING||{tres}")
        elif kind == "garbage":
            rows.append(f"{i}|{part}|not-a-time")
        elif kind == "backwards":
            rows.append(
                f"{i}|{part}|{t(sub)}|{t(sub)}|{t(sub + wait + dur)}|{t(sub + wait)}|{state}|{tres}|{tres}"
            )
        else:
            row = f"{i}|{part}|{t(sub)}|{t(sub)}|{t(sub + wait)}|{t(sub + wait + dur)}|{state}|{tres}|{tres}"
            rows.append(row)
            if kind == "dup":
                rows.append(row)
    return rows


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sacct_rows())
def test_slurm_every_line_is_accounted_for(rows):
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "sacct.txt"
        path.write_text("\n".join([_SACCT_HEADER, *rows]) + "\n")
        try:
            rec, ledger = READERS["slurm"].read(path, tz="UTC")
        except InputError as exc:  # every row rejected: no window can be formed
            assert "no usable job records" in str(exc)
            return
    assert ledger.read == len(rows) and balanced(ledger)
    a = rec.allocations
    # every line that is neither rejected nor unused (a job step) becomes exactly one allocation row
    assert len(a) == ledger.kept + ledger.repaired - sum(ledger.unused.values())
    s = a["first_assigned"].notna()
    assert (a.loc[s, "submit"] <= a.loc[s, "first_assigned"]).all()
    assert (a.loc[s, "gang_complete"] <= a.loc[s, "release"]).all()
    assert (a["release"] >= a["submit"]).all()
    assert a["end_state"].isin(["completed", "failed", "cancelled", "timeout", "unknown", "pending"]).all()


# ------------------------------------------------------------------------------------------------
# Kueue Workloads
# ------------------------------------------------------------------------------------------------


def test_kueue_sample_ledger(kueue):
    _, ledger = kueue
    assert ledger.read == 14 and balanced(ledger)  # 2 ClusterQueues, 2 LocalQueues, 10 Workload snapshots
    assert (ledger.kept, ledger.repaired, ledger.rejected) == (11, 3, 0)
    reasons = sorted(e.reason.split(":")[0] for e in ledger.entries)
    assert reasons == [
        "gang never completed (PodsReady never True before release)",
        "still holding at the end of the record",
        "still pending at the end of the record",
    ]


def test_kueue_allocations_hand_checked(kueue):
    a = kueue[0].allocations
    r = row_of(a, "team-a/llm-pretrain")
    assert (r.pool, r.devices, r.requested_devices, r.priority) == ("team-a-cq", 16, 16, 1000.0)
    assert (r.gang_complete - r.first_assigned).total_seconds() == 218  # Admitted -> PodsReady
    # three snapshots of one Workload make two attempts
    r0, r1 = row_of(a, "team-a/rl-finetune", 0), row_of(a, "team-a/rl-finetune", 1)
    assert (r0.first_assigned, r0.gang_complete, r0.release, r0.end_state) == (
        T("2024-05-06 09:20"),
        T("2024-05-06 09:21:10"),
        T("2024-05-06 10:00"),
        "preempted",
    )
    assert (r1.submit, r1.first_assigned, r1.gang_complete, r1.release, r1.end_state) == (
        T("2024-05-06 10:00"),
        T("2024-05-06 11:00:05"),
        T("2024-05-06 11:01"),
        T("2024-05-06 14:00"),
        "completed",
    )
    r = row_of(a, "team-b/moe-debug")  # PodsReady timeout: the gang never completed
    assert (r.gang_complete, r.release, r.end_state) == (
        T("2024-05-06 08:10:01"),
        T("2024-05-06 08:10:01"),
        "failed",
    )
    e0, e1 = row_of(a, "team-b/elastic-sft", 0), row_of(a, "team-b/elastic-sft", 1)
    assert e0.elastic and e1.elastic and (e0.devices, e1.devices) == (8, 16)
    assert e0.release == e1.first_assigned == T("2024-05-06 13:00")
    assert (e1.release, e1.end_state) == (T("2024-05-06 16:00"), "running")
    r = row_of(a, "team-a/vlm-sft")  # never admitted: 40 GPUs asked of a 32-GPU quota
    assert pd.isna(r.first_assigned) and (r.devices, r.requested_devices, r.end_state) == (0, 40, "pending")
    assert len(a) == 9


def test_kueue_capacity_queue_and_validators(kueue):
    rec = kueue[0]
    cap = rec.capacity
    assert dict(zip(cap["pool"], cap["devices_in_service"], strict=True)) == {
        "team-a-cq": 32,
        "team-b-cq": 16,
    }
    assert (cap["start"] == T("2024-05-06 08:00")).all() and (cap["end"] == T("2024-05-06 16:00")).all()
    r = at(rec.queue, "team-a-cq", "2024-05-06 10:30")  # rl-finetune waits after its eviction
    assert (r.pending_jobs, r.pending_devices) == (1, 8)
    r = at(rec.queue, "team-a-cq", "2024-05-06 09:02")  # llm-pretrain waits until PodsReady
    assert (r.pending_jobs, r.pending_devices) == (1, 16)
    _, la = validate_allocations(rec.allocations)
    assert la.entries == [] and la.kept == la.read
    part = scheduling_partition(rec.allocations, rec.capacity, queue=rec.queue)
    # partial-gang hold by hand: 16*218 + 4*29 + 8*70 + 16*89 + 8*55 + 16*600 + 8*39 + 16*90 device-s
    assert (
        part.table["partial_gang_hold"].sum()
        == 16 * 218 + 4 * 29 + 8 * 70 + 16 * 89 + 8 * 55 + 16 * 600 + 8 * 39 + 16 * 90
    )


def test_kueue_pool_by_flavor(kueue):
    rec, ledger = READERS["kueue"].read(KUEUE, pool_by="flavor", window=KUEUE_WINDOW)
    assert set(rec.allocations["pool"]) == {"a100-80g", "h100-80g"}
    assert rec.queue is None and balanced(ledger)
    with pytest.raises(DomainError):
        READERS["kueue"].read(KUEUE, pool_by="namespace")


def test_kueue_json_list_reads_like_yaml(tmp_path, kueue):
    docs = [d for d in yaml.safe_load_all(KUEUE.read_text()) if d]
    (tmp_path / "w.json").write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": docs}))
    rec, ledger = READERS["kueue"].read(tmp_path / "w.json", window=KUEUE_WINDOW)
    pd.testing.assert_frame_equal(rec.allocations, kueue[0].allocations)
    assert ledger.read == 14 and (ledger.kept, ledger.repaired) == (11, 3)


# ------------------------------------------------------------------------------------------------
# Volcano PodGroup watch records
# ------------------------------------------------------------------------------------------------


def test_volcano_sample(volcano):
    rec, ledger = volcano
    assert ledger.read == 28 and balanced(ledger) and (ledger.repaired, ledger.rejected) == (2, 0)
    a = rec.allocations
    r = row_of(a, "ml/vit-pretrain-pg")  # Unknown (3 of 4 running) for two minutes, then Running
    assert (r.first_assigned, r.gang_complete, r.end_state) == (
        T("2024-06-03 11:00"),
        T("2024-06-03 11:02"),
        "failed",
    )
    r = row_of(a, "ml/llm-sft-pg", 0)  # pods ran before the phase said Running: partial hold
    assert (r.first_assigned, r.gang_complete, r.release, r.end_state) == (
        T("2024-06-03 10:05:40"),
        T("2024-06-03 10:06:30"),
        T("2024-06-03 12:00"),
        "preempted",
    )
    r = row_of(a, "ml/llm-sft-pg", 1)  # reclaimed, waits again, runs again
    assert (r.submit, r.first_assigned, r.end_state) == (
        T("2024-06-03 12:00"),
        T("2024-06-03 13:00:40"),
        "completed",
    )
    assert row_of(a, "ml/rl-sweep-pg").end_state == "cancelled"  # DELETED while running
    r = row_of(a, "ml/bert-hpo-pg")
    assert (r.release, r.end_state) == (T("2024-06-03 16:00"), "running")
    r = row_of(a, "ml/giant-moe-pg")
    assert pd.isna(r.first_assigned) and (r.requested_devices, r.end_state) == (32, "pending")
    cap = rec.capacity
    assert dict(zip(cap["pool"], cap["devices_in_service"], strict=True)) == {"batch": 16, "research": 32}
    r = at(rec.queue, "research", "2024-06-03 12:30")
    assert (r.pending_jobs, r.pending_devices) == (1, 16)
    _, la = validate_allocations(a)
    assert la.entries == [] and la.kept == la.read


# ------------------------------------------------------------------------------------------------
# Helios per-VC minute sequences: the acceptance check against the raw files' own arithmetic
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", VCS, ids=lambda p: p.name)
def test_helios_reproduces_the_raw_arithmetic(helios, path):
    rec, _ = helios
    raw = pd.read_csv(path)  # the plain pass
    assert (raw["running_gpu_num"] + raw["idle_gpu_num"] == raw["total_gpu_num"]).all()
    s_raw = raw["running_gpu_num"].sum() / raw["total_gpu_num"].sum()
    queued = raw["pending_gpujob_num"] > 0
    idle_q_raw = raw.loc[queued, "idle_gpu_num"].sum() * 60.0
    idle_e_raw = raw.loc[~queued, "idle_gpu_num"].sum() * 60.0
    pool = path.name.split(".")[0]
    occ = rec.occupancy[rec.occupancy["pool"] == pool]
    assert len(occ) == len(raw) == 44_640
    dur = (occ["end"] - occ["start"]).dt.total_seconds()
    assert (occ["held_complete"] * dur).sum() / (occ["in_service"] * dur).sum() == pytest.approx(
        s_raw, rel=1e-12
    )
    row = scheduling_partition(occupancy=rec.occupancy).table.loc[pool]
    assert row["held_device_s"] / row["capacity_device_s"] == pytest.approx(s_raw, rel=1e-12)
    assert row["idle_with_queue"] == pytest.approx(idle_q_raw, rel=1e-12)
    assert row["idle_empty_queue"] == pytest.approx(idle_e_raw, rel=1e-12)
    assert row["unattributed"] == 0.0 and row["partial_gang_hold"] == 0.0


def test_helios_tables_and_zone(helios):
    rec, ledger = helios
    occ = rec.occupancy
    assert tuple(occ.columns) == OCCUPANCY_COLUMNS
    assert set(occ["pool"]) == {"vc6YE", "vcvlY", "vchbv", "vcMod", "vc3sl"}
    # naive Helios times are China wall clock (UTC+8): May 1 00:00 local is April 30 16:00 UTC
    assert occ["start"].min() == T("2020-04-30 16:00") and occ["end"].max() == T("2020-05-31 16:00")
    assert ledger.read == 5 * 44_640 + 181 and balanced(ledger)
    assert rec.extra["notes"]["quota_check"].startswith("0 of 223200")
    one = occ[occ["pool"] == "vc6YE"]
    _, lv = validate_occupancy(one)
    assert lv.kept == lv.read == len(one)


def test_helios_glitch_day_is_carried_and_named(helios):
    rec, ledger = helios
    e = only_entry(ledger, "repaired")
    assert e.file.endswith("Earth_gpu_number.csv") and e.row == 40  # line 40 = 2020-05-09
    assert "glitch" in e.reason and "carried forward" in e.reason
    q = rec.extra["quota"]
    day = q[q["start"] == pd.Timestamp("2020-05-09", tz="Asia/Shanghai")]
    assert dict(zip(day["pool"], day["devices_in_service"], strict=True)) == {
        "vc6YE": 208,
        "vcvlY": 96,
        "vchbv": 64,
        "vcMod": 64,
        "vc3sl": 64,
    }
    assert rec.capacity is None  # the quota is a cross-check, not the occupancy's denominator


def test_helios_glitch_day_can_be_rejected():
    rec, ledger = READERS["helios-sequence"].read([VCS[0], HELIOS / "Earth_gpu_number.csv"], glitch="reject")
    e = only_entry(ledger, "rejected")
    assert e.row == 40 and "day rejected" in e.reason
    q = rec.extra["quota"]
    assert pd.Timestamp("2020-05-09", tz="Asia/Shanghai") not in set(q["start"])
    assert "1440 minutes have no quota day" in rec.extra["notes"]["quota_check"]
    with pytest.raises(DomainError):
        READERS["helios-sequence"].read(VCS[0], glitch="keep")
    with pytest.raises(DomainError):
        READERS["helios-sequence"].read(VCS[0], resolution_s=0)


def test_detect_quota_glitch_days_on_the_raw_quota_file():
    raw = pd.read_csv(HELIOS / "Earth_gpu_number.csv")
    flags = detect_quota_glitch_days(raw.drop(columns=["date", "total"]))
    assert raw.loc[flags.to_numpy(), "date"].tolist() == ["2020-05-09"]
    with pytest.raises(DomainError):
        detect_quota_glitch_days(raw.drop(columns=["date", "total"]), min_share=0)


# ------------------------------------------------------------------------------------------------
# Alibaba openb: waits and size cohorts, installed capacity
# ------------------------------------------------------------------------------------------------


def test_openb_waits_match_the_published_figures(openb):
    rec, ledger = openb
    assert rec.allocations is None and rec.capacity is None  # no time-based goodput from this sample
    w = rec.extra["waits"]
    assert tuple(w.columns) == WAIT_COLUMNS
    assert ledger.read == len(w) + 1213 == 8152 + 1213 and ledger.kept == ledger.read
    s = w[w["scheduled"]]
    # field notes: median 2 s, p90 106 s, max 14,330 s, 72 % of scheduled pods wait more than 0 s
    assert (
        s["wait_s"].median() == 2.0 and s["wait_s"].quantile(0.9) == 106.0 and s["wait_s"].max() == 14_330.0
    )
    assert (s["wait_s"] > 0).mean() == pytest.approx(0.72, abs=0.005)
    assert w["pod_phase"].value_counts().to_dict() == {
        "Running": 5193,
        "Failed": 1870,
        "Pending": 897,
        "Succeeded": 192,
    }
    assert (~w["scheduled"]).sum() == 897 and w.loc[~w["scheduled"], "wait_s"].isna().all()


def test_openb_installed_capacity(openb):
    inst = openb[0].extra["installed"]
    assert inst["nodes"].sum() == 1213 and inst["devices"].sum() == 6212  # field notes
    assert inst.set_index("model").loc["G2"].tolist() == [549, 4392]


def test_openb_cohorts_against_a_plain_pass(openb):
    raw = pd.read_csv(OPENB / "openb_pod_list_default.csv.gz")
    shared = (raw["num_gpu"] == 1) & (raw["gpu_milli"] < 1000)
    expected = {
        "CPU only": int((raw["num_gpu"] == 0).sum()),
        "shared (<1 GPU)": int(shared.sum()),
        "1 GPU": int(((raw["num_gpu"] == 1) & ~shared).sum()),
    }
    expected.update({f"{k} GPUs": int((raw["num_gpu"] == k).sum()) for k in (2, 4, 8)})
    c = openb_cohorts(openb[0].extra["waits"])
    assert dict(zip(c["cohort"], c["pods"], strict=True)) == expected
    assert c["cohort"].tolist() == ["CPU only", "shared (<1 GPU)", "1 GPU", "2 GPUs", "4 GPUs", "8 GPUs"]
    demand = raw.assign(d=np.where(raw["num_gpu"] == 1, raw["gpu_milli"] / 1000, raw["num_gpu"]))
    assert c["devices_requested"].sum() == pytest.approx(demand["d"].sum())
    assert (c["pods"] == c["scheduled_pods"] + c["never_scheduled"]).all()
    with pytest.raises(DomainError):
        openb_cohorts(pd.DataFrame({"cohort": []}))


# ------------------------------------------------------------------------------------------------
# queue_from_pending: the sweep conserves device-time
# ------------------------------------------------------------------------------------------------


@settings(max_examples=15, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(["a", "b"]), st.integers(0, 1000), st.integers(0, 500), st.integers(1, 16)),
        min_size=0,
        max_size=30,
    )
)
def test_queue_from_pending_conserves_waiting_device_time(items):
    base = T("2024-01-01")
    pool = [p for p, _, _, _ in items]
    start = [base + pd.Timedelta(seconds=s) for _, s, _, _ in items]
    end = [base + pd.Timedelta(seconds=s + d) for _, s, d, _ in items]
    dev = [g for _, _, _, g in items]
    q = queue_from_pending(
        pool, pd.Series(start, dtype="datetime64[ns, UTC]"), pd.Series(end, dtype="datetime64[ns, UTC]"), dev
    )
    assert tuple(q.columns) == QUEUE_COLUMNS
    dur = (q["end"] - q["start"]).dt.total_seconds()
    for p in ("a", "b"):
        m = q["pool"] == p
        want_dev = sum(g * d for (pp, _, d, g) in items if pp == p)
        want_jobs = sum(d for (pp, _, d, _) in items if pp == p)
        assert (q.loc[m, "pending_devices"] * dur[m]).sum() == want_dev
        assert (q.loc[m, "pending_jobs"] * dur[m]).sum() == want_jobs
        # contiguous, non-overlapping segments
        assert (q.loc[m, "start"].iloc[1:].to_numpy() == q.loc[m, "end"].iloc[:-1].to_numpy()).all()
    assert (q["pending_jobs"] >= 0).all() and (q["pending_devices"] >= 0).all()


# ------------------------------------------------------------------------------------------------
# Bad-input corpus: one small broken file per case; read == kept + repaired + rejected everywhere
# ------------------------------------------------------------------------------------------------


def test_corpus_slurm_duplicate_rows():
    rec, ledger = READERS["slurm"].read(CORPUS / "slurm_duplicate_rows.txt", tz="UTC")
    assert (ledger.read, ledger.kept, ledger.rejected) == (4, 3, 1) and balanced(ledger)
    e = only_entry(ledger, "rejected")
    assert e.row == 4 and e.reason == "duplicate row (same as line 3)"
    assert sorted(rec.allocations["job_id"]) == ["7001", "7002", "7003"]


def test_corpus_kueue_duplicate_objects():
    rec, ledger = READERS["kueue"].read(CORPUS / "kueue_duplicate_objects.yaml")
    assert (ledger.read, ledger.kept, ledger.rejected) == (2, 1, 1) and balanced(ledger)
    assert only_entry(ledger, "rejected").reason == "duplicate object (same as row 1)"
    assert len(rec.allocations) == 1


def test_corpus_helios_duplicate_minute():
    rec, ledger = READERS["helios-sequence"].read(CORPUS / "helios_duplicate_minute.csv")
    assert (ledger.read, ledger.kept, ledger.rejected) == (6, 4, 2) and balanced(ledger)
    assert [(e.row, e.reason) for e in ledger.entries] == [
        (4, "duplicate row"),
        (5, "second row for the same minute with different counts"),
    ]
    assert rec.occupancy["start"].is_unique


@pytest.mark.parametrize(
    ("reader", "path", "field", "code", "reason"),
    [
        (
            lambda p: READERS["slurm"].read(p, tz="UTC"),
            "slurm_unknown_state.txt",
            "State",
            "unknown_job_state",
            "unknown job state 'STAGE_OUT'",
        ),
        (READERS["kueue"].read, "kueue_unknown_reason.yaml", None, "unknown_end_reason",
         "end reason not recognised"),
        (
            READERS["volcano"].read,
            "volcano_unknown_phase.jsonl",
            "object.status.phase",
            "unknown_podgroup_phase",
            "unknown PodGroup phase 'Scheduling'",
        ),
    ],
)
def test_corpus_unknown_states_are_kept_and_flagged(reader, path, field, code, reason):
    rec, ledger = reader(CORPUS / path)
    # kept with a flag (not a repair): the row is unchanged, the flag names file, row and field
    assert balanced(ledger) and ledger.rejected == 0 and ledger.repaired == 0 and not ledger.entries
    f = only_flag(ledger)
    assert f.code == code and reason in f.message and f.field == field
    assert f.file == str(CORPUS / path) and f.row is not None and f.row >= 1
    a = rec.allocations
    assert a["first_assigned"].notna().all()  # the row is kept
    if "slurm" in path or "kueue" in path:
        assert "unknown" in set(a["end_state"])


def test_corpus_openb_bad_pods():
    rec, ledger = READERS["openb"].read(CORPUS / "openb_bad_pods.csv")
    assert (ledger.read, ledger.kept, ledger.repaired, ledger.rejected) == (10, 5, 0, 5) and balanced(ledger)
    got = {(e.row, e.field) for e in entries(ledger, "rejected")}
    assert got == {
        (4, "name"),
        (5, "scheduled_time"),
        (6, "gpu_milli"),
        (8, "creation_time"),
        (10, "deletion_time"),
    }
    f = only_flag(ledger)
    assert (f.code, f.field) == ("unknown_pod_phase", "pod_phase")
    assert f.message == "unknown pod phase 'Evicted' kept verbatim"
    w = rec.extra["waits"].set_index("pod")
    assert w.loc["p-ok-2", "devices"] == 0.5 and w.loc["p-ok-2", "cohort"] == "shared (<1 GPU)"
    assert not w.loc["p-pending", "scheduled"] and np.isnan(w.loc["p-pending", "wait_s"])


def test_corpus_openb_bad_nodes():
    rec, ledger = READERS["openb"].read(CORPUS / "openb_bad_nodes.csv")
    assert (ledger.read, ledger.kept, ledger.rejected) == (5, 2, 3) and balanced(ledger)
    assert rec.extra["installed"]["devices"].sum() == 10


def test_corpus_mixed_naive_and_aware_times_are_rejected():
    rec, ledger = READERS["slurm"].read(CORPUS / "slurm_mixed_timezones.txt", tz="UTC")
    e = only_entry(ledger, "rejected")
    assert (e.row, e.field) == (3, "Submit") and e.reason.startswith("mixed naive and timezone-aware times")
    assert sorted(rec.allocations["job_id"]) == ["7201", "7203"] and balanced(ledger)
    rec, ledger = READERS["helios-sequence"].read(CORPUS / "helios_mixed_timezones.csv")
    e = only_entry(ledger, "rejected")
    assert (e.row, e.field) == (5, "time") and "mixed" in e.reason and len(rec.occupancy) == 3
    # Kubernetes times must carry an offset: a naive one is rejected with the object
    rec, ledger = READERS["kueue"].read(CORPUS / "kueue_naive_time.yaml")
    e = only_entry(ledger, "rejected")
    assert (e.row, e.field) == (2, "status.conditions.lastTransitionTime")
    assert rec.allocations["job_id"].tolist() == ["team-a/good-job"]


def test_corpus_naive_times_without_a_zone_raise():
    with pytest.raises(InputError) as exc:
        READERS["slurm"].read(CORPUS / "slurm_mixed_timezones.txt")
    assert exc.value.row == 2


def test_corpus_release_before_gang_completion_is_rejected():
    rec, ledger = READERS["slurm"].read(CORPUS / "slurm_release_before_gang.txt", tz="UTC")
    e = only_entry(ledger, "rejected")
    assert (e.row, e.field) == (3, "End") and "before gang completion" in e.reason
    assert rec.allocations["job_id"].tolist() == ["7301"]
    rec, ledger = READERS["kueue"].read(CORPUS / "kueue_release_before_gang.yaml")
    assert only_entry(ledger, "rejected").reason == "released before its gang completed"
    assert rec.allocations.empty and balanced(ledger)


def test_corpus_elastic_without_marker_is_refused_rigid_is_inferred():
    rec, ledger = READERS["kueue"].read(CORPUS / "kueue_elastic_no_podsready.yaml")
    e = only_entry(ledger, "rejected")
    assert "elastic" in e.reason and "cannot be inferred" in e.reason
    assert rec.allocations.empty and balanced(ledger)
    rec, ledger = READERS["kueue"].read(CORPUS / "kueue_rigid_no_podsready.yaml")
    assert (ledger.kept, ledger.repaired) == (1, 0) and not ledger.entries
    f = only_flag(ledger)
    assert f.code == "gang_complete_inferred_at_admission" and "inferred at admission" in f.message
    r = rec.allocations.iloc[0]
    assert (
        r.gang_complete == r.first_assigned == T("2024-05-06 09:00")
        and r.devices == r.requested_devices == 16
    )


def test_corpus_volcano_gang_that_never_completes():
    rec, ledger = READERS["volcano"].read(CORPUS / "volcano_partial_gang.jsonl")
    e = only_entry(ledger, "repaired")
    assert e.row == 2 and "gang never completed" in e.reason
    r0, r1 = row_of(rec.allocations, "ml/pg-a", 0), row_of(rec.allocations, "ml/pg-a", 1)
    assert (r0.first_assigned, r0.gang_complete, r0.release) == (
        T("2024-06-03 09:00:30"),
        T("2024-06-03 09:10"),
        T("2024-06-03 09:10"),
    )
    assert (r1.submit, r1.end_state) == (T("2024-06-03 09:10"), "failed")


def test_corpus_allocated_above_capacity_is_kept_not_clipped():
    rec, ledger = READERS["slurm"].read(
        [CORPUS / "slurm_above_capacity.txt", CORPUS / "slurm_above_capacity_nodes.txt"], tz="UTC"
    )
    assert ledger.rejected == 0 and balanced(ledger)
    assert rec.allocations["devices"].tolist() == [8, 8]  # 16 GPUs held on an 8-GPU partition for an hour
    part = scheduling_partition(rec.allocations, rec.capacity)
    assert part.table.loc["gpu", "over_allocated_device_s"] == 8 * 3600
    assert part.flags and "above capacity" in part.flags[0]
    rec, ledger = READERS["helios-sequence"].read(CORPUS / "vcAbove.csv")
    f = only_flag(ledger)
    assert f.row == 3 and f.code == "allocated_above_capacity" and "never clipped" in f.message
    assert (ledger.kept, ledger.repaired, ledger.rejected) == (4, 0, 0) and f.field == "running_gpu_num"
    r = rec.occupancy.iloc[1]
    assert (r.held_complete, r.in_service) == (72, 64)


def test_corpus_overlapping_attempts_of_one_job():
    rec, ledger = READERS["slurm"].read(CORPUS / "slurm_overlapping_attempts.txt", tz="UTC")
    e = only_entry(ledger, "rejected")
    assert (e.row, e.field) == (3, "Start") and "overlaps an earlier attempt" in e.reason
    a = rec.allocations.sort_values("attempt")
    assert a["attempt"].tolist() == [0, 1] and a["first_assigned"].tolist() == [
        T("2024-03-04 00:01"),
        T("2024-03-04 05:10"),
    ]
    rec, ledger = READERS["kueue"].read(CORPUS / "kueue_overlapping_attempts.yaml")
    assert only_entry(ledger, "rejected").row == 2 and len(rec.allocations) == 1


def test_corpus_truncated_files():
    rec, ledger = READERS["slurm"].read(CORPUS / "slurm_truncated.txt", tz="UTC")
    e = only_entry(ledger, "rejected")
    assert e.row == 4 and "fields where the header has 17" in e.reason and len(rec.allocations) == 2
    rec, ledger = READERS["helios-sequence"].read(CORPUS / "helios_truncated.csv")
    assert only_entry(ledger, "rejected").row == 5 and len(rec.occupancy) == 3
    rec, ledger = READERS["volcano"].read(
        CORPUS / "volcano_truncated.jsonl", window=("2024-06-03T09:00Z", "2024-06-03T10:00Z")
    )
    e = only_entry(ledger, "rejected")
    assert e.row == 3 and "truncated" in e.reason
    assert row_of(rec.allocations, "ml/pg-a").end_state == "running"  # its end was in the lost line
    with pytest.raises(InputError, match="malformed YAML"):
        READERS["kueue"].read(CORPUS / "kueue_truncated.yaml")
    with pytest.raises(InputError, match="truncated or corrupt gzip stream"):  # fleetlib._io
        READERS["helios-sequence"].read(CORPUS / "helios_truncated.csv.gz")


@pytest.mark.parametrize(
    ("reader", "path", "field"),
    [
        (lambda p: READERS["slurm"].read(p, tz="UTC"), "slurm_missing_column.txt", "AllocTRES"),
        (READERS["helios-sequence"].read, "helios_missing_column.csv", "idle_gpu_num"),
        (READERS["openb"].read, "openb_missing_column.csv", "scheduled_time"),
    ],
)
def test_corpus_missing_required_column(reader, path, field):
    with pytest.raises(InputError) as exc:
        reader(CORPUS / path)
    assert exc.value.field == field and exc.value.row == 1 and exc.value.file.endswith(path)


@pytest.mark.parametrize(
    ("reader", "path"),
    [
        (lambda p: READERS["slurm"].read(p, tz="UTC"), "slurm_empty.txt"),
        (READERS["helios-sequence"].read, "helios_empty.csv"),
        (READERS["kueue"].read, "kueue_empty.yaml"),
        (READERS["volcano"].read, "volcano_empty.jsonl"),
        (READERS["openb"].read, "openb_empty.csv"),
    ],
)
def test_corpus_empty_file(reader, path):
    with pytest.raises(InputError, match="empty file") as exc:
        reader(CORPUS / path)
    assert exc.value.file.endswith(path)


def test_corpus_helios_running_plus_idle_must_equal_total():
    rec, ledger = READERS["helios-sequence"].read(CORPUS / "helios_row_mismatch.csv")
    e = only_entry(ledger, "rejected")
    assert (e.row, e.field, e.reason) == (4, "idle_gpu_num", "running + idle != total (56 + 4 != 64)")
    assert len(rec.occupancy) == 3 and balanced(ledger)


def test_corpus_quota_glitch_carry_and_reject():
    rec, ledger = READERS["helios-sequence"].read(CORPUS / "earth_quota_glitch.csv")
    assert only_entry(ledger, "repaired").row == 4  # 2020-05-03: every pool 0 but vcD
    rej = only_entry(ledger, "rejected")
    assert (rej.row, rej.field) == (8, "total")  # total is not the sum of the pools
    q = rec.extra["quota"].pivot_table(
        index="start", columns="pool", values="devices_in_service", aggfunc="sum"
    )
    day = pd.Timestamp("2020-05-03", tz="Asia/Shanghai")
    assert q.loc[day].to_dict() == {"vcA": 64, "vcB": 32, "vcC": 16, "vcD": 0}
    # a one-pool, one-day change is a plausible real change: not a glitch, kept as read
    assert q.loc[pd.Timestamp("2020-05-05", tz="Asia/Shanghai"), "vcA"] == 72
    rec, ledger = READERS["helios-sequence"].read(CORPUS / "earth_quota_glitch.csv", glitch="reject")
    assert day not in set(rec.extra["quota"]["start"]) and ledger.rejected == 2 and balanced(ledger)


def test_corpus_slurm_events_bad_rows_and_overlapping_events():
    rec, ledger = READERS["slurm"].read(
        [
            CORPUS / "slurm_above_capacity.txt",
            CORPUS / "slurm_above_capacity_nodes.txt",
            CORPUS / "slurm_events_bad.txt",
        ],
        tz="UTC",
    )
    bad = {(e.row, e.field) for e in entries(ledger, "rejected")}
    assert bad == {(3, "NodeName"), (4, "TimeEnd"), (5, "State")} and balanced(ledger)
    cap = rec.capacity
    dur = (cap["end"] - cap["start"]).dt.total_seconds()
    # DOWN 01:00-02:00 and DRAIN 01:30-02:30 on the same node: out of service 01:00-02:30, counted once
    assert (cap["devices_out_of_service"] * dur).sum() == 8 * 5400
    with pytest.raises(InputError, match="node inventory"):
        READERS["slurm"].read([CORPUS / "slurm_above_capacity.txt", CORPUS / "slurm_events_bad.txt"],
                              tz="UTC")


def test_corpus_kubernetes_records_with_bad_parts():
    rec, ledger = READERS["volcano"].read(CORPUS / "volcano_bad_records.jsonl")
    got = {(e.row, e.field) for e in entries(ledger, "rejected")}
    assert got == {(2, "time"), (4, None), (6, "object.spec.minResources")} and balanced(ledger)
    assert len(rec.allocations) == 1


def test_unrecognised_files_raise(tmp_path):
    (tmp_path / "x.txt").write_text("a|b|c\n1|2|3\n")
    with pytest.raises(InputError, match="header is not sacct"):
        READERS["slurm"].read(tmp_path / "x.txt", tz="UTC")
    (tmp_path / "y.csv").write_text("a,b\n1,2\n")
    with pytest.raises(InputError, match="neither an openb pod list"):
        READERS["openb"].read(tmp_path / "y.csv")
    with pytest.raises(InputError, match="file not found"):
        READERS["helios-sequence"].read(tmp_path / "missing.csv")
    (tmp_path / "z.yaml").write_text("kind: Pod\nmetadata: {name: p}\n")
    with pytest.raises(InputError, match="no usable Workload"):
        READERS["kueue"].read(tmp_path / "z.yaml")
    with pytest.raises(DomainError):
        READERS["helios-sequence"].read([])


def test_gzipped_sacct_reads_like_plain(tmp_path, slurm):
    gz = tmp_path / "sacct.txt.gz"
    with gzip.open(gz, "wt") as fh:
        fh.write((DATA / "slurm_sample" / "sacct.txt").read_text())
    rec, _ = READERS["slurm"].read([gz, *SLURM[1:]], tz="UTC", window=SLURM_WINDOW)
    pd.testing.assert_frame_equal(rec.allocations, slurm[0].allocations)
    # gzip is recognised by its bytes, not its name: a gzipped file named .txt reads the same
    disguised = tmp_path / "sacct.txt"
    disguised.write_bytes(gz.read_bytes())
    rec, _ = READERS["slurm"].read([disguised, *SLURM[1:]], tz="UTC", window=SLURM_WINDOW)
    pd.testing.assert_frame_equal(rec.allocations, slurm[0].allocations)
    # other compressions are refused with their name
    bz = tmp_path / "sacct.txt.bz2"
    bz.write_bytes(b"BZh91AY&SY" + bytes(20))
    with pytest.raises(InputError, match="bzip2"):
        READERS["slurm"].read([bz], tz="UTC")


def test_every_window_form_reads_the_same(slurm):
    # one window parser (Window.parse): a pair of timestamps, a pair of ISO texts, 'START/END' text
    start, end = (pd.Timestamp(w) for w in SLURM_WINDOW)
    for window in (SLURM_WINDOW, (start.isoformat(), end.isoformat()),
                   f"{start.isoformat()}/{end.isoformat()}", Window.between(start, end)):
        rec, _ = read(SLURM, "slurm", tz="UTC", window=window)
        pd.testing.assert_frame_equal(rec.allocations, slurm[0].allocations)


# ------------------------------------------------------------------------------------------------
# One entry point per format, and the CLI object
# ------------------------------------------------------------------------------------------------


def test_read_dispatches_by_format(slurm, kueue):
    rec, _ = read(SLURM, "slurm", tz="UTC", window=SLURM_WINDOW)
    pd.testing.assert_frame_equal(rec.allocations, slurm[0].allocations)
    rec, _ = read([KUEUE], "kueue", window=KUEUE_WINDOW)
    pd.testing.assert_frame_equal(rec.allocations, kueue[0].allocations)
    assert set(READERS) == {"slurm", "kueue", "volcano", "helios-sequence", "openb", "philly", "pai",
                            "canonical", "helios-joblog", "acme"}
    with pytest.raises(DomainError, match="format must be one of"):
        read(SLURM, "lsf")


def test_records_are_the_protocols_tables(slurm, helios, openb):
    # what a reader returns is one mapping: the canonical tables it gives, then the format's own
    rec = slurm[0]
    assert list(rec) == ["allocations", "capacity", "queue"] and len(rec) == 3
    assert rec["capacity"] is rec.capacity and rec.get("occupancy") is None and "occupancy" not in rec
    assert rec.tables() == {"allocations": rec.allocations, "capacity": rec.capacity, "queue": rec.queue,
                            "reservations": None, "occupancy": None}
    assert list(helios[0]) == ["occupancy", "quota", "above_quota"]
    assert helios[0]["quota"] is helios[0].extra["quota"]
    assert list(openb[0]) == ["waits", "installed"] and "notes" not in openb[0]
    with pytest.raises(KeyError):
        openb[0]["notes"]


def test_canonical_round_trip_through_parquet(tmp_path, slurm):
    from fleetlib.scheduling.synth import write_allocations

    rec = slurm[0]
    path = write_allocations(rec.allocations, rec.capacity, tmp_path / "slurm.parquet", queue=rec.queue)
    back, ledger = read([path], "canonical", window=SLURM_WINDOW)
    assert ledger.rejected == 0 and len(back.allocations) == len(rec.allocations)
    a = back.allocations.sort_values(["job_id", "attempt"]).reset_index(drop=True)
    b = rec.allocations.sort_values(["job_id", "attempt"]).reset_index(drop=True)
    for c in ("job_id", "attempt", "devices", "submit", "first_assigned", "gang_complete", "release"):
        pd.testing.assert_series_equal(a[c], b[c], check_names=False, check_dtype=False)
    with pytest.raises(DomainError, match="one Parquet file"):
        read([path, path], "canonical")


def test_scheduling_command_json(slurm):
    out = scheduling_command([str(p) for p in SLURM], "slurm", tz="UTC", window=SLURM_WINDOW)
    text = json.dumps(out)  # JSON-ready
    assert set(out) >= {
        "scheduling_goodput",
        "capacity_device_s",
        "held_device_s",
        "availability",
        "losses",
        "cross_pool_losses",
        "pools",
        "ledger",
    }
    assert set(out["pools"]) == {"gpu", "h100"} and "NaN" not in text
    assert out["capacity_device_s"] == 2_721_600 + 1_209_080  # hand numbers, see the capacity test
    assert out["ledger"]["read"] == 54
    losses = out["losses"]
    assert {k for k, v in losses.items() if v is None} == set(out["unobserved"]) == {"partial_gang_hold",
                                                                                  "reservation"}
    assert "not observable in slurm records" in out["unobserved"]["partial_gang_hold"]
    assert out["held_device_s"] + sum(v for v in losses.values() if v is not None) == pytest.approx(
        out["capacity_device_s"], rel=1e-12)
    o = scheduling_command([str(OPENB / "openb_pod_list_default.csv.gz")], "openb")
    text = json.dumps(o, allow_nan=False)
    assert o["format"] == "openb" and sum(c["pods"] for c in o["cohorts"]) == 8152 and o["installed"] == []
    assert "no time-based goodput" in o["note"]


def test_helios_silent_stretches_match_a_plain_pass_over_the_raw_files(helios):
    # The logging gap of 2020-05-09/10 (every VC at zero running and zero pending while its quota stays):
    # found by silent_stretches on the occupancy table and, independently, by a minute-by-minute pass
    # over the five raw files (all share the same 44,640 minute stamps, China time, UTC+8).
    rec, _ = helios
    found = silent_stretches(rec.occupancy, min_duration="1h")
    raw = [pd.read_csv(p) for p in VCS]
    stamps = raw[0]["time"]
    assert all((r["time"] == stamps).all() for r in raw)
    quiet = np.logical_and.reduce([(r["running_gpu_num"] == 0) & (r["pending_gpujob_num"] == 0) for r in raw])
    edges = np.diff(np.r_[0, quiet.astype(int), 0])
    first, stop = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)  # minute rows [first, stop)
    long_runs = (stop - first) >= 60
    first, stop = first[long_runs], stop[long_runs]
    local = pd.to_datetime(stamps)
    expected_start = (local.iloc[first] - pd.Timedelta(hours=8)).dt.tz_localize("UTC").tolist()
    expected_end = (local.iloc[stop - 1] + pd.Timedelta(minutes=1) - pd.Timedelta(hours=8)).dt.tz_localize(
        "UTC").tolist()
    assert found["start"].tolist() == expected_start and found["end"].tolist() == expected_end
    assert found["start"].iloc[0] == T("2020-05-09 15:56")  # 23:56 on May 9, China time
    assert found["duration_h"].iloc[0] > 24
    total = np.sum([r["total_gpu_num"].to_numpy() for r in raw], axis=0)
    running = np.sum([r["running_gpu_num"].to_numpy() for r in raw], axis=0)
    in_stretch = np.zeros(len(stamps), dtype=bool)
    for a, b in zip(first, stop, strict=True):
        in_stretch[a:b] = True
    assert found["in_service_device_s"].sum() == pytest.approx(total[in_stretch].sum() * 60.0, rel=1e-12)
    without = running.sum() / (total.sum() - total[in_stretch].sum())
    assert found["scheduling_goodput_without"].iloc[0] == pytest.approx(without, rel=1e-12)
    s = running.sum() / total.sum()
    assert without > s  # the gap counted as idle lowers S; taken out, S rises
