"""The clean-end rule and the event kinds, stated where a user reads them and equal to what the code does.

* Every event kind the readers accept (:func:`fleetlib.runtime.known_event_kinds`, over the code's own
  constants) is listed on the events schema page, and every kind listed there is accepted.
* ``--no-clean-end-commit``'s help names every end marker of the rule; R's convention states R's
  definition and the clean-end rule, one sentence each.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from fleetlib import runtime
from fleetlib.cli import build_parser
from fleetlib.runtime import (
    AUXILIARY_EVENT_KINDS,
    AUXILIARY_KIND_PREFIXES,
    CLEAN_END_RULE,
    EVENT_KINDS,
    known_event_kinds,
    synth_timeline,
)
from fleetlib.runtime.partition import kind_codes

PAGE = Path(__file__).resolve().parents[2] / "docs" / "schemas" / "runtime_events.md"


def _documented_kinds() -> tuple[set[str], set[str]]:
    """The kinds and kind prefixes listed in the events page's "Event kinds" table (read as text)."""
    text = PAGE.read_text(encoding="utf-8")
    section = text.split("## Event kinds", 1)[1].split("\n## ", 1)[0]
    names = re.findall(r"^\| `([^`]+)` \|", section, flags=re.M)
    return {n for n in names if not n.endswith("...")}, {n[:-3] for n in names if n.endswith("...")}


def test_the_events_page_lists_every_accepted_kind_and_only_those():
    kinds, prefixes = _documented_kinds()
    assert "job_completed" in kinds and "release" in kinds
    accepted = set(EVENT_KINDS) | set(AUXILIARY_EVENT_KINDS)
    assert kinds == accepted
    assert prefixes == set(AUXILIARY_KIND_PREFIXES)
    # the reader's own test of a kind agrees: every documented kind is accepted, an undocumented one not
    assert known_event_kinds(sorted(kinds)).all()
    assert known_event_kinds([p + "anything" for p in prefixes]).all()
    assert not known_event_kinds(["job_finished", "completed"]).any()
    assert CLEAN_END_RULE in PAGE.read_text(encoding="utf-8")
    # the kernel's own table: every canonical kind has a code of its own, auxiliary ones are ignored
    codes = kind_codes(np.array(list(EVENT_KINDS), dtype=object))
    assert (codes >= 2).all() and len(set(codes.tolist())) == len(EVENT_KINDS)
    assert (kind_codes(np.array([*AUXILIARY_EVENT_KINDS, "custom_badput:x"], dtype=object)) == 1).all()
    assert kind_codes(np.array(["job_finished"], dtype=object)).tolist() == [0]


def test_no_clean_end_commit_help_states_the_rule(capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args(["runtime", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    text = text[text.index("--no-clean-end-commit do not"):]
    for words in ("last step", "no failure or preemption", "release", "job_completed", "COMPLETED",
                  "final commit"):
        assert words in text.split(" --", 1)[0], words


def test_the_r_factor_states_its_definition_and_the_clean_end_rule():
    steps, events, _ = synth_timeline(50, seed=1, checkpoint_every_steps=20)
    f = runtime.runtime_goodput(steps, events).factor()
    sentences = f.convention.split(". ")
    assert sentences[0].startswith("R is productive step time") and "committed definition" in sentences[0]
    assert f.convention.split(". ", 1)[1].startswith(CLEAN_END_RULE)
    off = runtime.runtime_goodput(steps, events, clean_end_commit=False).factor()
    assert "Clean end not counted" in off.convention and CLEAN_END_RULE not in off.convention


def test_the_text_outputs_print_the_clean_end_rule_beside_r(capsys: pytest.CaptureFixture[str]) -> None:
    from fleetlib.cli import main

    root = Path(__file__).resolve().parents[2]
    demo = [str(root / "data" / "timelines" / f"demo-7b-ft_{part}.csv") for part in ("steps", "events")]
    for args in (["runtime", *demo], ["fleet", str(root / "data" / "fleet" / "slurm_sample" / "fleet.yaml")]):
        assert main(args) == 0
        text = " ".join(capsys.readouterr().out.split())  # the outputs wrap long lines
        assert CLEAN_END_RULE in text, args[0]
    assert main(["runtime", "--no-clean-end-commit", *demo]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert CLEAN_END_RULE not in out and "Clean end not counted" in out
