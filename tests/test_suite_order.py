"""The order parallel workers take the test files in (tests/conftest.py)."""

from __future__ import annotations

from pathlib import Path

from conftest import LONGEST_FILES


def test_the_longest_files_named_for_the_workers_exist():
    """A renamed file would silently drop out of the order and could again start last."""
    here = Path(__file__).parent
    assert [name for name in LONGEST_FILES if not (here / name).is_file()] == []
    assert len(set(LONGEST_FILES)) == len(LONGEST_FILES)
