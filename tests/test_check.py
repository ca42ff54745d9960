"""Output checking (spec section 4): table tests, a property test against the regex reference,
the adversarial family a backtracking matcher chokes on, mismatch reports and large files.

The reference semantics: each wildcard token becomes a lazy DOTALL `.*?`, everything
else is matched literally, the whole is anchored at both ends and followed by `\\n*`.
Where tokens overlap at one position the longest wins.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ci.base.text import clean_text
from ci.expect.examine import examine_file, examine_text, explain_mismatch
from ci.expect.match import blame_file, blame_text, match_file, matches, split_pieces
from ci.record.outcome import MatchReport

DEFAULT = ("...",)
NO_WILDCARD: tuple[str, ...] = ()


# -- the reference --------------------------------------------------------


def reference_parts(body: str, tokens: Sequence[str]) -> list[str]:
    """The body split at its tokens: literals at even indices, tokens at odd ones.

    Written independently of `split_pieces`: a regular expression alternation tried
    longest first finds, at the leftmost position, the longest token there.
    """
    if not tokens:
        return [body]
    alternation = "|".join(re.escape(token) for token in sorted(set(tokens), key=len, reverse=True))
    return re.split(f"({alternation})", body)


def reference_pattern(body: str, tokens: Sequence[str]) -> str:
    parts = reference_parts(body, tokens)
    return "".join(".*?" if index % 2 else re.escape(part) for index, part in enumerate(parts))


def reference_matches(actual: str, body: str, tokens: Sequence[str]) -> bool:
    return re.fullmatch(reference_pattern(body, tokens) + r"\n*", actual, re.DOTALL) is not None


def write_output(directory: Path, data: bytes, name: str = "stdout.txt") -> str:
    path = directory / name
    path.write_bytes(data)
    return str(path)


# -- table tests ------------------------------------------------------------

MATCH_TABLE: list[tuple[str, str, str, tuple[str, ...], bool]] = [
    # (case, actual, body, tokens, verdict)
    ("exact", "hello", "hello", DEFAULT, True),
    ("exact, differs", "hallo", "hello", DEFAULT, False),
    ("default wildcard inline", "took 3.21 s", "took ... s", DEFAULT, True),
    ("wildcard matches the empty text", "took  s", "took ... s", DEFAULT, True),
    ("literal around wildcard must be there", "took 3.21s", "took ... s", DEFAULT, False),
    ("whole body a wildcard", "anything\nat all\n", "...", DEFAULT, True),
    ("four dots: a wildcard then a literal dot", "end.", "....", DEFAULT, True),
    ("four dots need the final dot", "end", "....", DEFAULT, False),
    # fuzzy='xxx' replaces the default: `...` becomes literal
    ("fuzzy xxx: xxx is a wildcard", "version 2.1.0", "version xxx", ("xxx",), True),
    ("fuzzy xxx: ... is literal", "version 2.1.0", "version ...", ("xxx",), False),
    ("fuzzy xxx: ... matches itself", "version ...", "version ...", ("xxx",), True),
    # disable_fuzzy: no wildcard at all
    ("disable_fuzzy: ... is literal", "a...b", "a...b", NO_WILDCARD, True),
    ("disable_fuzzy: ... matches only itself", "aZb", "a...b", NO_WILDCARD, False),
    ("disable_fuzzy: trailing newlines still allowed", "a...b\n\n", "a...b", NO_WILDCARD, True),
    # wildcards span newlines
    ("wildcard spans lines", "start\nline 1\nline 2\nend", "start\n...\nend", DEFAULT, True),
    ("wildcard spans lines, inline", "start: 1\n2\n3 :end", "start: ... :end", DEFAULT, True),
    ("newlines around a wildcard line are literal", "start\nend", "start\n...\nend", DEFAULT, False),
    ("an empty line matches a wildcard line", "start\n\nend", "start\n...\nend", DEFAULT, True),
    # empty body
    ("empty body, empty output", "", "", DEFAULT, True),
    ("empty body, only newlines", "\n\n", "", DEFAULT, True),
    ("empty body, some output", "x", "", DEFAULT, False),
    ("empty body, a space", " \n", "", DEFAULT, False),
    # empty output
    ("empty output, literal body", "", "abc", DEFAULT, False),
    ("empty output, wildcard body", "", "...", DEFAULT, True),
    ("empty output, literal then wildcard", "", "a...", DEFAULT, False),
    ("empty output, two wildcards", "", "......", DEFAULT, True),
    # trailing newlines in the actual output
    ("one trailing newline", "abc\n", "abc", DEFAULT, True),
    ("many trailing newlines", "abc\n\n\n\n", "abc", DEFAULT, True),
    ("trailing space is not a newline", "abc \n", "abc", DEFAULT, False),
    ("a leading newline is not allowed", "\nabc", "abc", DEFAULT, False),
    ("trailing newlines after a literal suffix", "a 1 b\n\n", "a ... b", DEFAULT, True),
    ("trailing text after the suffix", "a 1 b c\n", "a ... b", DEFAULT, False),
    ("suffix found earlier, not at the end", "a b c\n", "a ... b", DEFAULT, False),
    # a body ending with a wildcard
    ("body ends with a wildcard", "abc\ndef\n", "abc\n...", DEFAULT, True),
    ("body ends with a wildcard, nothing after", "abc", "abc...", DEFAULT, True),
    ("piece abc\\n before a final wildcard, output abc", "abc", "abc\n...", DEFAULT, False),
    ("piece abc\\n before a final wildcard, output abc\\n", "abc\n", "abc\n...", DEFAULT, True),
    ("piece abc\\n before a final wildcard, more lines", "abc\nx\ny", "abc\n...", DEFAULT, True),
    ("body starts with a wildcard", "noise\nabc", "...\nabc", DEFAULT, True),
    ("body starts with a wildcard, newline is literal", "abc", "...\nabc", DEFAULT, False),
    # prefix and suffix may not overlap
    ("prefix and suffix overlap", "ab", "ab...b", DEFAULT, False),
    ("prefix and suffix just fit", "abb", "ab...b", DEFAULT, True),
    ("middle pieces in order", "1 a 2 b 3", "...a...b...", DEFAULT, True),
    ("middle pieces out of order", "1 b 2 a 3", "...a...b...", DEFAULT, False),
    # multi-byte UTF-8 (\uff0c is the full-width comma of Chinese text)
    ("Chinese exact", "你好\uff0c世界", "你好\uff0c世界", DEFAULT, True),
    ("Chinese with a wildcard", "模型路径: /data/模型\n完成\n", "模型路径: ...\n完成", DEFAULT, True),
    ("Chinese differs by one character", "你好\uff0c世界", "你坏\uff0c世界", DEFAULT, False),
    ("Chinese wildcard inside a line", "已加载 12 个模型", "已加载 ... 个模型", DEFAULT, True),
    ("emoji and accents", "ok ✅ café 🚀", "ok ... 🚀", DEFAULT, True),
    ("Chinese fuzzy token", "耗时 3 秒", "耗时 某某 秒", ("某某",), True),
    # overlapping tokens: the longest at one position wins
    ("xx and xxx: xxx is one wildcard", "aQb", "axxxb", ("xx", "xxx"), True),
    ("xx and xxx, given the other way round", "aQb", "axxxb", ("xxx", "xx"), True),
    ("xx and xxx: xxxx is a wildcard then a literal x", "aQxb", "axxxxb", ("xx", "xxx"), True),
    ("xx and xxx: the literal x must be there", "aQb", "axxxxb", ("xx", "xxx"), False),
    ("xx and xxx: a lone x is literal", "axb", "axb", ("xx", "xxx"), True),
    ("xx and xxx: a lone x matches only x", "ayb", "axb", ("xx", "xxx"), False),
]


@pytest.mark.parametrize(
    ("actual", "body", "tokens", "verdict"), [c[1:] for c in MATCH_TABLE], ids=[c[0] for c in MATCH_TABLE]
)
def test_matches_table(actual: str, body: str, tokens: tuple[str, ...], verdict: bool) -> None:
    assert reference_matches(actual, body, tokens) is verdict, "the table disagrees with the regex reference"
    assert matches(actual, body, tokens) is verdict


@pytest.mark.parametrize(
    ("actual", "body", "tokens", "verdict"), [c[1:] for c in MATCH_TABLE], ids=[c[0] for c in MATCH_TABLE]
)
def test_match_file_table(tmp_path: Path, actual: str, body: str, tokens: tuple[str, ...], verdict: bool) -> None:
    path = write_output(tmp_path, actual.encode("utf-8"))
    failed_piece = match_file(path, body, tokens)
    assert (failed_piece is None) is verdict
    if failed_piece is not None:
        assert 0 <= failed_piece < len(split_pieces(body, tokens))


def test_matches_default_tokens() -> None:
    assert matches("took 3 s", "took ... s")
    assert not matches("a...b", "a.b")


SPLIT_TABLE: list[tuple[str, tuple[str, ...], list[str]]] = [
    ("abc", DEFAULT, ["abc"]),
    ("a...b", DEFAULT, ["a", "b"]),
    ("...", DEFAULT, ["", ""]),
    ("....", DEFAULT, ["", "."]),
    ("a...b...c", DEFAULT, ["a", "b", "c"]),
    ("a...b", NO_WILDCARD, ["a...b"]),
    ("axxxb", ("xx", "xxx"), ["a", "b"]),
    ("axxxxb", ("xx", "xxx"), ["a", "xb"]),
    ("axxxxxb", ("xx", "xxx"), ["a", "", "b"]),
    ("a...bxxxc", ("...", "xxx"), ["a", "b", "c"]),
    ("", DEFAULT, [""]),
]


@pytest.mark.parametrize(("body", "tokens", "pieces"), SPLIT_TABLE)
def test_split_pieces(body: str, tokens: tuple[str, ...], pieces: list[str]) -> None:
    assert split_pieces(body, tokens) == pieces
    assert reference_parts(body, tokens)[::2] == pieces


def test_empty_output_file(tmp_path: Path) -> None:
    """An empty file cannot be memory-mapped; it must still be matched."""
    path = write_output(tmp_path, b"")
    assert match_file(path, "", DEFAULT) is None
    assert match_file(path, "...", DEFAULT) is None
    assert match_file(path, "abc", DEFAULT) == 0
    assert match_file(path, "...abc", DEFAULT) == 1


def test_invalid_utf8_is_replaced(tmp_path: Path) -> None:
    """Stdout is decoded as UTF-8 with invalid bytes replaced (spec section 4)."""
    path = write_output(tmp_path, b"ok \xff\xfe done\n")
    assert match_file(path, "ok ... done", DEFAULT) is None
    assert match_file(path, "ok \ufffd\ufffd done", DEFAULT) is None
    assert match_file(path, "ok \ufffd done", DEFAULT) is not None
    truncated = write_output(tmp_path, "中".encode()[:2] + "文".encode(), name="truncated.txt")
    assert match_file(truncated, "\ufffd文", DEFAULT) is None
    assert match_file(truncated, "...文", DEFAULT) is None


def test_body_ending_in_newline_matches_output_ending_in_it() -> None:
    """A body can end in a newline after load substitution (`abc\\n<PH>` with an empty value).

    Whether the trailing newlines are removed before or after substitution, `abc\\n`
    must match the output `abc\\n`: the regex reference says so for the unstripped body,
    and stripping gives `abc`, which matches too.
    """
    for actual, body in [("abc\n", "abc\n"), ("abc\n\n", "abc\n"), ("x\nabc\n", "...abc\n")]:
        assert reference_matches(actual, body, DEFAULT)
        assert reference_matches(actual, body.rstrip("\n"), DEFAULT)
        assert matches(actual, body), f"{body!r} does not match {actual!r}"


def test_load_substitution_leaving_a_trailing_newline(guide_runner: Callable[..., Any]) -> None:
    """End to end: a stored empty value at the end of a result body must not cause a mismatch."""
    run = guide_runner(
        """
        # Trailing placeholder

        ```shell #test-setup store="SUFFIX"
        true
        ```

        ```shell #test id="greet"
        echo abc
        ```

        ```shell #test-result id="greet" load="SUFFIX>>PH"
        abc
        <PH>
        ```
        """
    )
    assert run.block("greet")["status"] == "passed", run.stdout + run.stderr
    assert run.returncode == 0


def test_split_pieces_with_an_empty_token_terminates() -> None:
    """`fuzzy=''` is refused by the planner, but the public function must not loop forever."""
    probe = (
        "from ci.expect.match import split_pieces\ntry:\n    split_pieces('abc', ('',))\nexcept ValueError:\n    pass\n"
    )
    try:
        subprocess.run([sys.executable, "-c", probe], timeout=3, check=True, capture_output=True)
    except subprocess.TimeoutExpired:
        pytest.fail("split_pieces('abc', ('',)) did not return within 3 s (an empty token loops forever)")


# -- property test against the regex reference ----------------------------

ALPHABET = ["a", "b", ".", "\n", "x"]
TOKEN_SETS: list[tuple[str, ...]] = [("...",), ("x",), ("xx", "x"), ()]


@st.composite
def match_cases(draw: st.DrawFn) -> tuple[str, str, tuple[str, ...]]:
    """A body (trailing newlines removed, as the parser gives it), its tokens, and an output.

    Half the outputs are random; the others are built from the body (each wildcard
    filled with random text, trailing newlines added) and then perhaps mutated, so
    that both verdicts are common.
    """
    tokens = draw(st.sampled_from(TOKEN_SETS))
    words = st.sampled_from([*ALPHABET, "..."])
    body = "".join(draw(st.lists(words, max_size=10))).rstrip("\n")
    text = st.lists(st.sampled_from(ALPHABET), max_size=8).map("".join)
    if draw(st.booleans()):
        return draw(text), body, tokens
    parts = reference_parts(body, tokens)
    actual = "".join(draw(text) if index % 2 else part for index, part in enumerate(parts))
    actual += "\n" * draw(st.integers(0, 2))
    if actual and draw(st.booleans()):
        at = draw(st.integers(0, len(actual) - 1))
        edit = draw(st.sampled_from(["replace", "insert", "delete"]))
        char = draw(st.sampled_from(ALPHABET))
        if edit == "replace":
            actual = actual[:at] + char + actual[at + 1 :]
        elif edit == "insert":
            actual = actual[:at] + char + actual[at:]
        else:
            actual = actual[:at] + actual[at + 1 :]
    return actual, body, tokens


@settings(max_examples=600, deadline=None)
@given(match_cases())
def test_matches_agrees_with_regex(case: tuple[str, str, tuple[str, ...]]) -> None:
    actual, body, tokens = case
    assert matches(actual, body, tokens) == reference_matches(actual, body, tokens)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(match_cases())
def test_match_file_agrees_with_regex(case: tuple[str, str, tuple[str, ...]]) -> None:
    actual, body, tokens = case
    with tempfile.TemporaryDirectory() as directory:
        path = write_output(Path(directory), actual.encode("utf-8"))
        failed_piece = match_file(path, body, tokens)
    assert (failed_piece is None) == reference_matches(actual, body, tokens)
    if failed_piece is not None:
        assert 0 <= failed_piece < len(split_pieces(body, tokens))


# Output bytes including invalid UTF-8: a lone continuation byte, bytes never valid,
# a lead byte without its continuations, and a whole multi-byte character.
# A U+FFFD printed, a surrogate's encoding (three replaced bytes) and a 4-byte character cut short, too.
RAW_CHUNKS = [b"a", b"b", b".", b"\n", b"x", b"\xff", b"\xb8", "中".encode(), "中".encode()[:2], b"\xe4"]
RAW_CHUNKS += ["\ufffd".encode(), b"\xed\xa0\x80", "😀".encode()[:3]]
BODY_WORDS = ["a", "b", ".", "\n", "x", "中", "...", "\ufffd"]


@st.composite
def raw_cases(draw: st.DrawFn) -> tuple[bytes, str, tuple[str, ...]]:
    tokens = draw(st.sampled_from(TOKEN_SETS))
    body = "".join(draw(st.lists(st.sampled_from(BODY_WORDS), max_size=8))).rstrip("\n")
    if draw(st.booleans()):
        return b"".join(draw(st.lists(st.sampled_from(RAW_CHUNKS), max_size=10))), body, tokens
    parts = reference_parts(body, tokens)
    filler = st.lists(st.sampled_from(RAW_CHUNKS), max_size=4).map(b"".join)
    raw = b"".join(draw(filler) if index % 2 else part.encode("utf-8") for index, part in enumerate(parts))
    return raw + b"\n" * draw(st.integers(0, 2)), body, tokens


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(raw_cases())
def test_match_file_decodes_with_replacement(case: tuple[bytes, str, tuple[str, ...]]) -> None:
    raw, body, tokens = case
    with tempfile.TemporaryDirectory() as directory:
        path = write_output(Path(directory), raw)
        failed_piece = match_file(path, body, tokens)
    decoded = raw.decode("utf-8", errors="replace")
    assert (failed_piece is None) == reference_matches(decoded, body, tokens), f"decoded output {decoded!r}"


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(raw_cases(), st.integers(1, 12))
def test_a_file_read_in_small_windows_matches_as_decoded_in_memory(
    case: tuple[bytes, str, tuple[str, ...]], window_bytes: int
) -> None:
    """Windows far smaller than the output: pieces, invalid bytes and U+FFFD straddle their edges."""
    raw, body, tokens = case
    decoded = raw.decode("utf-8", errors="replace")
    with tempfile.TemporaryDirectory() as directory:
        path = write_output(Path(directory), raw)
        failed_piece = match_file(path, body, tokens, window_bytes=window_bytes)
        blame = blame_file(path, body, tokens, window_bytes=window_bytes)
    assert (failed_piece is None) == reference_matches(decoded, body, tokens), f"decoded output {decoded!r}"
    assert blame == blame_text(decoded, body, tokens), f"decoded output {decoded!r}"


@pytest.mark.parametrize(
    ("raw", "body", "verdict"),
    [
        (b"ok \xff done", "ok \ufffd done", True),  # one invalid byte
        ("ok \ufffd done".encode(), "ok \ufffd done", True),  # a U+FFFD printed
        (b"ok \xe4\xb8 done", "ok \ufffd done", True),  # a character cut short: one replacement
        (b"ok \xe4\xb8 done", "ok \ufffd\ufffd done", False),
        (b"ok \xed\xa0\x80 done", "ok \ufffd\ufffd\ufffd done", True),  # a surrogate: three
        (b"ok \xff\n", "...\ufffd", True),
        (b"\xff\xfe ok", "\ufffd...ok", True),
        (b"ok", "ok\ufffd", False),
    ],
)
def test_replacement_character_table(tmp_path: Path, raw: bytes, body: str, verdict: bool) -> None:
    path = write_output(tmp_path, raw)
    for window_bytes in (1, 2, 3, 1024):
        assert (match_file(path, body, DEFAULT, window_bytes=window_bytes) is None) == verdict, window_bytes


# -- the adversarial family -------------------------------------------------


def adversarial_body(repeats: int) -> str:
    """`...a...a...a...b` for 3 repeats: a lazy-regex matcher backtracks through every split of `a`s."""
    return "..." + "a..." * repeats + "b"


# Runs in a child so a runaway backtrack can be cut off; says "ready" once the pattern is built.
REGEX_PROBE = """
import re, sys, time
pattern, n = sys.argv[1], int(sys.argv[2])
compiled = re.compile(pattern + r"\\n*", re.DOTALL)
actual = "a" * n
print("ready", flush=True)
started = time.perf_counter()
found = compiled.fullmatch(actual) is not None
print(found, time.perf_counter() - started, flush=True)
"""


def time_regex_reference(body: str, n: int, timeout_s: float) -> tuple[float, bool | None]:
    """Seconds the regex reference takes on `a * n` (the timeout, a lower bound, when cut off); its verdict."""
    child = subprocess.Popen(
        [sys.executable, "-c", REGEX_PROBE, reference_pattern(body, DEFAULT), str(n)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "ready"
        started = time.perf_counter()
        try:
            # not communicate(): with a timeout it reads the raw pipe, skipping what readline() buffered
            child.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return max(timeout_s, time.perf_counter() - started), None
        found, seconds = child.stdout.read().split()
        return float(seconds), found == "True"
    finally:
        if child.poll() is None:
            child.kill()
        child.wait()


def time_ours(actual: str, body: str, rounds: int = 5) -> float:
    """The slowest of a few runs: a conservative figure for our side of the ratio."""
    slowest = 0.0
    for _ in range(rounds):
        started = time.perf_counter()
        assert not matches(actual, body)
        slowest = max(slowest, time.perf_counter() - started)
    return max(slowest, 1e-7)


@pytest.mark.parametrize("repeats", [1, 2, 3, 5])
def test_adversarial_family_verdicts_small(repeats: int) -> None:
    body = adversarial_body(repeats)
    for n in range(12):
        assert matches("a" * n, body) == reference_matches("a" * n, body, DEFAULT) is False
        assert matches("a" * n + "b", body) == reference_matches("a" * n + "b", body, DEFAULT) == (n >= repeats)


def test_adversarial_regex_is_slow_ours_is_not() -> None:
    """The regex reference at n=2000 against ours: a ratio with a huge margin, no absolute time.

    Starts at `...a...a...a...b`; if the regex is too quick on this machine to show
    the effect (< 0.5 s), adds wildcards until it is not. A regex cut off at the
    timeout counts as taking the timeout (a lower bound).
    """
    n = 2000
    timeout_s = 4.0
    repeats = 3
    while True:
        body = adversarial_body(repeats)
        regex_s, regex_verdict = time_regex_reference(body, n, timeout_s)
        if regex_s >= 0.5 or repeats >= 8:
            break
        repeats += 1
    assert regex_verdict in (None, False)
    ours_s = time_ours("a" * n, body)
    assert regex_s >= 0.5, f"the regex took only {regex_s:.3f}s even with {repeats} repeats"
    assert regex_s / ours_s >= 20, f"regex {regex_s:.3f}s, ours {ours_s:.6f}s"


@pytest.mark.parametrize("repeats", [3, 10, 100])
def test_adversarial_at_two_million(repeats: int) -> None:
    """Ours gives the right verdict on 2,000,000 characters; finishing is the point."""
    n = 2_000_000
    body = adversarial_body(repeats)
    assert not matches("a" * n, body)
    assert matches("a" * n + "b\n", body)
    assert not matches("a" * n + "b" + "a", body)


def test_adversarial_long_needles_at_two_million(tmp_path: Path) -> None:
    """Pieces that almost occur everywhere: each search runs to the end of the output."""
    n = 2_000_000
    body = "..." + ("a" * 40 + "b...") * 3 + "c"
    assert not matches("a" * n, body)
    path = write_output(tmp_path, b"a" * n)
    assert match_file(path, body, DEFAULT) == 1


# -- mismatch reports -------------------------------------------------------


def explain(tmp_path: Path, actual: str, body: str, tokens: tuple[str, ...] = DEFAULT) -> MatchReport:
    """The report the executor would build: the mismatch examined in the file (the same as in memory), then explained."""
    examined = examine_file(write_output(tmp_path, actual.encode("utf-8")), body, tokens)
    assert examined is not None, "expected a mismatch"
    assert examined == examine_text(actual, body, tokens)
    blame = blame_text(actual, body, tokens)
    assert blame is not None and blame.line == examined.blame.line
    return explain_mismatch(examined, body, tokens, guide_line=100 + blame.line)


def test_explain_prefix_mismatch_on_line_three(tmp_path: Path) -> None:
    body = "line one\nline two\nline three\nline four"
    actual = "line one\nline two\nline 3\nline four\n"
    report = explain(tmp_path, actual, body)
    assert report.first_unmatched_line == 3
    assert report.first_unmatched_text == "line three"
    assert report.guide_line == 103
    assert (report.expected_head, report.expected_tail, report.expected_lines) == (body, "", 4)


@pytest.mark.parametrize(
    ("body", "actual", "line", "text"),
    [
        ("header\nstatus: ok ...\n...\ndone", "header\nstatus: failed 3\nx\ndone", 2, "status: ok ..."),
        # the middle line `middle` is nowhere in the output: it is the first line not matched
        ("start\n...\nmiddle\n...\nend", "start\nfoo\nbar\nend\n", 3, "middle"),
        (
            "begin\nloaded ... shards, ... ok\nend",
            "begin\nloaded 4 shards, 1 failed\nend",
            2,
            "loaded ... shards, ... ok",
        ),
        # the last line `end` is not at the end of the output: it is the first line not matched
        ("start\n...\nend", "start\nfoo\nEND\n", 3, "end"),
        ("start\nresult: ... passed", "start\nresult: 3 failed\n", 2, "result: ... passed"),
    ],
    ids=[
        "prefix-mismatch-before-a-wildcard",
        "missing-middle-piece",
        "missing-middle-piece-inline",
        "wrong-suffix",
        "wrong-suffix-inline",
    ],
)
def test_explain_names_the_first_unmatched_line(tmp_path: Path, body: str, actual: str, line: int, text: str) -> None:
    report = explain(tmp_path, actual, body)
    assert (report.first_unmatched_line, report.first_unmatched_text) == (line, text)


def test_explain_diff_is_a_unified_hunk_expected_to_actual(tmp_path: Path) -> None:
    body = "line one\nline two\nline three\nline four"
    actual = "line one\nline two\nline 3\nline four\n"
    report = explain(tmp_path, actual, body)
    assert report.diff.splitlines() == [
        "@@ -1,4 +1,4 @@",
        " line one",
        " line two",
        "-line three",
        "+line 3",
        " line four",
    ]


@pytest.mark.parametrize(
    ("actual", "shown"),
    [
        ("hello\r\n", "hello\\r"),
        ("\x1b[1;31mhello\x1b[0m\n", "\\x1b[1;31mhello\\x1b[0m"),
        ("hel\x00lo\x07\n", "hel\\x00lo\\x07"),
    ],
)
def test_explain_shows_what_a_log_hides(tmp_path: Path, actual: str, shown: str) -> None:
    """Lines that differ only in bytes a log drops: the diff writes them out, and the log keeps what it writes."""
    report = explain(tmp_path, actual, "hello")
    assert report.diff.splitlines()[1:] == ["-hello", f"+{shown}"]
    assert clean_text(report.diff) == report.diff
    assert report.actual_line_hidden == actual.rstrip("\n")


def test_explain_names_no_hidden_difference_where_the_line_differs_visibly(tmp_path: Path) -> None:
    report = explain(tmp_path, "start\nhullo\r\nend\n", "start\nhello\nend")
    assert (report.first_unmatched_line, report.actual_line_hidden) == (2, None)
    assert "+hullo\\r" in report.diff.splitlines()


def test_explain_names_a_hidden_difference_after_a_wildcard(tmp_path: Path) -> None:
    """The last line set against the output's last line, not against the line after the wildcard's first."""
    report = explain(tmp_path, "start\nfoo\nbar\nhello\r\n", "start\n...\nhello")
    assert report.actual_line_hidden == "hello\r"


def test_explain_bounds_a_huge_output(tmp_path: Path) -> None:
    """Half a million lines a wildcard takes: folded into one line of the hunk."""
    body = "start\n...\nend"
    actual = "start\n" + "x\n" * 500_000 + "END"
    report = explain(tmp_path, actual, body)
    assert report.diff.splitlines() == [
        "@@ -1,3 +1,500002 @@",
        " start",
        " ... (500000 lines matched by ...)",
        "-end",
        "+END",
    ]


def test_explain_bounds_a_long_expected_body(tmp_path: Path) -> None:
    body = "\n".join(f"line {number}" for number in range(1, 101))
    report = explain(tmp_path, body.replace("line 50", "line 5O"), body)
    assert report.expected_lines == 100
    assert report.expected_head.splitlines() == [f"line {number}" for number in range(1, 11)]
    assert report.expected_tail.splitlines() == [f"line {number}" for number in range(91, 101)]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(match_cases())
def test_examine_agrees_with_the_verdict_and_the_blame(case: tuple[str, str, tuple[str, ...]]) -> None:
    """Whatever the case: a mismatch has a hunk, blamed on the line blame_text names, the same read from a file."""
    actual, body, tokens = case
    examined = examine_text(actual, body, tokens)
    assert (examined is None) == reference_matches(actual, body, tokens)
    if examined is None:
        return
    blame = blame_text(actual, body, tokens)
    assert blame is not None
    assert (examined.blame.line, examined.blame.divergence, examined.blame.more_lines) == (
        blame.line,
        blame.divergence,
        blame.more_lines,
    )
    assert examined.hunk
    with tempfile.TemporaryDirectory() as directory:
        path = write_output(Path(directory), actual.encode("utf-8"))
        assert examine_file(path, body, tokens, window_bytes=3) == examined


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(raw_cases())
def test_examine_reads_a_file_as_decoded_in_memory(case: tuple[bytes, str, tuple[str, ...]]) -> None:
    raw, body, tokens = case
    with tempfile.TemporaryDirectory() as directory:
        path = write_output(Path(directory), raw)
        examined = examine_file(path, body, tokens, window_bytes=2)
    assert examined == examine_text(raw.decode("utf-8", errors="replace"), body, tokens)


# -- a large output file ------------------------------------------------------

LARGE_BYTES = 50 * 1024 * 1024


def large_line(index: int) -> str:
    """Line `index` of the large output, without its newline (63 characters)."""
    return f"step {index:09d}: loss {index % 997:04d} lr 0.0001 tokens/s {index % 4099:05d}".ljust(63, "-")


@pytest.fixture(scope="module")
def large_output(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, int]:
    """A 50 MB log, written in chunks; returns its path and line count."""
    path = tmp_path_factory.mktemp("large") / "stdout.txt"
    lines = LARGE_BYTES // 64
    chunk_lines = 16_384
    with open(path, "wb") as handle:
        for first in range(0, lines, chunk_lines):
            last = min(first + chunk_lines, lines)
            handle.write("".join(large_line(index) + "\n" for index in range(first, last)).encode("ascii"))
    return str(path), lines


def test_large_output_fixture_is_large(large_output: tuple[str, int]) -> None:
    path, _ = large_output
    assert os.path.getsize(path) >= LARGE_BYTES


def test_match_file_large_output_in_bounded_memory(large_output: tuple[str, int]) -> None:
    """match_file reads the file in bounded chunks: Python's own allocations stay far below its size."""
    path, lines = large_output
    body = f"{large_line(0)}...\n...{large_line(lines // 2)}...\n...{large_line(lines - 1)}..."
    missing = f"{large_line(0)}...\n...step 999999999: never...\n...{large_line(lines - 1)}..."
    tracemalloc.start()
    try:
        assert match_file(path, body, DEFAULT) is None
        assert match_file(path, missing, DEFAULT) == 2
        assert match_file(path, "...tokens/s 99999...", DEFAULT) == 1
        _, peak_bytes = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak_bytes < LARGE_BYTES // 4, f"peak {peak_bytes} bytes while matching a {LARGE_BYTES}-byte file"


