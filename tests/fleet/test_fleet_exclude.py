"""Exclusion windows in the fleet walk: S, R and P lose the excluded stretch; it is listed, never dropped."""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import pandas as pd
import pytest

from fleetlib.fleet import load_manifest, measure_fleet
from fleetlib.fleet.commands import render_fleet, run_fleet
from fleetlib.fleet.views import measured_summary
from fleetlib.quality import InputError

ROOT = Path(__file__).resolve().parents[2]
GOOD = ROOT / "tests" / "corpus" / "fleet_bundles" / "good"
BUNDLE = ROOT / "data" / "fleet" / "synthetic"
CUT = ("2024-06-01T00:30:00Z", "2024-06-01T00:40:00Z")
IDEAL_STEP_DEVICE_S = 1e17 / 989e12  # the good bundle's model: 1e17 useful FLOPs per step, H100 dense BF16


def bundle_with(tmp_path: Path, extra: str) -> Path:
    """The good bundle with ``extra`` lines added to its manifest."""
    out = tmp_path / "b"
    shutil.copytree(GOOD, out)
    manifest = out / "fleet.yaml"
    manifest.write_text(manifest.read_text() + extra)
    return out


def test_the_good_bundle_with_ten_minutes_excluded_by_hand() -> None:
    m = measure_fleet(GOOD, exclude=[CUT])
    # 2 nodes x 8 GPUs over 110 included minutes; job 101 holds 8 GPUs 00:10-01:10 (50 min included),
    # job 102 8 GPUs 00:20-00:50 (20 min included, no timeline: unobserved)
    assert m.scheduling.denominator == 16 * 110 * 60 and m.scheduling.numerator == 8 * 70 * 60
    # job 101's steps run 00:12-00:42, ten minutes each: 00:30-00:40 takes 2 min of step 2, 8 of step 3
    assert m.runtime.denominator == 8 * 70 * 60
    assert m.runtime.numerator == pytest.approx(8 * 20 * 60, rel=1e-12)
    assert m.runtime.losses["unobserved"] == pytest.approx(8 * 20 * 60, rel=1e-12)
    # 1 + 0.8 + 0.2 retained steps of the ideal step time
    assert m.program.denominator == pytest.approx(8 * 20 * 60, rel=1e-12)
    assert m.program.numerator == pytest.approx(2 * IDEAL_STEP_DEVICE_S, rel=1e-12)
    assert m.mpg == pytest.approx(2 * IDEAL_STEP_DEVICE_S / (16 * 110 * 60), rel=1e-9)
    assert m.product.chain["scheduling->runtime"]["holds"] and m.product.chain["runtime->program"]["holds"]
    for f in (m.scheduling, m.runtime, m.program):
        assert f.window.same_as(m.window) and f.window.excluded_s == 600.0
    assert "excluded_time" in m.ledger.codes()
    d = m.to_dict()
    assert d["window"]["exclusions"] == [{"start": "2024-06-01T00:30:00+00:00",
                                          "end": "2024-06-01T00:40:00+00:00", "seconds": 600.0}]
    summary = measured_summary(m, manifest="fleet.yaml")  # the summary.json block of a report
    assert summary["window"]["excluded_s"] == 600.0 and summary["factors"]["runtime"]["window"]["exclusions"]
    assert "excluding [2024-06-01T00:30:00+00:00, 2024-06-01T00:40:00+00:00)" in summary["headline"]
    text = render_fleet(d)
    assert text.splitlines()[1].startswith("excluded                 0.17 h in 1 interval(s)")
    assert "excluded_time" in text


def test_the_manifest_exclude_key_gives_the_same_measurement(tmp_path: Path) -> None:
    b = bundle_with(tmp_path, f"exclude: [['{CUT[0]}', '{CUT[1]}']]\n")
    assert load_manifest(b).to_dict()["exclude"] == [{"start": "2024-06-01T00:30:00+00:00",
                                                      "end": "2024-06-01T00:40:00+00:00"}]
    from_manifest = measure_fleet(b)
    from_argument = measure_fleet(GOOD, exclude=[CUT])
    assert from_manifest.window.same_as(from_argument.window)
    assert from_manifest.mpg == from_argument.mpg
    # exclude= replaces the manifest's; an empty list measures the whole window
    assert measure_fleet(b, exclude=[]).mpg == measure_fleet(GOOD).mpg
    # a narrower window override cuts the manifest's exclusions to it
    narrow = measure_fleet(b, window=("2024-06-01T00:35:00Z", "2024-06-01T02:00:00Z"))
    assert narrow.window.exclusions == ((pd.Timestamp("2024-06-01T00:35:00Z"),
                                         pd.Timestamp("2024-06-01T00:40:00Z")),)
    assert narrow.scheduling.denominator == 16 * 80 * 60


