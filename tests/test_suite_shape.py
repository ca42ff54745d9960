"""The suite's own shape: no test file grows past what a reader can hold (issue 35, "Tests by behaviour"), and
every test the docs name as holding a guarantee is there."""

from __future__ import annotations

import re
from pathlib import Path

TESTS = Path(__file__).resolve().parent
DOCS = TESTS.parent / "docs"
# A link to the test holding a claim: [`test_name[case]`](../tests/test_file.py)
TEST_LINK = re.compile(r"\[`(test_\w+)(?:\[[^\]]*\])?`\]\(\.\./tests/(test_\w+\.py)\)")
MAX_TEST_FILE_LINES = 1200
# Files over the limit that are not this suite's to split yet, each with why. An entry must still be over the
# limit: once its file is split, the entry goes too (test_every_exception_is_still_needed).
EXCEPTIONS: dict[str, str] = {}


def oversized(root: Path) -> dict[str, int]:
    """Every *.py below ROOT (its subfolders too) over MAX_TEST_FILE_LINES lines, by path relative to ROOT."""
    found = {}
    for path in sorted(root.rglob("*.py")):
        if "__pycache__" in path.parts:
            continue
        with path.open(encoding="utf-8") as lines:
            count = sum(1 for _ in lines)
        if count > MAX_TEST_FILE_LINES:
            found[path.relative_to(root).as_posix()] = count
    return found


def test_no_test_file_is_over_the_limit() -> None:
    over = {name: count for name, count in oversized(TESTS).items() if name not in EXCEPTIONS}
    assert not over, (
        f"test files over {MAX_TEST_FILE_LINES} lines: {over}; split them by what a user sees, sharing helpers"
        " through conftest.py or a small helper module"
    )


def test_every_exception_is_still_needed() -> None:
    over = oversized(TESTS)
    assert not [name for name in EXCEPTIONS if name not in over], f"under the limit now, drop from EXCEPTIONS: {over}"


def test_the_limit_counts_every_line_of_every_python_file_below_tests(tmp_path: Path) -> None:
    (tmp_path / "deep" / "er").mkdir(parents=True)
    (tmp_path / "deep" / "er" / "helper.py").write_text("x = 1\n" * (MAX_TEST_FILE_LINES + 1), encoding="utf-8")
    (tmp_path / "test_at_the_limit.py").write_text("x = 1\n" * MAX_TEST_FILE_LINES, encoding="utf-8")
    (tmp_path / "notes.txt").write_text("x\n" * (MAX_TEST_FILE_LINES + 1), encoding="utf-8")
    assert oversized(tmp_path) == {"deep/er/helper.py": MAX_TEST_FILE_LINES + 1}


def test_every_test_a_doc_names_exists() -> None:
    links = [(page.name, *found) for page in sorted(DOCS.glob("*.md")) for found in TEST_LINK.findall(page.read_text())]
    assert len(links) >= 10, "docs/authoring.md, section 12, names the test holding each difference"
    missing = [
        f"{page}: {test} in tests/{file}"
        for page, test, file in links
        if not (TESTS / file).is_file() or f"def {test}(" not in (TESTS / file).read_text(encoding="utf-8")
    ]
    assert not missing, f"tests named by the docs that do not exist (renamed? update the link): {missing}"
