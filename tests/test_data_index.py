"""validate/data/INDEX.md names every top-level entry of validate/data and nothing that is not there: a folder added
without its row, or a row left behind by a folder moved away, fails here."""
import re
from pathlib import Path

import pytest

DATA = Path(__file__).resolve().parents[1] / "validate" / "data"
ROW = re.compile(r"^\| `([^`]+)` \|", re.MULTILINE)       # a table row's first cell: `records/boundary/`


def indexed(index_text: str) -> list[str]:
    """The entries the index's table names, as written (`records/`, `records/*.json`, `plans/`)."""
    return ROW.findall(index_text)


def index_gaps(folder: Path, index_text: str) -> tuple[set[str], set[str]]:
    """(top-level entries of ``folder`` without a row, rows whose top-level entry is not in ``folder``)."""
    here = {p.name for p in folder.iterdir()} - {"INDEX.md"}
    named = {entry.split("/", 1)[0] for entry in indexed(index_text)}
    return here - named, named - here


def test_every_top_level_entry_is_indexed_and_every_row_is_there():
    missing, stale = index_gaps(DATA, (DATA / "INDEX.md").read_text())
    assert not missing, f"validate/data/INDEX.md has no row for {sorted(missing)}"
    assert not stale, f"validate/data/INDEX.md names {sorted(stale)}, not in validate/data"


@pytest.mark.parametrize("entry", indexed((DATA / "INDEX.md").read_text()))
def test_each_row_names_something_there(entry):
    """A row's path (a folder, or a glob such as `records/*.json`) matches at least one file or folder."""
    assert list(DATA.glob(entry.rstrip("/"))), f"validate/data/{entry} matches nothing"


@pytest.mark.parametrize("folders,rows,gaps", [
    (["records", "plans"], ["records/", "plans/"], (set(), set())),
    (["records", "plans", "new"], ["records/", "plans/"], ({"new"}, set())),          # a folder added without its row
    (["records"], ["records/*.json", "plans/"], (set(), {"plans"})),                  # a row left behind
])
def test_the_check_sees_both_gaps(tmp_path, folders, rows, gaps):
    for name in folders:
        (tmp_path / name).mkdir()
    (tmp_path / "INDEX.md").write_text("| entry | what |\n|---|---|\n" + "".join(f"| `{r}` | x |\n" for r in rows))
    assert index_gaps(tmp_path, (tmp_path / "INDEX.md").read_text()) == gaps
