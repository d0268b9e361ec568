"""The record counts the README and docs/validation.md state are the committed records' (they drift otherwise)."""
import re
from pathlib import Path

from livebytes.validate.check.compare import compare
from livebytes.validate.check.records import load_records

ROOT = Path(__file__).resolve().parents[1]
MEASURED = [r for r in load_records() if r.origin == "measured"]
CONTROLLED = [r for r in MEASURED if not r.oom and not r.history_dependent]
V4 = [r for r in MEASURED if r.protocol_version == 4]


def number(text: str, pattern: str) -> int:
    match = re.search(pattern, text)
    assert match, pattern
    return int(match.group(1))


def test_readme_counts():
    text = (ROOT / "README.md").read_text()
    assert number(text, r"On the H200 \((\d+) records") == len(MEASURED)
    assert number(text, r"history \((\d+) records") == len(CONTROLLED)
    assert number(text, r"all (\d+) protocol-v4") == len(V4)
    carried = [c for c in (compare(r) for r in MEASURED) if c.requested_error is not None]
    assert number(" ".join(text.split()), r"on (\d+) of the \d+ records that carry it") == sum(c.requested_error == 0 for c in carried)
    assert number(" ".join(text.split()), r"of the (\d+) records that carry it") == len(carried)


def test_validation_doc_counts():
    text = " ".join((ROOT / "docs" / "validation.md").read_text().split())
    fitted = [compare(r) for r in MEASURED if not r.oom]
    assert number(text, r"(\d+) of the \d+ that did not run out of memory") == sum(
        abs(c.measured - c.predicted) <= 0.001 * c.measured for c in fitted)
    assert number(text, r"of the (\d+) that did not run out of memory") == len(fitted)
    assert number(text, r"\((\d+) to the byte\)") == sum(c.measured == c.predicted for c in fitted)
    assert number(text, r"Every one of the (\d+) controlled-history records") == len(CONTROLLED)
    assert number(text, r"(\d+) v4 records") == len(V4)
    carried = [c for c in (compare(r) for r in MEASURED) if c.requested_error is not None]
    assert number(text, r"Of the (\d+) records that carry it") == len(carried)
    assert number(text, r"records that carry it, (\d+) show") == sum(c.requested_error == 0 for c in carried)


def test_capacity_doc_counts():
    text = " ".join((ROOT / "docs" / "capacity.md").read_text().split())
    assert number(text, r"each measured step \((\d+) records\)") == len(CONTROLLED)
