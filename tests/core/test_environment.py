"""The install files agree: environment.yml delegates to pip, constraints.txt pins every dependency."""

from __future__ import annotations

import re
import tomllib
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
PROJECT = PYPROJECT["project"]


def _requirements() -> list[Requirement]:
    reqs = [Requirement(r) for r in PROJECT["dependencies"]]
    for extra in PROJECT.get("optional-dependencies", {}).values():
        reqs += [Requirement(r) for r in extra]
    return reqs


def _pins() -> dict[str, str]:
    pins: dict[str, str] = {}
    for line_no, raw in enumerate((ROOT / "constraints.txt").read_text().splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        match = re.fullmatch(r"([A-Za-z0-9][A-Za-z0-9._-]*)==([A-Za-z0-9.+!-]+)", line)
        assert match, f"constraints.txt line {line_no} is not an exact pin: {raw!r}"
        name = canonicalize_name(match.group(1))
        assert name not in pins, f"constraints.txt pins {name} twice"
        pins[name] = match.group(2)
    return pins


def _pip_section(env: dict) -> list[str]:
    sections = [d["pip"] for d in env["dependencies"] if isinstance(d, dict) and "pip" in d]
    assert len(sections) == 1, "environment.yml needs exactly one pip section"
    return [str(x).strip() for x in sections[0]]


@pytest.fixture(scope="module")
def env() -> dict:
    return yaml.safe_load((ROOT / "environment.yml").read_text())


def test_environment_yml_delegates_to_the_pip_install(env):
    assert env["name"] == "fleetlib"
    pip = _pip_section(env)
    assert pip == ["-c constraints.txt", "-e .[dev]"]
    plain = [d for d in env["dependencies"] if isinstance(d, str)]
    # conda supplies only the interpreter and pip; everything else comes from the pip section
    assert sorted(re.split(r"[=<>!~ ]", d, maxsplit=1)[0] for d in plain) == ["pip", "python"]


def test_environment_python_satisfies_requires_python(env):
    (python,) = [d for d in env["dependencies"] if isinstance(d, str) and d.startswith("python")]
    match = re.fullmatch(r"python\s*=+\s*(\d+\.\d+)(?:\.\*)?", python)
    assert match, f"environment.yml should name one Python minor version; got {python!r}"
    assert SpecifierSet(PROJECT["requires-python"]).contains(match.group(1) + ".0")


def test_every_dependency_is_pinned_and_the_pin_satisfies_pyproject():
    pins = _pins()
    missing = [str(r) for r in _requirements() if canonicalize_name(r.name) not in pins]
    assert missing == [], f"dependencies without a pin in constraints.txt: {missing}"
    outside = [f"{r.name}=={pins[canonicalize_name(r.name)]} vs {r.specifier}" for r in _requirements()
               if not r.specifier.contains(pins[canonicalize_name(r.name)], prereleases=True)]
    assert outside == [], f"pins outside pyproject's ranges: {outside}"


def test_the_project_itself_is_not_pinned():
    assert canonicalize_name(PROJECT["name"]) not in _pins()


def test_installed_direct_dependencies_match_the_pins():
    # The environment the tests run in was installed from constraints.txt (make setup), so the
    # direct dependencies must carry exactly the pinned versions; a mismatch means constraints.txt
    # is stale or the environment was changed by hand.
    pins = _pins()
    wrong = []
    for req in _requirements():
        name = canonicalize_name(req.name)
        try:
            installed = version(req.name)
        except PackageNotFoundError:
            wrong.append(f"{name} not installed")
            continue
        if installed != pins[name]:
            wrong.append(f"{name} {installed} installed, {pins[name]} pinned")
    assert wrong == []


def test_ci_script_runs_make_test_strictly():
    script = (ROOT / ".ci" / "run").read_text()
    assert script.startswith("#!/usr/bin/env bash")
    assert "set -euo pipefail" in script
    assert re.search(r"^make test$", script, flags=re.MULTILINE)


def test_makefile_installs_with_the_constraints():
    makefile = (ROOT / "Makefile").read_text()
    assert '-m pip install --disable-pip-version-check -c constraints.txt -e ".[dev]"' in makefile
    # a path entry, not a finder hook: from a folder holding a clone named fleetlib, the hook let that
    # folder import as an empty namespace package (checked by hand with a minimal package, issue 31)
    assert "--config-settings editable_mode=compat" in makefile
    for target in ("help", "report", "test", "lint", "clean"):
        assert re.search(rf"^{target}:", makefile, flags=re.MULTILINE), target
