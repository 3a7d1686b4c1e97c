"""Loader for the chapter's reference cases (tests/reference/seed_reference_cases.yaml).

The YAML is a copy of the chapter's worked numbers; tests never read ../shared.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

CASES_PATH = Path(__file__).with_name("seed_reference_cases.yaml")


def load_cases() -> dict[str, dict[str, Any]]:
    """Return the reference cases keyed by id."""
    cases = yaml.safe_load(CASES_PATH.read_text())
    return {c["id"]: c for c in cases}


CASES = load_cases()


class Case:
    """Accessor for one reference case: inputs and expected values by name."""

    def __init__(self, case_id: str) -> None:
        self.id = case_id
        self.raw = CASES[case_id]

    @property
    def status(self) -> str:
        return self.raw["status"]

    def input(self, name: str) -> Any:
        return self.raw["inputs"][name]["value"]

    def stated(self, name: str) -> Any:
        """The chapter's stated value (the 'value' field of an expected item)."""
        return self.raw["expected"][name]["value"]

    def computed(self, name: str) -> Any:
        """The independently re-derived value (the 'computed' field of an expected item)."""
        return self.raw["expected"][name]["computed"]

    def check(self, name: str) -> str:
        return self.raw["expected"][name]["check"]


