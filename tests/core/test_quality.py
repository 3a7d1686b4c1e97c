"""Tests of the error types, the argument checks and the row ledger (fleetlib.quality)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

import fleetlib
from fleetlib.quality import (
    LEDGER_ACTIONS,
    DomainError,
    FleetlibError,
    InputError,
    Ledger,
    LedgerEntry,
    WindowMismatchError,
    check_fraction,
    check_nonnegative,
    check_positive,
)

# ------------------------------------------------------------------------------------------------
# Error types
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("cls", [InputError, DomainError, WindowMismatchError])
def test_every_error_is_a_fleetlib_error_and_a_value_error(cls):
    assert issubclass(cls, FleetlibError)
    assert issubclass(cls, ValueError)


def test_error_types_are_distinct():
    assert not issubclass(DomainError, InputError)
    assert not issubclass(InputError, DomainError)
    assert not issubclass(WindowMismatchError, DomainError)


def test_package_exports_the_errors():
    assert fleetlib.InputError is InputError
    assert fleetlib.DomainError is DomainError
    assert fleetlib.WindowMismatchError is WindowMismatchError
    assert fleetlib.Ledger is Ledger


def test_input_error_names_file_row_and_field():
    err = InputError("expected an ISO-8601 timestamp with offset, got '2024-13-01'",
                     file="allocations.csv", row=17, field="gang_complete")
    msg = str(err)
    assert msg == ("file allocations.csv, row 17, field 'gang_complete': expected an ISO-8601 timestamp "
                   "with offset, got '2024-13-01'")
    assert (err.file, err.row, err.field) == ("allocations.csv", 17, "gang_complete")


def test_input_error_row_zero_is_shown():
    # a header problem is row 0; a falsy row number must still be printed
    assert str(InputError("missing column", file="a.csv", row=0)) == "file a.csv, row 0: missing column"


def test_input_error_partial_location():
    assert str(InputError("not JSON", file="trace.json")) == "file trace.json: not JSON"
    assert str(InputError("bad value", field="devices")) == "field 'devices': bad value"
    err = InputError("no location known")
    assert str(err) == "no location known"
    assert err.file is None and err.row is None and err.field is None


def test_input_error_is_raisable_and_catchable_as_value_error():
    with pytest.raises(ValueError, match=r"row 3, field 'end'"):
        raise InputError("end before start", file="steps.csv", row=3, field="end")


# ------------------------------------------------------------------------------------------------
# check_* helpers
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("value", [0.0, 0.5, 1.0, 1, np.float64(0.25), np.int64(1)])
def test_check_fraction_accepts_fractions(value):
    out = check_fraction("S", value)
    assert out == float(value)
    assert type(out) is float


@pytest.mark.parametrize("value", [-1e-12, 1.0 + 1e-12, 2, -0.5])
def test_check_fraction_rejects_out_of_range(value):
    with pytest.raises(DomainError, match=r"scheduling goodput must be a fraction in \[0, 1\]"):
        check_fraction("scheduling goodput", value)


def test_check_fraction_allow_zero():
    assert check_fraction("P", 0.0) == 0.0
    with pytest.raises(DomainError, match="greater than 0"):
        check_fraction("P", 0.0, allow_zero=False)
    assert check_fraction("P", 1e-9, allow_zero=False) == 1e-9


@pytest.mark.parametrize("check", [check_fraction, check_nonnegative, check_positive])
@pytest.mark.parametrize("value, what", [
    (math.nan, "finite"), (math.inf, "finite"), (-math.inf, "finite"),
    (None, "a number"), ("0.5", "not text"), (b"1", "not text"), (True, "boolean"),
    (np.bool_(False), "boolean"), ([0.5], "a number"),
])
def test_checks_refuse_non_numbers(check, value, what):
    with pytest.raises(DomainError, match=what) as info:
        check("price per hour", value)
    assert "price per hour" in str(info.value)


def test_check_nonnegative():
    assert check_nonnegative("queue wait (h)", 0) == 0.0
    assert check_nonnegative("queue wait (h)", 3.5) == 3.5
    with pytest.raises(DomainError, match=r"queue wait \(h\) must be >= 0; got -1"):
        check_nonnegative("queue wait (h)", -1)


def test_check_positive():
    assert check_positive("devices", 128) == 128.0
    with pytest.raises(DomainError, match="devices must be > 0; got 0"):
        check_positive("devices", 0)
    with pytest.raises(DomainError, match="> 0"):
        check_positive("devices", -8)


# ------------------------------------------------------------------------------------------------
# Ledger
# ------------------------------------------------------------------------------------------------


def _ledger() -> Ledger:
    led = Ledger(read=5, kept=3)
    led.repair("allocations.csv", 4, "release", "release before gang_complete swapped")
    led.reject("allocations.csv", 5, "devices", "devices must be a positive integer; got -8")
    return led


def test_ledger_balance():
    led = _ledger()
    assert (led.read, led.kept, led.repaired, led.rejected) == (5, 3, 1, 1)
    assert led.balanced()


def test_ledger_unbalanced_when_a_row_is_lost_or_counted_twice():
    led = _ledger()
    led.read += 1  # a row read but neither kept, repaired nor rejected
    assert not led.balanced()
    led = _ledger()
    led.reject("allocations.csv", 3, None, "duplicate")  # a kept row also rejected
    assert not led.balanced()


def test_empty_ledger_is_balanced():
    led = Ledger()
    assert led.balanced()
    assert led.to_dict() == {"read": 0, "kept": 0, "repaired": 0, "rejected": 0, "entries": [],
                             "flags": [], "unused": {}}


def test_ledger_to_dict_is_json_ready():
    d = json.loads(json.dumps(_ledger().to_dict()))
    assert {k: d[k] for k in ("read", "kept", "repaired", "rejected")} == {
        "read": 5, "kept": 3, "repaired": 1, "rejected": 1}
    assert d["entries"] == [
        {"action": "repaired", "file": "allocations.csv", "row": 4, "field": "release",
         "reason": "release before gang_complete swapped"},
        {"action": "rejected", "file": "allocations.csv", "row": 5, "field": "devices",
         "reason": "devices must be a positive integer; got -8"},
    ]


def test_ledger_extend_and_merged():
    a = _ledger()
    b = Ledger(read=2, kept=1)
    b.reject("capacity.csv", 2, "end", "end before start")
    merged = Ledger.merged([a, b])
    assert (merged.read, merged.kept, merged.repaired, merged.rejected) == (7, 4, 1, 2)
    assert merged.balanced()
    assert [e.file for e in merged.entries] == ["allocations.csv", "allocations.csv", "capacity.csv"]
    # the sources are not modified
    assert (a.read, b.read) == (5, 2)
    a.extend(b)
    assert a.to_dict() == merged.to_dict()


def test_ledger_entry_validation():
    assert LEDGER_ACTIONS == ("repaired", "rejected")
    with pytest.raises(DomainError, match="ledger action"):
        LedgerEntry("dropped", "a.csv", 1, None, "why")
    with pytest.raises(DomainError, match="reason"):
        LedgerEntry("rejected", "a.csv", 1, None, "")
    entry = LedgerEntry("rejected", "a.csv", None, None, "unreadable line")
    assert entry.to_dict()["row"] is None
