"""Exclusion windows on :class:`fleetlib.accounting.Window`: parsing, included pieces, exact errors."""

from __future__ import annotations

import pandas as pd
import pytest

from fleetlib.accounting import Factor, Window, mpg, parse_exclusions
from fleetlib.commands_common import cli_window, exclusion_lines
from fleetlib.quality import DomainError, WindowMismatchError

T = pd.Timestamp


def day() -> Window:
    w = Window.parse(("2024-05-01T00:00Z", "2024-05-02T00:00Z"))
    assert w is not None
    return w


def test_exclusions_are_parsed_in_every_shape_sorted_and_leave_the_pieces_between_them():
    w = day().excluding([
        "2024-05-01T10:00Z/2024-05-01T11:00Z",
        {"start": "2024-05-01T06:00+02:00", "end": "2024-05-01T06:00Z"},  # 04:00Z .. 06:00Z
        (T("2024-05-01T20:00Z"), T("2024-05-02T00:00Z")),  # up to the window's end
    ])
    assert w.exclusions == (
        (T("2024-05-01T04:00Z"), T("2024-05-01T06:00Z")),
        (T("2024-05-01T10:00Z"), T("2024-05-01T11:00Z")),
        (T("2024-05-01T20:00Z"), T("2024-05-02T00:00Z")),
    )
    assert w.pieces == (
        (T("2024-05-01T00:00Z"), T("2024-05-01T04:00Z")),
        (T("2024-05-01T06:00Z"), T("2024-05-01T10:00Z")),
        (T("2024-05-01T11:00Z"), T("2024-05-01T20:00Z")),
    )
    assert w.excluded_s == 7 * 3600 and w.included_s == 17 * 3600 and w.duration_s == 24 * 3600
    assert sum((b - a).total_seconds() for a, b in w.pieces) == w.included_s
    d = w.to_dict()
    assert d["excluded_s"] == 7 * 3600
    assert d["exclusions"][0] == {"start": "2024-05-01T04:00:00+00:00", "end": "2024-05-01T06:00:00+00:00",
                                  "seconds": 7200.0}
    assert w.exclusion_note() == (
        "3 interval(s) excluded, 25200 s of the window's 86400 s, from every numerator and denominator: "
        "[2024-05-01T04:00:00+00:00, 2024-05-01T06:00:00+00:00), [2024-05-01T10:00:00+00:00, "
        "2024-05-01T11:00:00+00:00), [2024-05-01T20:00:00+00:00, 2024-05-02T00:00:00+00:00)")
    lines = exclusion_lines(d)
    assert lines[0].startswith("excluded") and "7.00 h in 3 interval(s)" in lines[0] and len(lines) == 4


def test_a_window_without_exclusions_is_its_own_one_piece_and_lists_none():
    w = day()
    assert w.pieces == ((w.start, w.end),) and w.excluded_s == 0.0 and w.exclusion_note() is None
    assert w.to_dict()["exclusions"] == [] and exclusion_lines(w.to_dict()) == []
    assert w.excluding([]) == w and Window.parse(w, exclude=[]).exclusions == ()


def test_adjacent_exclusions_are_kept_apart_and_parse_keeps_or_replaces_them():
    w = Window.parse(("2024-05-01T00:00Z", "2024-05-02T00:00Z"),
                     exclude=[("2024-05-01T02:00Z", "2024-05-01T03:00Z"),
                              ("2024-05-01T03:00Z", "2024-05-01T04:00Z")])
    assert len(w.exclusions) == 2 and w.pieces[0][1] == T("2024-05-01T02:00Z") and len(w.pieces) == 2
    assert Window.parse(w) is w  # a Window keeps its exclusions
    assert Window.parse(w, exclude=[]).exclusions == ()  # an exclude list replaces them


