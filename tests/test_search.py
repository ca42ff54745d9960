"""The plain-fence dialect's search-anywhere check: the reference's verdicts, in linear time, in bounded windows.

The oracle is the reference project's check re-derived from what it does (the
expected text escaped, its placeholders made patterns, `...` a lazy any-text,
searched with DOTALL in the output's lines joined by "\\n"): a regular
expression, which may backtrack; the harness's search must agree with it on
every case.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ci.expect.search import search_file, search_matches


def reference_verdict(actual: str, expected: str) -> bool:
    """The reference's verdict, by a regular expression (the yardstick, not the harness's way)."""
    placeholders = [(re.compile(r"\b\d+\.\d+\.x\b"), r"\d+\.\d+\.\d+"), (re.compile(r"\bxxx\b"), r"[^,\s]+?")]
    text = expected
    for index, (found, _) in enumerate(placeholders):
        text = found.sub(f"\x01P{index}\x01", text)
    pattern = re.escape(text)
    for index, (_, becomes) in enumerate(placeholders):
        pattern = pattern.replace(f"\x01P{index}\x01", becomes)
    pattern = pattern.replace(r"\.\.\.", ".*?")
    return re.search(pattern, "\n".join(actual.splitlines()), re.DOTALL) is not None


CASES = [
    # (actual, expected, found)
    (
        "0.00.734 I load_tensors:        CANN0 model buffer size =     0.00 MiB\n",
        "load_tensors: ...CANN0 model buffer size = ...",
        True,
    ),
    ("deepspeed 0.16.4 installed\n", "deepspeed 0.16.x", True),
    ("deepspeed 0.16 installed\n", "deepspeed 0.16.x", False),
    ("saved to /tmp/out/model.bin, done\n", "saved to xxx, done", True),
    ("saved to , done\n", "saved to xxx, done", False),
    ("a\r\nb\n", "a\nb", True),
    ("a\n", "a\n...", False),  # the output's last line break is dropped, as splitlines() drops it
    ("a\n\n", "a\n...", True),
    ("first\nsecond\nthird", "first...third", True),
    ("third first", "first...third", False),
    ("x" * 50 + "!", "xxx.bin", False),
    ("", "", True),
]


@pytest.mark.parametrize(("actual", "expected", "found"), CASES)
def test_known_cases_agree_with_the_reference(actual: str, expected: str, found: bool, tmp_path: Path) -> None:
    assert reference_verdict(actual, expected) is found
    assert search_matches(actual, expected) is found
    path = tmp_path / "out.txt"
    path.write_bytes(actual.encode("utf-8"))
    assert search_file(str(path), expected, window_chars=3) is found


# small alphabets, so that random texts often hold what random patterns look for: digits of two scripts, the
# placeholders' letters, dots, commas, blanks and line breaks of several kinds
OUTPUT_CHARS = st.sampled_from(
    ["a", "b", "x", "1", "2", "\u0663", ".", ",", " ", "\t", "\n", "\r", "\u2028", "\x1c", "é"]
)
EXPECTED_PARTS = st.sampled_from(
    ["a", "b", "x", "xxx", "1", "2", ".", "...", "1.2.x", "0.1.x", ",", " ", "\n", "é", "xx"]
)


@settings(max_examples=400, deadline=None)
@given(actual=st.text(OUTPUT_CHARS, max_size=40), parts=st.lists(EXPECTED_PARTS, max_size=8))
def test_random_cases_get_the_reference_verdict(actual: str, parts: list[str]) -> None:
    expected = "".join(parts)
    assert search_matches(actual, expected) is reference_verdict(actual, expected), (actual, expected)


@settings(max_examples=150, deadline=None)
@given(
    actual=st.text(OUTPUT_CHARS, max_size=40),
    parts=st.lists(EXPECTED_PARTS, max_size=6),
    window=st.integers(min_value=1, max_value=9),
)
def test_a_file_read_in_windows_gets_the_same_verdict(
    actual: str, parts: list[str], window: int, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Windows cut a match, a "\\r\\n" and a multi-byte character anywhere: the verdict is the whole text's."""
    expected = "".join(parts)
    path = tmp_path_factory.mktemp("search") / "out.txt"
    path.write_bytes(actual.encode("utf-8"))
    assert search_file(str(path), expected, window_chars=window) is reference_verdict(actual, expected)


def test_undecodable_bytes_are_read_as_the_reference_reads_them(tmp_path: Path) -> None:
    path = tmp_path / "out.txt"
    path.write_bytes(b"model \xff\xfe loaded\r\n")
    assert search_file(str(path), "model \ufffd\ufffd loaded")
    assert not search_file(str(path), "model  loaded")
