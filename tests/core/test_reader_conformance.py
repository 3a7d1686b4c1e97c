"""One conformance suite, run over every reader every rung registers (in the spirit of
scikit-learn's ``parametrize_with_checks``): each registered format is fed its samples and must

* return a balanced ledger whose ``read`` equals the record count the sample states;
* return every table it declares, with the canonical columns, and every time column in UTC;
* name the file and a 1-based row in every ledger entry, and only files it was given;
* on a broken sample, raise an ``InputError`` that names the file, or reject a record with its row.
"""

from __future__ import annotations

import importlib
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from fleetlib.quality import InputError, Ledger
from fleetlib.registry import ReaderSpec, Sample

ROOT = Path(__file__).resolve().parents[2]
RUNGS = ("scheduling", "runtime", "program")


def _registries() -> dict[str, dict[str, ReaderSpec]]:
    # a rung without a registry shows up as an empty one, which the first test below fails on
    out = {}
    for rung in RUNGS:
        try:
            module = importlib.import_module(f"fleetlib.{rung}.readers")
        except ModuleNotFoundError:
            module = None
        out[rung] = dict(getattr(module, "READERS", {}))
    return out


REGISTRIES = _registries()
CASES = [
    pytest.param(spec, sample, id=f"{rung}-{name}-{'bad-' if sample.bad else ''}{Path(sample.paths[0]).name}")
    for rung, readers in REGISTRIES.items()
    for name, spec in readers.items()
    for sample in spec.samples
]


@pytest.mark.parametrize("rung", RUNGS)
def test_every_rung_registers_readers_with_samples(rung):
    readers = REGISTRIES[rung]
    assert readers, f"fleetlib.{rung}.readers.READERS is empty"
    for name, spec in readers.items():
        assert spec.name == name
        assert spec.tables, f"{rung} reader {name!r} declares no tables"
        assert any(not s.bad for s in spec.samples), f"{rung} reader {name!r} has no good sample"
        assert any(s.bad for s in spec.samples), f"{rung} reader {name!r} has no broken sample in its corpus"
        for s in spec.samples:
            for p in s.paths:
                assert (ROOT / p).exists(), f"{rung} reader {name!r}: sample {p} does not exist"


def _check_entries(ledger: Ledger, given: set[str]) -> None:
    for e in ledger.entries:
        assert e.file, e
        assert any(e.file == g or e.file.endswith(Path(g).name) for g in given), (e.file, given)
        assert e.row is None or e.row >= 1, e
    for f in ledger.flags:
        assert f.row is None or f.row >= 1, f


@pytest.mark.parametrize(("spec", "sample"), CASES)
def test_reader_conforms(spec: ReaderSpec, sample: Sample):
    paths = [ROOT / p for p in sample.paths]
    given = {str(p) for p in paths}
    if sample.bad:
        try:
            _, ledger = spec.read(paths, **dict(sample.options))
        except InputError as exc:
            assert exc.file is not None, f"{spec.name}: InputError without a file: {exc}"
            assert str(exc.file) in str(exc)
            return
        assert isinstance(ledger, Ledger)
        assert ledger.balanced()
        assert ledger.rejected > 0, f"{spec.name}: broken sample {sample.paths} read without a rejection"
        assert all(e.row is not None for e in ledger.entries if e.action == "rejected")
        _check_entries(ledger, given)
        return
    tables, ledger = spec.read(paths, **dict(sample.options))
    assert isinstance(ledger, Ledger), type(ledger)
    assert ledger.balanced(), ledger.to_dict()
    if sample.records is not None:
        assert ledger.read == sample.records
    _check_entries(ledger, given)
    for name, columns in spec.tables.items():
        assert name in tables, f"{spec.name} returned no {name!r} table"
        frame = tables[name]
        missing = [c for c in columns if c not in frame.columns]
        assert not missing, f"{spec.name}: table {name!r} lacks canonical columns {missing}"
        for col in frame.columns:
            dtype = frame[col].dtype
            if isinstance(dtype, pd.DatetimeTZDtype):
                assert str(dtype.tz) == "UTC", f"{spec.name}: {name}.{col} is in {dtype.tz}, not UTC"
            elif isinstance(dtype, np.dtype) and dtype.kind == "M":
                raise AssertionError(f"{spec.name}: {name}.{col} holds naive datetimes")