@pytest.mark.parametrize(("exclude", "message"), [
    ([("2024-05-01T06:00", "2024-05-01T08:00Z")],
     "exclusion start '2024-05-01T06:00' has no zone; write it with one, for example '2024-05-01T06:00Z' "
     "for UTC"),
    ([("2024-05-01T06:00Z", "yesterday")],
     "exclusion end 'yesterday' is not an ISO 8601 time (for example '2024-03-04T00:00Z')"),
    ([("2024-05-01T08:00Z", "2024-05-01T08:00Z")],
     "exclusion end '2024-05-01T08:00Z' must be after its start '2024-05-01T08:00Z'"),
    ([("2024-04-30T22:00Z", "2024-05-01T02:00Z")],
     "exclusion [2024-04-30T22:00:00+00:00, 2024-05-01T02:00:00+00:00) is not inside the window "
     "[2024-05-01T00:00:00+00:00, 2024-05-02T00:00:00+00:00)"),
    ([("2024-05-01T06:00Z", "2024-05-01T08:00Z"), ("2024-05-01T07:00Z", "2024-05-01T09:00Z")],
     "exclusions [2024-05-01T06:00:00+00:00, 2024-05-01T08:00:00+00:00) and [2024-05-01T07:00:00+00:00, "
     "2024-05-01T09:00:00+00:00) overlap; give their union as one exclusion"),
    ([("2024-05-01T00:00Z", "2024-05-01T12:00Z"), ("2024-05-01T12:00Z", "2024-05-02T00:00Z")],
     "the exclusions cover the whole window [2024-05-01T00:00:00+00:00, 2024-05-02T00:00:00+00:00): "
     "nothing is left to measure"),
    ("2024-05-01T06:00Z/2024-05-01T08:00Z",
     "exclusions must be a list of (start, end) pairs; got '2024-05-01T06:00Z/2024-05-01T08:00Z'"),
    ([("2024-05-01T06:00Z",)],
     "exclusion must be a (start, end) pair, a {start, end} mapping or 'START/END' text; "
     "got ('2024-05-01T06:00Z',)"),
    ([{"start": "2024-05-01T06:00Z", "stop": "2024-05-01T07:00Z"}],
     "exclusion {'start': '2024-05-01T06:00Z', 'stop': '2024-05-01T07:00Z'} must have exactly the keys "
     "'start' and 'end'"),
])
def test_bad_exclusions_are_refused_in_one_line(exclude, message):
    with pytest.raises(DomainError) as err:
        day().excluding(exclude)
    assert str(err.value) == message


def test_exclusions_need_a_measured_window():
    with pytest.raises(DomainError) as err:
        Window.parse(None, exclude=[("2024-05-01T06:00Z", "2024-05-01T07:00Z")])
    assert str(err.value) == "exclusions need a measured window to lie in: give the window too"
    with pytest.raises(DomainError) as err:
        Window.nominal("example").excluding([("2024-05-01T06:00Z", "2024-05-01T07:00Z")])
    assert str(err.value) == "window 'example' is nominal: only a measured window can exclude time"
    with pytest.raises(DomainError) as err:
        cli_window(None, [["2024-05-01T06:00Z", "2024-05-01T07:00Z"]])
    assert str(err.value) == "--exclude needs --window START END: the exclusions lie inside the window"
    w = cli_window(["2024-05-01T00:00Z", "2024-05-02T00:00Z"], [["2024-05-01T06:00Z", "2024-05-01T07:00Z"]])
    assert w is not None and w.excluded_s == 3600


def test_clip_cuts_fleet_wide_exclusions_to_a_sub_window():
    stated = parse_exclusions([("2024-04-30T23:00Z", "2024-05-01T01:00Z"),
                               ("2024-05-03T00:00Z", "2024-05-03T01:00Z")])
    w = day().excluding(stated, clip=True)
    assert w.exclusions == ((T("2024-05-01T00:00Z"), T("2024-05-01T01:00Z")),)  # the second lies outside
    with pytest.raises(DomainError, match="is not inside the window"):
        day().excluding(stated)


def _factor(boundary: str, num: float, den: float, window: Window) -> Factor:
    return Factor(boundary=boundary, numerator=num, denominator=den, window=window, numerator_unit="device-s",
                  denominator_unit="device-s")


def test_factors_on_one_window_with_other_exclusions_do_not_multiply():
    w = day()
    we = w.excluding([("2024-05-01T06:00Z", "2024-05-01T07:00Z")])
    assert not w.same_as(we) and we.same_as(day().excluding([("2024-05-01T06:00Z", "2024-05-01T07:00Z")]))
    with pytest.raises(WindowMismatchError, match="excluding"):
        mpg(_factor("scheduling", 8.0, 10.0, we), _factor("runtime", 6.0, 8.0, w),
            _factor("program", 3.0, 6.0, we))
    product = mpg(_factor("scheduling", 8.0, 10.0, we), _factor("runtime", 6.0, 8.0, we),
                  _factor("program", 3.0, 6.0, we))
    assert product.value == pytest.approx(0.3)
    # a program sample inside an included piece is inside the window; one across an exclusion is not
    inside = Window.parse(("2024-05-01T01:00Z", "2024-05-01T02:00Z"))
    across = Window.parse(("2024-05-01T05:00Z", "2024-05-01T08:00Z"))
    assert we.contains(inside) and not we.contains(across) and w.contains(across)