def test_replacement_character_in_the_body_keeps_memory_bounded(large_output: tuple[str, int]) -> None:
    """A U+FFFD in the body (a replaced invalid byte) is matched a window at a time too, never decoding the output whole."""
    path, lines = large_output
    tracemalloc.start()
    try:
        assert match_file(path, f"{large_line(0)}...\ufffd...", DEFAULT) == 1
        blame = blame_file(path, f"{large_line(0)}\n...\n{large_line(lines - 1)}\ufffd", DEFAULT)
        _, peak_bytes = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert blame is not None and blame.line == 3
    assert peak_bytes < LARGE_BYTES // 4, f"peak {peak_bytes} bytes while matching a {LARGE_BYTES}-byte file"


@pytest.mark.parametrize("newlines", [0, 3])
def test_a_mismatch_in_a_large_file_is_blamed_on_its_line(large_output: tuple[str, int], newlines: int) -> None:
    """The failing line is looked for in the whole output, not in a bounded view of it."""
    path, lines = large_output
    middle = "\n".join(large_line(index) for index in range(lines - 2000, lines - 1))
    body = f"{large_line(0)}\n...\n{middle}\nthe last line" + "\n" * newlines
    tracemalloc.start()
    try:
        blame = blame_file(path, body, DEFAULT)
        _, peak_bytes = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert blame is not None and blame.line == body.count("\n", 0, body.index("the last line")) + 1
    assert blame.actual_line == large_line(lines - 1)
    assert peak_bytes < LARGE_BYTES // 4


