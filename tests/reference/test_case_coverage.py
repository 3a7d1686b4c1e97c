"""Every reference case that the foundation must reproduce is exercised by a test in this folder."""

from pathlib import Path

from refcases import CASES

REQUIRED_STATUSES = {"verified", "verified_with_rounding_note", "erratum", "underdetermined"}


def test_every_required_case_is_tested():
    here = Path(__file__).parent
    text = "\n".join(p.read_text() for p in here.glob("test_ref_*.py"))
    required = sorted(cid for cid, c in CASES.items() if c["status"] in REQUIRED_STATUSES)
    missing = [cid for cid in required if f'"{cid}"' not in text]
    assert len(required) == 46
    assert missing == [], f"reference cases with no test: {missing}"
