"""The schema pages under docs/ are generated from the schema modules and the readers, and current."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleetlib import docs
from fleetlib.program import schema as program_schema
from fleetlib.runtime import schema as runtime_schema
from fleetlib.scheduling import schema as scheduling_schema
from fleetlib.scheduling.readers import READERS

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def pages():
    return docs.render_pages()


def test_committed_pages_are_current(pages):
    stale = docs.check_pages(ROOT / "docs", pages)
    assert not stale, f"stale pages {stale}: run `python -m fleetlib.docs` and commit docs/"


def test_a_changed_or_missing_page_is_caught(tmp_path, pages):
    docs.write_pages(tmp_path, pages)
    assert docs.check_pages(tmp_path, pages) == []
    page = tmp_path / "schemas/scheduling_allocations.md"
    page.write_text(page.read_text() + "hand edit\n")
    (tmp_path / "schemas/runtime_steps.md").unlink()
    (tmp_path / "schemas/scheduling_gone.md").write_text("# an old table\n")
    assert sorted(docs.check_pages(tmp_path, pages)) == [
        "schemas/runtime_steps.md",
        "schemas/scheduling_allocations.md",
        "schemas/scheduling_gone.md",
    ]
    assert docs.main(["--check", "--out", str(tmp_path)]) == 1  # the command line renders them itself


def test_every_schema_column_is_on_its_page(pages):
    expect = {
        "scheduling_allocations": scheduling_schema.ALLOCATION_COLUMNS,
        "scheduling_capacity": scheduling_schema.CAPACITY_COLUMNS,
        "scheduling_occupancy": scheduling_schema.OCCUPANCY_COLUMNS,
        # the canonical columns, then the optional provenance every reader fills
        "runtime_steps": (*runtime_schema.STEP_COLUMNS, *runtime_schema.PROVENANCE_COLUMNS),
        "runtime_events": (*runtime_schema.EVENT_COLUMNS, *runtime_schema.DEVICE_COLUMNS,
                           *runtime_schema.PROVENANCE_COLUMNS),
        "program_kernels": program_schema.KERNEL_COLUMNS,
        "program_rank_timers": program_schema.RANK_TIMER_COLUMNS,
    }
    for name, columns in expect.items():
        text = pages[f"schemas/{name}.md"]
        table = text.split("## Columns")[1].split("## Example rows")[0]
        listed = [
            line.split("|")[1].strip().strip("`") for line in table.splitlines() if line.startswith("| `")
        ]
        assert listed == list(columns), name


def test_example_rows_are_what_the_reader_returns(pages):
    tables, _ = READERS["slurm"].read(
        [
            ROOT / f"data/scheduler/slurm_sample/{n}"
            for n in ("sacct.txt", "sacctmgr_events.txt", "sinfo_nodes.txt")
        ],
        tz="UTC",
    )
    first = tables["allocations"].iloc[0]
    text = pages["schemas/scheduling_allocations.md"]
    row = f"| {first['job_id']} | 0 | {first['pool']} | {first['devices']} | {first['submit'].isoformat()} |"
    assert row in text
    assert "`datetime64[ns, UTC]`" in text and "UTC (timezone-aware)" in text


def test_every_registered_format_has_its_export_on_the_pages(pages):
    for fmt, spec in READERS.items():
        for table in spec.tables:
            text = pages[f"schemas/scheduling_{table}.md"]
            assert f"### `--format {fmt}`" in text
            assert ("scheduling", fmt) in docs.EXPORTS, fmt
    kueue = pages["schemas/scheduling_allocations.md"]
    assert "kubectl get workloads.kueue.x-k8s.io" in kueue and "sacct -P -D -a" in kueue
    assert "--type sqlite" in docs.EXPORTS[("program", "nsys")]
    index = pages["README.md"]
    assert "[`allocations`](schemas/scheduling_allocations.md)" in index


def test_the_index_has_a_capability_row_per_scheduler_format(pages):
    from fleetlib.scheduling import READERS, unobserved_losses

    text = pages["README.md"]
    section = text[text.index("## What each scheduler format can observe"):]
    for name in READERS:
        assert f"| `{name}` |" in section, name
    row = next(line for line in section.splitlines() if line.startswith("| `slurm` |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    want = unobserved_losses("slurm", {"allocations": None, "capacity": None})  # no reservations table
    assert cells[1].startswith("not observable: sacct's Start") and cells[2].startswith("not observable")
    assert cells[3:] == ["measured"] * 3 and set(want) == {"partial_gang_hold", "reservation"}
    kueue = next(line for line in section.splitlines() if line.startswith("| `kueue` |"))
    assert kueue.count("measured") == 4