def test_a_mismatch_view_of_a_large_file_is_short_and_read_in_bounded_memory(large_output: tuple[str, int]) -> None:
    """The hunk around the last line of a 50 MB output: the wildcard's lines folded, the file never read whole."""
    path, lines = large_output
    body = f"{large_line(0)}\n...\n{large_line(lines - 3)}\n{large_line(lines - 2)}\nthe last line"
    tracemalloc.start()
    try:
        examined = examine_file(path, body, DEFAULT)
        _, peak_bytes = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert examined is not None
    assert examined.hunk == (
        f"@@ -2,4 +2,{lines - 1} @@",
        f" ... ({lines - 4} lines matched by ...)",
        " " + large_line(lines - 3),
        " " + large_line(lines - 2),
        "-the last line",
        "+" + large_line(lines - 1),
    )
    assert peak_bytes < LARGE_BYTES // 4


# -- chunk boundaries: match_file reads the file piecewise, matches() sees it whole ---------

KIB = 1024
# Offsets where a reader that starts with small chunks and doubles them up to a few MiB
# might split the output; a sweep of every position around each catches off-by-ones
# whatever the actual chunk sizes are.
BOUNDARIES = [KIB * k for k in (4, 8, 16, 32, 64, 128, 192, 256, 448, 512, 960, 1024, 1984, 2048, 4032, 4096, 4160)]


