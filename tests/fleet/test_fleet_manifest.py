"""Bad fleet bundles: each is one clear one-line error naming the manifest and the key, or a named flag."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleetlib.fleet import load_manifest, measure_fleet
from fleetlib.quality import InputError

CORPUS = Path(__file__).resolve().parents[1] / "corpus" / "fleet_bundles"

BAD = {
    "missing_file": ("timelines.files", "missing file 'timelines/absent.csv'"),
    "outside_folder": ("scheduler.files", "lies outside the manifest's folder"),
    "window_outside": ("window", "lies outside the scheduler records"),
    "two_timelines": ("timelines.files", "two timelines for job '101'"),
    "model_without_timeline": ("models.102", "has no timeline in the bundle"),
    "window_naive": ("window", "has no zone"),
    "unknown_key": ("timeline", "unknown key(s) ['timeline']"),
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_a_bad_bundle_is_one_line_naming_the_manifest_and_the_key(name: str) -> None:
    key, words = BAD[name]
    with pytest.raises(InputError) as info:
        measure_fleet(CORPUS / name)
    message = str(info.value)
    assert "\n" not in message
    assert info.value.field == key
    assert Path(info.value.file).name == "fleet.yaml"
    assert words in message


def test_a_timeline_job_unknown_to_the_scheduler_is_kept_flagged_and_not_joined() -> None:
    m = measure_fleet(CORPUS / "unknown_timeline_job")
    assert "timeline_job_unknown" in m.ledger.codes()
    flag = next(f for f in m.ledger.flags if f.code == "timeline_job_unknown")
    assert flag.job_id == "999" and flag.file == "timelines/999.csv"
    assert "999" not in m.jobs.index
    assert m.ledger.unused["timeline rows of jobs unknown to the scheduler"] == 5
    good = measure_fleet(CORPUS / "good")
    assert m.runtime.value == pytest.approx(good.runtime.value, rel=1e-12)


def test_the_good_bundle_by_hand() -> None:
    m = measure_fleet(CORPUS / "good")
    # 2 nodes x 8 GPUs x 2 h in service; job 101 holds 8 GPUs for 1 h, job 102 for 30 min (no timeline)
    assert m.scheduling.value == pytest.approx(12 / 32, rel=1e-12)
    # job 101: three 10-minute steps; the first (warm-up after the cold launch) is at the baseline
    assert m.runtime.numerator == pytest.approx(8 * 1800.0, rel=1e-12)
    assert m.runtime.losses["unobserved"] == pytest.approx(8 * 1800.0, rel=1e-12)
    assert m.coverage["runtime"] == pytest.approx(8 / 12, rel=1e-12)
    # 1e17 useful FLOPs per step at 989 TFLOP/s dense BF16
    assert m.program.numerator == pytest.approx(3 * 1e17 / 989e12, rel=1e-12)
    assert m.mpg == pytest.approx(3 * 1e17 / 989e12 / (32 * 3600.0), rel=1e-9)


def test_manifest_paths_resolve_inside_the_folder_and_a_folder_is_taken() -> None:
    man = load_manifest(CORPUS / "good")
    assert man.file.name == "fleet.yaml"
    for p in (*man.scheduler_files, *man.timeline_files, *man.models.values()):
        assert man.folder in p.parents
    assert man.to_dict()["models"] == {"101": "models/101.yaml"}


@pytest.mark.parametrize(("text", "key", "words"), [
    ("name: x\n", "scheduler", "is required"),
    ("[1, 2]\n", "<manifest>", "must be a mapping"),
    ("scheduler: {format: lsf, files: [a]}\ntimelines: {format: canonical, files: [a]}\n", "scheduler.format",
     "must be one of"),
    ("scheduler: {format: slurm, files: []}\ntimelines: {format: canonical, files: [a]}\n", "scheduler.files",
     "non-empty list"),
    ("scheduler: {format: slurm, files: [fleet.yaml]}\ntimelines: {format: canonical, files: [fleet.yaml]}\n"
     "price_per_device_hour: -1\n", "price_per_device_hour", ">= 0"),
    ("scheduler: {format: slurm, files: [/etc/hostname]}\ntimelines: {format: canonical, files: [a]}\n",
     "scheduler.files", "outside"),
])
def test_manifest_shape_errors(tmp_path: Path, text: str, key: str, words: str) -> None:
    (tmp_path / "fleet.yaml").write_text(text)
    with pytest.raises(InputError) as info:
        load_manifest(tmp_path)
    assert info.value.field == key
    assert words in str(info.value)


def test_a_missing_manifest_and_invalid_yaml(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="fleet manifest not found"):
        load_manifest(tmp_path)
    (tmp_path / "fleet.yaml").write_text("window: [\n")
    with pytest.raises(InputError, match="not valid YAML"):
        load_manifest(tmp_path / "fleet.yaml")


def test_the_hand_built_bundle_of_the_slurm_sample() -> None:
    from fleetlib.fleet.commands import run_fleet
    from fleetlib.scheduling.commands import scheduling_command

    bundle = CORPUS.parents[1].parent / "data" / "fleet" / "slurm_sample"
    res = run_fleet(bundle)
    # S is the scheduling rung's own number on the same records and window
    alone = scheduling_command(sorted(str(p) for p in (bundle / "scheduler").iterdir()), "slurm", tz="UTC",
                               window=("2024-03-04T00:00Z", "2024-03-05T00:00Z"))
    assert res["factors"]["scheduling"]["value"] == pytest.approx(alone["scheduling_goodput"], rel=1e-12)
    jobs = res["jobs"]
    # 41001: 16 GPUs held 6 h; 340 retained 60-s steps (waits excluded)
    assert jobs["41001"]["runtime_goodput"] == pytest.approx(340 * 60 / (6 * 3600), rel=1e-12)
    # 41006: the timeline ends 2 minutes before the scheduler's release: 8 GPUs x 120 s of residual
    assert res["reconciliation"]["jobs"]["41006"]["residual_device_s"] == pytest.approx(960.0)
    # 41004: two attempts (00:01:00 -> 04:30:05 and 08:05:00 -> 14:00:00) of 16 GPUs
    held = 16 * ((4 * 3600 + 29 * 60 + 5) + (5 * 3600 + 55 * 60))
    assert jobs["41004"]["held_device_s"] == pytest.approx(held)
    assert jobs["41002"]["observed"] is False and jobs["41002"]["runtime_goodput"] == 0.0
    assert res["chain"]["scheduling->runtime"]["holds"] and res["chain"]["runtime->program"]["holds"]