@pytest.mark.parametrize(("extra", "message"), [
    ("exclude: [['2024-06-01T01:50:00Z', '2024-06-01T02:10:00Z']]\n",
     "exclusion [2024-06-01T01:50:00+00:00, 2024-06-01T02:10:00+00:00) is not inside the window "
     "[2024-06-01T00:00:00+00:00, 2024-06-01T02:00:00+00:00)"),
    ("exclude: [['2024-06-01T00:30:00', '2024-06-01T00:40:00Z']]\n",
     "exclusion start '2024-06-01T00:30:00' has no zone; write it with one, for example "
     "'2024-06-01T00:30:00Z' for UTC"),
    ("exclude: [{start: '2024-06-01T00:30:00Z', end: '2024-06-01T00:40:00Z'}, "
     "'2024-06-01T00:35:00Z/2024-06-01T00:45:00Z']\n",
     "exclusions [2024-06-01T00:30:00+00:00, 2024-06-01T00:40:00+00:00) and [2024-06-01T00:35:00+00:00, "
     "2024-06-01T00:45:00+00:00) overlap; give their union as one exclusion"),
    ("exclude: '2024-06-01T00:30:00Z/2024-06-01T00:40:00Z'\n",
     "must be a list of [start, end] pairs; got '2024-06-01T00:30:00Z/2024-06-01T00:40:00Z'"),
])
def test_a_bad_exclude_key_is_one_line_naming_the_manifest_and_the_key(tmp_path: Path, extra: str,
                                                                       message: str) -> None:
    with pytest.raises(InputError) as info:
        load_manifest(bundle_with(tmp_path, extra))
    assert info.value.field == "exclude" and Path(info.value.file).name == "fleet.yaml"
    assert "\n" not in str(info.value) and message in str(info.value)


def test_the_command_takes_exclude_and_refuses_one_outside_the_window() -> None:
    res = run_fleet(GOOD, exclude=[list(CUT)])
    assert res["window"]["excluded_s"] == 600.0
    with pytest.raises(InputError) as info:
        run_fleet(GOOD, window=("2024-06-01T00:00:00Z", "2024-06-01T00:20:00Z"), exclude=[list(CUT)])
    assert info.value.field == "exclude" and info.value.file is None
    assert "exclusion [2024-06-01T00:30:00+00:00, 2024-06-01T00:40:00+00:00) is not inside the window" in \
        str(info.value)


@pytest.mark.slow
def test_excluding_a_middle_stretch_gives_the_sums_of_the_two_sides_measured_apart() -> None:
    t0, t3 = pd.Timestamp("2024-05-01T00:00:00Z"), pd.Timestamp("2024-05-01T12:00:00Z")
    t1, t2 = t0 + pd.Timedelta(hours=3, minutes=10), t0 + pd.Timedelta(hours=5, seconds=30)
    cut = measure_fleet(BUNDLE, exclude=[(t1, t2)])
    left = measure_fleet(BUNDLE, window=(t0, t1))
    right = measure_fleet(BUNDLE, window=(t2, t3))
    for name in ("scheduling", "runtime", "program"):
        c, a, b = getattr(cut, name), getattr(left, name), getattr(right, name)
        assert math.isclose(c.numerator, a.numerator + b.numerator, rel_tol=1e-9), name
        assert math.isclose(c.denominator, a.denominator + b.denominator, rel_tol=1e-9), name
        for loss, value in c.losses.items():
            both = a.losses.get(loss, 0.0) + b.losses.get(loss, 0.0)
            assert math.isclose(value, both, rel_tol=1e-9, abs_tol=1e-6), (name, loss)