@pytest.fixture(scope="module")
def filler_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """4.5 MiB of `z`, overwritten in place by the tests below."""
    path = tmp_path_factory.mktemp("chunks") / "stdout.txt"
    path.write_bytes(b"z" * (4 * 1024 * KIB + 512 * KIB))
    return path


def check_both(path: Path, body: str, whole: str | None = None) -> int | None:
    """match_file's answer, after checking it agrees with matches() on the whole text."""
    failed_piece = match_file(str(path), body, DEFAULT)
    if whole is None:
        whole = path.read_bytes().decode("utf-8", errors="replace")
    assert (failed_piece is None) == matches(whole, body), f"match_file and matches() disagree on {body!r}"
    return failed_piece


@pytest.mark.parametrize("boundary", BOUNDARIES)
def test_match_file_piece_straddling_a_chunk_boundary(filler_file: Path, boundary: int) -> None:
    needle = b"NEEDLE-\xe4\xb8\xad-END"  # a multi-byte character inside, so a split could cut it
    size = filler_file.stat().st_size
    with open(filler_file, "r+b") as handle:
        for at in range(boundary - len(needle) - 1, boundary + 2):
            handle.seek(at)
            handle.write(needle)
            handle.flush()
            whole = "z" * at + "NEEDLE-中-END" + "z" * (size - at - len(needle))
            assert check_both(filler_file, "...NEEDLE-中-END...", whole) is None, f"needle at {at}"
            assert check_both(filler_file, "z...NEEDLE-中-END...z", whole) is None, f"needle at {at}"
            assert check_both(filler_file, "...NEEDLE-中-END...NEEDLE...", whole) == 2, f"needle at {at}"
            handle.seek(at)
            handle.write(b"z" * len(needle))
        handle.flush()
    assert check_both(filler_file, "...NEEDLE...") == 1


