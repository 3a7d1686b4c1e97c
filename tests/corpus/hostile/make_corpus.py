"""Write the hostile-input corpus (run from the repository root: python tests/corpus/hostile/make_corpus.py).

One or two small files per class of broken or hostile input, per rung; README.md lists each file, its
class and the message or ledger entry tests/core/test_hostile_inputs.py asserts for it.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]


def laughs(levels: int = 9, key_prefix: str = "") -> str:
    """A "billion laughs" YAML mapping: ``levels`` aliases of nine, 9**levels strings once expanded."""
    lines = [f'{key_prefix}l0: &l0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for i in range(1, levels):
        ref = ", ".join([f"*l{i - 1}"] * 9)
        lines.append(f"{key_prefix}l{i}: &l{i} [{ref}]")
    return "\n".join(lines) + "\n"


KUEUE_HEAD = """apiVersion: kueue.x-k8s.io/v1beta1
kind: Workload
metadata:
  name: {name}
  namespace: team-a
  uid: u-{name}
  creationTimestamp: "2024-05-06T08:59:00Z"
spec:
  queueName: team-a
  priority: 10
  podSets:
  - name: main
    count: 2
    template: {{spec: {{containers: [{{name: c, resources: {{requests: {{nvidia.com/gpu: "8"}}}}}}]}}}}
status:
  admission:
    clusterQueue: team-a-cq
    podSetAssignments:
    - {{name: main, count: 2, flavors: {{nvidia.com/gpu: a100}}, resourceUsage: {{nvidia.com/gpu: "16"}}}}
  conditions:
"""


def cond(kind: str, reason: str, time: str) -> str:
    return f'  - {{type: {kind}, status: "True", reason: {reason}, lastTransitionTime: "{time}"}}\n'


def trace(events: list[dict], **top: object) -> str:
    """A Kineto-shaped trace, one event per line; ``json.dumps`` writes lone surrogates as escapes."""
    head = {"schemaVersion": 1, "distributedInfo": {"backend": "nccl", "rank": 0, "world_size": 1}, **top}
    return (json.dumps(head)[:-1] + ', "traceEvents": [\n' + ",\n".join(map(json.dumps, events))
            + "\n]}\n")


def span(name: str, ts: float, dur: float, args: dict | None = None) -> dict:
    return {"ph": "X", "cat": "user_annotation", "name": name, "pid": 100, "tid": 100, "ts": ts, "dur": dur,
            "args": args or {}}


def runtime(ts: float, dur: float, name: object, corr: int) -> dict:
    return {"ph": "X", "cat": "cuda_runtime", "name": name, "pid": 100, "tid": 100, "ts": ts, "dur": dur,
            "args": {"correlation": corr}}


def gpu(ts: float, dur: float, name: str, *, corr: int | None = None, args: dict | None = None,
        **fields: object) -> dict:
    a = {"device": 0, "stream": 7, **({"correlation": corr} if corr is not None else {}), **(args or {})}
    return {"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7, "ts": ts, "dur": dur, "args": a,
            **fields}


def main() -> None:
    sch = HERE / "scheduling"
    run = HERE / "runtime"
    prog = HERE / "program"
    scen = HERE / "scenario"
    for d in (sch, run, prog, scen):
        d.mkdir(exist_ok=True)

    # --- scheduling ------------------------------------------------------------------------------
    # unbounded work: a 60-byte node list naming 10**10 nodes
    (sch / "sinfo_hostlist_bomb.txt").write_text(
        "NODELIST|PARTITION|GRES\ngpu-a[0000000000-9999999999]|gpu*|gpu:a100:8(S:0-1)\n"
        "gpu-h01|h100|gpu:h100:8(S:0-1)\n")
    # unbounded work: a billion-laughs Kueue file
    (sch / "kueue_billion_laughs.yaml").write_text(laughs())
    # nesting: a Kueue JSON file 100,000 deep (RecursionError before)
    (sch / "kueue_deep.json").write_text("[" * 20_000 + "]" * 20_000 + "\n")
    # out of order: Finished before Admitted (was "still holding, release censored")
    good = (KUEUE_HEAD.format(name="good-wl") + cond("Admitted", "Admitted", "2024-05-06T09:00:00Z")
            + cond("PodsReady", "PodsReady", "2024-05-06T09:02:00Z")
            + cond("Finished", "Succeeded", "2024-05-06T11:00:00Z"))
    backwards = (KUEUE_HEAD.format(name="backwards-wl")
                 + cond("Finished", "Succeeded", "2024-05-06T08:30:00Z")
                 + cond("Admitted", "Admitted", "2024-05-06T09:00:00Z"))
    (sch / "kueue_finished_before_admitted.yaml").write_text("---\n" + good + "---\n" + backwards)
    # one deep line, one NaN, one 1e400 among good Volcano lines: only those lines are rejected
    line = ('{"time":"2024-06-03T09:00:00Z","type":"ADDED","object":{"apiVersion":'
            '"scheduling.volcano.sh/v1beta1",'
            '"kind":"PodGroup","metadata":{"name":"pg-a","namespace":"ml","uid":"uid-pg-a",'
            '"creationTimestamp":"2024-06-03T09:00:00Z"},"spec":{"minMember":2,"minResources":'
            '{"nvidia.com/gpu":"4"},"queue":"research"},"status":{"phase":"Running","running":2}}}')
    (sch / "volcano_hostile_lines.jsonl").write_text("\n".join([
        line,
        '{"deep": ' + "[" * 5000 + "]" * 5000 + "}",
        line.replace('"running":2', '"running":NaN'),
        line.replace('"running":2', '"running":1e400'),
    ]) + "\n")
    # lone surrogate escapes (were kept as text no UTF-8 file or Arrow column can hold): the line is
    # rejected; a valid pair of escapes is one character and is read
    (sch / "volcano_lone_surrogate.jsonl").write_text("\n".join([
        line,
        line.replace('"name":"pg-a"', '"name":"pg-\\ud800"').replace("uid-pg-a", "uid-pg-b"),
        line.replace('"queue":"research"', '"qu\\udfffeue":"research"').replace("uid-pg-a", "uid-pg-c"),
        line.replace('"name":"pg-a"', '"name":"pg-\\ud83d\\ude00"').replace("uid-pg-a", "uid-pg-d"),
    ]) + "\n")
    (sch / "kueue_lone_surrogate.yaml").write_text(
        "---\n" + good + "---\n" + good.replace("name: good-wl", 'name: "wl-\\udc00"', 1))
    # fields of the wrong shape (were AttributeError): podSets a mapping, a container's resources a list,
    # the conditions a mapping
    (sch / "kueue_wrong_shapes.yaml").write_text(
        "---\n" + good + "---\n"
        + good.replace("name: good-wl", "name: wl-2").replace("  podSets:\n  - name: main\n", "  podSets:\n")
        + "---\n" + good.replace("name: good-wl", "name: wl-3").replace(
            "resources: {requests: {nvidia.com/gpu: \"8\"}}", "resources: [gpu]")
        + "---\n" + KUEUE_HEAD.format(name="wl-4") + "    type: Admitted\n")
    # the only node event kept is still open (TimeEnd Unknown; was a TypeError on the all-NaT end times)
    (sch / "sacctmgr_open_event_only.txt").write_text(
        "Cluster|NodeName|TimeStart|TimeEnd|State|Reason|User\n"
        "atlas|gpu-a004|2024-03-04T22:30:00|Unknown|IDLE+DRAIN|scheduled maintenance|root(0)\n")
    philly = ('{"status": "Pass", "vc": "v1", "jobid": "%s", "user": "u1", '
              '"submitted_time": "2017-10-07 01:00:00", "attempts": [{"start_time": "2017-10-07 01:00:30", '
              '"end_time": "2017-10-07 02:00:00", "detail": [{"ip": "m1", "gpus": ["gpu0", "gpu1"]}]}]}')
    (sch / "philly_lone_surrogate.json").write_text(
        "[\n" + ",\n".join([philly % "job_a", philly % "job_\\ud800"]) + "\n]\n")
    (sch / "philly_deep.json").write_text(  # was: RecursionError
        "[\n" + philly % "job_a" + ",\n" + "[" * 20_000 + "]" * 20_000 + "\n]\n")
    # values out of range: a Slurm time in year 2150 and a COMPLETED job with no Start, Elapsed off
    header = ("JobID|JobIDRaw|User|Account|Partition|QOS|Priority|Submit|Eligible|Start|End|Elapsed|State|"
              "ExitCode|AllocTRES|ReqTRES|NodeList")
    tres = "billing=8,cpu=8,gres/gpu=8,mem=100G,node=1"
    (sch / "slurm_out_of_range.txt").write_text("\n".join([
        header,
        f"1|1|u|a|gpu|n|1|2024-03-04T00:00:00|2024-03-04T00:00:00|2024-03-04T00:01:00|2024-03-04T01:01:00|"
        f"01:00:00|COMPLETED|0:0|{tres}|{tres}|gpu-a001",
        f"2|2|u|a|gpu|n|1|2024-03-04T00:00:00|2024-03-04T00:00:00|2150-03-04T00:01:00|2150-03-04T01:01:00|"
        f"01:00:00|COMPLETED|0:0|{tres}|{tres}|gpu-a001",
        f"3|3|u|a|gpu|n|1|2024-03-04T00:00:00|2024-03-04T00:00:00|Unknown|2024-03-04T02:00:00|"
        f"00:00:00|COMPLETED|0:0||{tres}|None assigned",
        f"4|4|u|a|gpu|n|1|2024-03-04T00:00:00|2024-03-04T00:00:00|2024-03-04T02:00:00|2024-03-04T03:00:00|"
        f"05:00:00|COMPLETED|0:0|{tres}|{tres}|gpu-a001",
    ]) + "\n")

    # --- runtime ---------------------------------------------------------------------------------
    job = '{"job_name": "demo", '
    (run / "mlgoodput_hostile_timeline.jsonl").write_text("\n".join([
        job + '"job_start_time": 1741078800.0}',
        job + '"step_count": 1, "step_start_time": 1e20}',
        job + '"step_count": 99999999999999999999, "step_start_time": 1741078900.0}',
        job + '"step_count": 3, "step_start_time": Infinity}',
        '{"job_name": ' + "[" * 3000 + "]" * 3000 + "}",
        job + '"job_end_time": 1741079800.0}',
    ]) + "\n")
    (run / "mlgoodput_lone_surrogate_timeline.jsonl").write_text("\n".join([
        job + '"job_start_time": 1741078800.0}',
        job + '"step_count": 0, "step_start_time": 1741078810.0}',
        '{"job_name": "demo\\udbff", "step_count": 1, "step_start_time": 1741078820.0}',
        job + '"step_count": 1, "step_st\\ud800art_time": 1741078820.0}',
        job + '"step_count": 1, "step_start_time": 1741078820.0, "note": "\\ud83d\\ude00"}',
        job + '"job_end_time": 1741078830.0}',
    ]) + "\n")
    # torchtitan: a line nested 5,000 deep (was a RecursionError) and a lone surrogate in a key
    titan = (ROOT / "data/timelines/torchtitan_llama3_8b_demo"
             / "training.global_rank_0.20260302-100000-K7Q2ZB.jsonl")
    lines = titan.read_text(encoding="utf-8").splitlines()[:12]
    lines.insert(1, '{"deep": ' + "[" * 5_000 + "]" * 5_000 + "}")
    lines.insert(2, lines[2].replace('"delta_ms"', '"delta\\udc80_ms"', 1))
    (run / "training.global_rank_0.20260302-100000-HOSTIL.jsonl").write_text("\n".join(lines) + "\n")
    (run / "steps_out_of_range.csv").write_text("\n".join([
        "job_id,attempt,step,start,end,input_wait_s",
        "j,0,0,2025-02-10T14:05:12Z,2025-02-10T14:05:41Z,0.1",
        "j,0,99999999999999999999,2025-02-10T14:05:41Z,2025-02-10T14:06:11Z,0.1",
        "j,0,2,1900-01-01T00:00:00Z,2025-02-10T14:06:41Z,0.1",
        "j,0,3,2025-02-10T14:06:41Z,-0001-03-20T10:00:00Z,0.1",
        "j,0,4,2025-02-10T14:06:41Z,2025-02-10T14:07:11Z,inf",
    ]) + "\n")
    # structure errors and flags named by the file's own line (they were 0-based table positions)
    head = "record,job_id,attempt,step,start,end,input_wait_s,time,kind,duration_s"

    def step(attempt: int, number: int, start: str, end: str) -> str:
        return f"step,j,{attempt},{number},2025-02-10T{start}Z,2025-02-10T{end}Z,0.5,,,"

    def event(attempt: int, time: str, kind: str, duration: str = "", number: str = "") -> str:
        return f"event,j,{attempt},{number},,,,2025-02-10T{time}Z,{kind},{duration}"

    (run / "attempts_overlap_timeline.csv").write_text("\n".join([
        head,
        event(0, "14:00:00", "gang_complete"),
        step(0, 0, "14:01:00", "14:01:30"),
        step(0, 1, "14:01:30", "14:02:00"),
        event(1, "14:02:30", "gang_complete"),  # line 5: before attempt 0 is released
        event(0, "14:03:00", "release"),
        step(1, 2, "14:04:00", "14:04:30"),
        event(1, "14:05:00", "release"),
    ]) + "\n")
    (run / "step_outside_held_timeline.csv").write_text("\n".join([
        head,
        event(0, "14:00:00", "gang_complete"),
        step(0, 0, "14:01:00", "14:01:30"),
        event(0, "14:02:00", "release"),
        step(0, 1, "14:02:30", "14:03:00"),  # line 5: after the release
    ]) + "\n")
    (run / "duration_longer_than_timeline.csv").write_text("\n".join([
        head,
        event(0, "14:00:00", "gang_complete"),
        step(0, 0, "14:01:00", "14:01:30"),
        event(0, "14:01:30", "checkpoint_begin", "1e9", "0"),  # line 4: a pause of 31 years
        event(0, "14:01:40", "checkpoint_commit", "", "0"),
        step(0, 1, "14:01:40", "14:02:10"),
        event(0, "14:03:00", "release"),
    ]) + "\n")
    # a 1.5 kB gzip that inflates to 16 MiB of zeros (a small bomb for a small limit)
    with open(run / "gzip_bomb_steps.csv.gz", "wb") as raw, \
            gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=9, mtime=0) as fh:
        zeros = b"0" * (1 << 20)
        for _ in range(16):
            fh.write(zeros)

    # --- program ---------------------------------------------------------------------------------
    (prog / "rank_timers_rank_beyond_int64.csv").write_text(
        "rank,step,duration_s\n0,0,1.0\n1e20,0,1.2\n2,0,1.1\n")
    (prog / "model_billion_laughs.yaml").write_text(laughs())
    (prog / "trace_deep.json").write_text('{"traceEvents": ' + "[" * 20_000 + "]" * 20_000 + "}\n")
    nccl = "ncclDevKernel_AllReduce_Sum_f32_RING_LL"
    (prog / "trace_nested_text.json").write_text(trace([  # was: TypeError: unhashable type
        span("ProfilerStep#1", 0, 100),
        gpu(10, 5, "gemm_a", ph=["X"]),  # row 2: rejected (ph)
        gpu(20, 5, "gemm_b", cat={"kind": "kernel"}),  # row 3: rejected (cat)
        gpu(30, 5, nccl, args={"Collective name": ["allreduce"], "Process Group Name": {"id": 0},
                               "dtype": ["Float"], "In msg nelems": 8}),  # row 4: repaired, kept
        runtime(35, 1, ["cudaLaunchKernel"], 9),  # row 5: name repaired
        gpu(40, 5, "gemm_c"),
    ]))
    (prog / "trace_negative_nelems.json").write_text(trace([  # was: DomainError
        span("ProfilerStep#1", 0, 100),
        span("record_param_comms", 5, 20, args={"Collective name": "allreduce", "In msg nelems": -4,
                                                 "dtype": "Float"}),  # row 2: nelems repaired
        runtime(10, 1, "cudaLaunchKernel", 1),
        gpu(30, 5, nccl, corr=1),  # collective from the enclosing annotation, bytes unknown
        gpu(40, 5, nccl, corr=2, args={"Collective name": "allreduce", "In msg nelems": -1024,
                                       "dtype": "Float"}),  # row 5: nelems repaired
        gpu(50, 5, nccl, corr=3, args={"Collective name": "allreduce", "In msg nelems": 256,
                                       "dtype": "Float"}),  # 1024 bytes
    ]))
    (prog / "trace_odd_nelems.json").write_text(trace([  # was: a dtype "of unknown size"; true = 1 element
        span("ProfilerStep#1", 0, 100),
        gpu(10, 5, nccl, args={"Collective name": "allreduce", "In msg nelems": "many",
                               "dtype": "Float"}),  # row 2: read as absent
        gpu(20, 5, nccl, args={"Collective name": "allreduce", "In msg nelems": "256",
                               "dtype": "Float"}),  # row 3: converted, 1024 bytes
        gpu(30, 5, nccl, args={"Collective name": "allreduce", "In msg nelems": True,
                               "dtype": "Float"}),  # row 4: read as absent
        gpu(40, 5, nccl, args={"Collective name": "allreduce", "In msg nelems": 1.5,
                               "dtype": "Float"}),  # row 5: read as absent
        gpu(50, 5, nccl, args={"Collective name": "allreduce", "In msg nelems": 64,
                               "dtype": "Float"}),  # 256 bytes
    ]))
    (prog / "trace_lone_surrogate.json").write_text(trace([  # was: UnicodeEncodeError
        span("ProfilerStep#1", 0, 100),
        gpu(10, 5, "gemm_\ud800"),  # row 2: name repaired
        gpu(20, 5, nccl, args={"Collective name": "allreduce", "Process Group Name": "pg\udfff"}),  # row 3
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm\udbff", "pid": 100, "tid": 100, "ts": 25, "dur": 2,
         "args": {"External id": 4, "Input Dims": [[2, 2]], "Input type": ["float"]}},  # row 4: ops row
        runtime(28, 1, "cudaLaunch\udc00Kernel", 5),  # replaced, counted in the note
        gpu(40, 5, "gemm_c"),
    ], traceName="run\ud83d"))
    (prog / "trace_lone_surrogate_kinds.json").write_text(trace([  # was: raw in the ledger's unused kinds
        span("ProfilerStep#1", 0, 100),
        gpu(10, 5, "gemm_a", cat="kern\ud800el"),  # row 2: cat repaired, an unknown category
        gpu(20, 5, "gemm_b", ph="X\udfff"),  # rows 3-4: phases no table reads, one kind once replaced
        gpu(30, 5, "gemm_c", ph="X\udffe"),
        gpu(40, 5, "gemm_d"),
        gpu(50, 5, "gemm_e"),
    ]))

    # --- scenario files ----------------------------------------------------------------------------
    (scen / "outside_absolute.yaml").write_text('traces_files: ["/etc/passwd"]\n')
    (scen / "outside_dotdot.yaml").write_text('traces_files: ["../../../../../../../etc/passwd"]\n')
    (scen / "invalid_utf8.yaml").write_bytes(b"scheduling_goodput: 0.65\nnote: caf\xe9\n")
    (scen / "deep.yaml").write_text("runtime_goodput: " + "[" * 20_000 + "\n")
    (scen / "billion_laughs.yaml").write_text(laughs())
    (scen / "lone_surrogate.yaml").write_text('scheduling_goodput: 0.65\nnote: "caf\\udce9"\n')


if __name__ == "__main__":
    main()
