"""fleetlib/accounting_rules.md: every rule the code cites is written down, and every name it gives exists."""

from __future__ import annotations

import ast
import importlib
import re
from functools import cache
from pathlib import Path

import pytest

import fleetlib

PACKAGE = Path(fleetlib.__file__).resolve().parent
ROOT = PACKAGE.parent
DOC = PACKAGE / "accounting_rules.md"
N_RULES = 47

HEADING = re.compile(r"^## Rule (\d+) — (\S.*)$")
CITATION = re.compile(r"\brules?\s+(\d+)((?:\s*(?:,|and|or|-|–)\s*\d+)*)", re.IGNORECASE)
IN_FLEETLIB = "In fleetlib:"
DOTTED = re.compile(r"`(fleetlib(?:\.\w+)+)`")
SECTION = re.compile(r"\((?:[^()]*\b(?:9\.\d+(?:\.\d+)?|Table \d+|Perspective 9\.\d+))[^()]*\)")
TEST_REF = re.compile(r"`(tests/[\w/]+\.py)((?:::\w+)+)`")


def sections() -> dict[int, list[str]]:
    """Rule number -> the lines of its section (heading excluded)."""
    out: dict[int, list[str]] = {}
    current: list[str] | None = None
    for line in DOC.read_text(encoding="utf-8").splitlines():
        match = HEADING.match(line)
        if match:
            current = out.setdefault(int(match.group(1)), [])
        elif line.startswith("## "):
            current = None
        elif current is not None:
            current.append(line)
    return out


def in_fleetlib_lines() -> list[pytest.param]:
    return [pytest.param(n, line, id=f"rule_{n}") for n, lines in sections().items() for line in lines
            if line.startswith(IN_FLEETLIB)]


def cited_rules() -> dict[int, list[str]]:
    """Rule number -> where under fleetlib/ it is cited (``path:line``)."""
    cited: dict[int, list[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            for match in CITATION.finditer(line):
                numbers = [int(match.group(1)), *map(int, re.findall(r"\d+", match.group(2)))]
                for n in numbers:
                    cited.setdefault(n, []).append(f"{path.relative_to(ROOT)}:{i}")
    return cited


def resolve(dotted: str) -> object:
    """Import the longest module prefix of ``dotted`` and walk the rest as attributes."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for name in parts[cut:]:
            obj = getattr(obj, name)  # AttributeError names what is missing
        return obj
    raise ModuleNotFoundError(dotted)


@cache
def definitions(path: Path) -> dict[str, set[str]]:
    """Top-level functions and classes of a test file; for a class, its method names."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out: dict[str, set[str]] = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            out[node.name] = set()
        elif isinstance(node, ast.ClassDef):
            out[node.name] = {n.name for n in node.body
                              if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}
    return out


def test_headings_run_one_to_47_without_gaps():
    numbers = [int(m.group(1)) for line in DOC.read_text(encoding="utf-8").splitlines()
               if (m := HEADING.match(line))]
    assert numbers == list(range(1, N_RULES + 1))


def test_every_rule_cited_in_the_code_has_a_heading():
    cited = cited_rules()
    assert cited, "expected the code to cite rules by number"
    documented = set(sections())
    missing = {n: where for n, where in cited.items() if n not in documented}
    assert not missing, f"rules cited in fleetlib/ without a heading in {DOC.name}: {missing}"


def test_every_rule_says_where_fleetlib_implements_it():
    for number, lines in sections().items():
        text = " ".join(lines)
        assert text.count(IN_FLEETLIB) == 1, f"rule {number}: expected one '{IN_FLEETLIB}' line"
        line = next(line for line in lines if line.startswith(IN_FLEETLIB))
        assert DOTTED.search(line) or "not implemented yet" in line, f"rule {number}: {line}"
        assert "Tests:" in line, f"rule {number}: name the tests, or say there are none"
        # The restatement keeps the chapter's section numbers in parentheses.
        statement = " ".join(lines[: lines.index(line)])
        assert SECTION.search(statement), f"rule {number}: no chapter section in parentheses"


@pytest.mark.parametrize(("number", "line"), in_fleetlib_lines())
def test_every_named_module_and_function_exists(number, line):
    for dotted in DOTTED.findall(line):
        try:
            resolve(dotted)
        except (ImportError, AttributeError) as exc:
            pytest.fail(f"rule {number} names {dotted}, which does not resolve: {exc}")


@pytest.mark.parametrize(("number", "line"), in_fleetlib_lines())
def test_every_named_test_exists(number, line):
    for file, names in TEST_REF.findall(line):
        path = ROOT / file
        assert path.is_file(), f"rule {number} names {file}, which does not exist"
        parts = names.strip(":").split("::")
        defined = definitions(path)
        assert parts[0] in defined, f"rule {number}: {file} defines no {parts[0]}"
        if len(parts) == 2:
            assert parts[1] in defined[parts[0]], f"rule {number}: {file}::{parts[0]} has no {parts[1]}"
        assert len(parts) <= 2, f"rule {number}: {file}{names}"


def test_rule_14_states_the_corrected_runtime_numerator():
    text = " ".join(sections()[14])
    assert "DESIGN.md" in text
    assert "wall time less their input waits" in text
    assert "program loss" in text


def test_citation_pattern_reads_lists_of_rules():
    found = [(int(m.group(1)), m.group(2)) for m in CITATION.finditer("rules 17 and 18; see rule 3, Rule 40")]
    assert [n for n, _ in found] == [17, 3, 40]
    assert re.findall(r"\d+", found[0][1]) == ["18"]