def test_match_file_pieces_in_order_across_chunks(filler_file: Path) -> None:
    """Several pieces, each just past the previous one's chunk, found in order."""
    marks = [(boundary - 3, f"<{index}>".encode()) for index, boundary in enumerate(BOUNDARIES)]
    with open(filler_file, "r+b") as handle:
        for at, mark in marks:
            handle.seek(at)
            handle.write(mark)
        handle.flush()
        try:
            every = "".join(f"...{mark.decode()}" for _, mark in marks) + "..."
            assert check_both(filler_file, every) is None
            swapped = "...<1>...<0>..."
            assert check_both(filler_file, swapped) == 2
        finally:
            for at, mark in marks:
                handle.seek(at)
                handle.write(b"z" * len(mark))


def test_match_file_piece_longer_than_a_chunk(tmp_path: Path) -> None:
    long_piece = "".join(f"{index:07d}\n" for index in range(40_000))  # 320 KB
    data = ("head\n" + "x" * 70_000 + "\n" + long_piece + "tail").encode()
    path = tmp_path / "stdout.txt"
    path.write_bytes(data)
    assert check_both(path, "head\n...\n" + long_piece + "...tail") is None
    assert check_both(path, "head\n...\n" + long_piece + "0000000\n...tail") == 1
    assert check_both(path, "head\n...\n" + long_piece[:-1] + "...\n" + long_piece + "...tail") == 2


@pytest.mark.parametrize(
    "newlines", [0, 1, 100, 4 * 1024 * KIB - 1, 4 * 1024 * KIB, 4 * 1024 * KIB + 1, 9 * 1024 * KIB]
)
def test_match_file_trailing_newlines_across_chunks(tmp_path: Path, newlines: int) -> None:
    """Expected verdicts are written out: matches() on megabytes of newlines is slow (see the report)."""
    path = str(tmp_path / "stdout.txt")
    Path(path).write_bytes(b"start\n" + b"y" * (5 * 1024 * KIB) + b"\nthe end" + b"\n" * newlines)
    assert match_file(path, "start\n...\nthe end", DEFAULT) is None
    assert match_file(path, "start\n...the end", DEFAULT) is None
    assert match_file(path, "start\n...\nthe end\n...", DEFAULT) == (None if newlines else 1)
    assert match_file(path, "start\n...\nthe", DEFAULT) == 1
    only_newlines = str(tmp_path / "newlines.txt")
    Path(only_newlines).write_bytes(b"\n" * newlines)
    assert match_file(only_newlines, "", DEFAULT) is None
    assert match_file(only_newlines, "...", DEFAULT) is None
    assert match_file(only_newlines, "x", DEFAULT) == 0
