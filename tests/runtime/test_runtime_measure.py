"""``fleetlib.runtime.measure``: read and measure in one call, one result shape for every format.

Expected values come from the existing entry points measured separately (the reader, then
``runtime_goodput``) and from counts taken here without the reader (lines of the bundled files).
"""

from __future__ import annotations

import gzip
import math
from pathlib import Path

import pytest

import fleetlib.runtime
from fleetlib.accounting import Factor, Window
from fleetlib.quality import DomainError, InputError, Ledger
from fleetlib.runtime.goodput import ReplicaGoodput, RuntimeMeasurement, runtime_goodput
from fleetlib.runtime.measure import guess_format, measure
from fleetlib.runtime.readers import READERS, read_canonical, read_mlgoodput
from fleetlib.runtime.schema import TERM_LABELS

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "data" / "timelines"
MLGOODPUT = DATA / "maxtext-llama3-8b-demo_timeline.jsonl"
DEMO = [DATA / "demo-7b-ft_steps.csv", DATA / "demo-7b-ft_events.csv"]
SERVING = DATA / "serving_replica_lifecycle.csv"


def _shape(result: object) -> None:
    assert isinstance(result.factor(), Factor)  # type: ignore[attr-defined]
    assert isinstance(result.ledger, Ledger) and result.ledger.balanced()  # type: ignore[attr-defined]
    assert isinstance(result.window, Window)  # type: ignore[attr-defined]
    assert isinstance(result.to_dict(), dict)  # type: ignore[attr-defined]


def test_package_exports_measure():
    assert fleetlib.runtime.measure is measure


def test_canonical_files_match_reader_then_runtime_goodput():
    m = measure(DEMO, format="canonical")
    tables, ledger = read_canonical(DEMO)
    direct = runtime_goodput(tables.steps, tables.events)
    assert isinstance(m, RuntimeMeasurement)
    _shape(m)
    assert m.runtime_goodput == direct.runtime_goodput
    assert m.categories == direct.categories
    # the ledger accounts for the input rows: 16 event rows + 20 step rows, counted from the files
    rows = sum(len(p.read_text().splitlines()) - 1 for p in DEMO)
    assert m.ledger.read == ledger.read == rows
    assert m.table_ledger is not None and m.table_ledger.read == direct.ledger.read


def test_factor_and_to_factor_agree_and_carry_the_window():
    m = measure(MLGOODPUT)  # format guessed from .jsonl
    f = m.factor()
    assert f.value == m.to_factor().value == m.runtime_goodput
    assert f.window.same_as(m.window)
    assert m.to_dict()["runtime_goodput"] == m.runtime_goodput


def test_mlgoodput_flags_of_reader_and_measurement_both_kept():
    m = measure(MLGOODPUT, format="mlgoodput")
    _, ledger = read_mlgoodput(MLGOODPUT)
    lines = [ln for ln in MLGOODPUT.read_text().splitlines() if ln.strip()]
    assert m.ledger.read == len(lines) == ledger.read
    assert set(ledger.codes()) <= set(m.ledger.codes())
    assert {"failure_time_inferred", "release_inferred"} <= set(m.ledger.codes())


def test_tables_in_any_form():
    tables, _ = read_canonical(DEMO)
    a = measure(tables)
    b = measure((tables.steps, tables.events))
    c = measure({"steps": tables.steps, "events": tables.events}, definition="retrospective")
    assert a.runtime_goodput == b.runtime_goodput
    assert c.definition == "retrospective" and c.productive_s >= a.productive_s


def test_window_is_read_by_window_parse():
    whole = measure(DEMO, format="canonical")
    start, end = whole.window_start, whole.window_end
    mid = start + (end - start) / 2
    text = f"{start.isoformat()}/{mid.isoformat()}"
    m = measure(DEMO, format="canonical", window=text)
    assert m.window.same_as(Window.parse(text))
    assert m.held_s < whole.held_s
    with pytest.raises(DomainError, match="has no zone"):
        measure(DEMO, format="canonical", window=("2025-02-10T14:00", "2025-02-10T15:00Z"))


def test_gzipped_input_measures_the_same(tmp_path):
    packed = tmp_path / "maxtext-llama3-8b-demo_timeline.jsonl.gz"
    packed.write_bytes(gzip.compress(MLGOODPUT.read_bytes()))
    plain, gz = measure(MLGOODPUT), measure(packed)
    assert gz.runtime_goodput == plain.runtime_goodput
    assert gz.ledger.read == plain.ledger.read
    assert list(gz.fault_free_step_s) == list(plain.fault_free_step_s)  # same job id, .gz dropped


def test_serving_logs_give_the_same_shape():
    m = measure(SERVING, format="serving")
    assert isinstance(m, ReplicaGoodput)
    _shape(m)
    rows = len(SERVING.read_text().splitlines()) - 1
    assert m.ledger.read == rows
    assert math.isclose(m.factor().value, m.ready_s / m.held_s)
    with pytest.raises(DomainError, match="replicas"):
        measure(SERVING, format="serving", job_id="x")


def test_mlperf_log_as_a_timeline():
    # held = init_start -> run_stop; a result log records no checkpoint: only the run's clean end
    # (run_stop, read as the release, after the last block with no interruption) commits its blocks
    log = DATA / "asustek_esc-n8a-e12_llama2_70b_lora_result_0.txt"
    committed = measure(log, format="mlperf")
    strict = measure(log, format="mlperf", clean_end_commit=False)
    retro = measure(log, format="mlperf", definition="retrospective")
    assert strict.productive_s == 0.0 and retro.productive_s > 0.0
    assert committed.productive_s == retro.productive_s
    assert committed.held_s == retro.held_s and committed.ledger.read == 52


def test_errors():
    with pytest.raises(DomainError, match="format must be one of"):
        measure(DEMO, format="xml")
    with pytest.raises(DomainError, match="definition"):
        measure(DEMO, format="canonical", definition="both")
    with pytest.raises(DomainError, match="cannot tell the format"):
        measure(DATA / "LICENSE.bigscience")
    with pytest.raises(InputError, match="no mlgoodput record"):
        measure(DATA / "asustek_esc-n8a-e12_llama2_70b_lora_result_0.txt", format="mlgoodput")


def test_guess_format_looks_through_gz():
    assert guess_format([Path("a_timeline.jsonl.gz")]) == "mlgoodput"
    assert guess_format([Path("log.txt")]) == "mlperf"
    assert guess_format([Path("s.csv"), Path("e.parquet")]) == "canonical"
    with pytest.raises(DomainError, match="different formats"):
        guess_format([Path("s.csv"), Path("log.txt")])


def test_one_ledger_one_vocabulary():
    assert TERM_LABELS["checkpoint"] == "checkpoint pauses"
    assert set(READERS) == {"mlperf", "mlgoodput", "canonical", "bloom", "serving", "torchtitan"}
