"""Issue 30 items 4-5: impossible values are refused by name (file, row, field, value), never wrapped."""

from __future__ import annotations

import pandas as pd
import pytest

from fleetlib import cli
from fleetlib._io import load_yaml, out_of_range_int
from fleetlib.contract import contract_from_records
from fleetlib.quality import DomainError, InputError
from fleetlib.runtime import READERS as RUNTIME
from fleetlib.scheduling.sweep import as_window, device_counts


def test_a_duplicate_yaml_key_is_refused_naming_both_lines():
    with pytest.raises(InputError) as info:
        load_yaml("name: a\nbundle: x\nname: b\n", file="fleet.yaml")
    assert str(info.value) == ("file fleet.yaml, row 3, field 'name': duplicate key 'name' (first at line "
                               "1): a mapping names each key once; the later value would silently "
                               "replace the first")
    # a merge key may be overridden, as YAML says; the same key in two mappings is no duplicate
    assert load_yaml("b: &x {c: 1}\nd:\n  <<: *x\n  c: 2\ne: {c: 3}\n", file="m.yaml") == {
        "b": {"c": 1}, "d": {"c": 2}, "e": {"c": 3}}


def test_whole_numbers_just_beyond_int64_are_marked_in_every_dtype():
    assert out_of_range_int(pd.Series([1, 2**63])).tolist() == [False, True]  # read as uint64
    assert out_of_range_int(pd.Series([2.0**63, -(2.0**63), 9.2e18])).tolist() == [True, False, False]
    text = pd.Series(["9223372036854775808", "-9223372036854775808", "-9223372036854775809"])
    assert out_of_range_int(text).tolist() == [True, False, True]


def test_an_mlgoodput_step_of_2_to_the_63_is_rejected_by_row_not_an_overflow(tmp_path):
    log = tmp_path / "job_timeline.jsonl"
    log.write_text('{"job_name": "j", "job_start_time": 1741078000.0}\n'
                   f'{{"job_name": "j", "step_count": {2**63}, "step_start_time": 1741078010.0}}\n'
                   '{"job_name": "j", "job_end_time": 1741078100.0}\n')
    _, ledger = RUNTIME["mlgoodput"].read([log])
    assert [(e.row, e.field) for e in ledger.entries if e.action == "rejected"] == [(2, "step")]


def test_a_sacct_field_starting_with_a_quote_is_a_character_not_a_quoted_field(tmp_path):
    sacct = tmp_path / "sacct.txt"
    sacct.write_text("JobID|Partition|QOS|State\n1|\"gpu|high|COMPLETED\n2|h100|low|COMPLETED\n")
    contract = contract_from_records(scheduler_files=[sacct], scheduler_format="slurm")
    assert contract.get("pool") == ['"gpu', "h100"]  # was a quoted field running to the file's end
    assert contract.get("qos") == ["high", "low"]


def test_a_bad_device_count_names_its_row_and_value():
    with pytest.raises(DomainError) as info:
        device_counts(pd.Series([4, 2, -3]), "allocations.devices")
    assert str(info.value).startswith("allocations.devices must hold non-negative integer device counts: "
                                      "row 2 (index '2') holds '-3' (of 1 such rows)")
    with pytest.raises(DomainError, match=r"row 1 \(index '1'\) holds '1e\+300'"):
        device_counts(pd.Series([1.0, 1e300]), "allocations.devices")  # never wrapped by a cast


def test_no_capacity_says_what_was_missing_and_what_to_give():
    with pytest.raises(DomainError, match=r"no capacity rows: no node list, capacity or occupancy table "
                                          r"was read, or every row of it was rejected \(see the ledger\)"
                                          r".*--capacity"):
        as_window(None, None)


def test_the_last_line_of_defence_explains_in_words_not_an_exception_name(monkeypatch, capsys):
    def explode(_args):
        raise OverflowError("Python int too large to convert to C long")

    parser = cli.build_parser()
    args = parser.parse_args(["synth", "timeline", "--steps", "3", "--out", "x.parquet"])
    monkeypatch.setattr(cli, "build_parser", lambda: parser)
    monkeypatch.setattr(parser, "parse_args", lambda argv: (setattr(args, "func", explode), args)[1])
    assert cli.main(["synth", "timeline"]) == 2
    err = capsys.readouterr().err
    assert "OverflowError" not in err and "C long" not in err
    assert "it holds a number too large for the quantity it stands for" in err
