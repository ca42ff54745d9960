"""The mismatch view as tables: which expected line is blamed, and the hunk shown around it (wildcards read as the
matcher reads them). The pure functions: `blame_text` and `examine_text` on an output held in memory."""

from __future__ import annotations

import pytest

from ci.base.text import Masker
from ci.expect.examine import examine_file, examine_text
from ci.expect.match import blame_text
from ci.record.outcome import Divergence

DEFAULT = ("...",)
ALPHABET = [chr(code) for code in range(ord("a"), ord("z") + 1)]
DIFFERS, MISSING, EXTRA = Divergence.DIFFERS, Divergence.MISSING, Divergence.EXTRA


def lines(*each: str) -> str:
    return "\n".join(each)


# (case, expected body, output, tokens, line blamed, divergence, the output's line there or past the last, more lines)
BLAME_TABLE: list[tuple[str, str, str, tuple[str, ...], int, Divergence, str, int]] = [
    ("one line differs", lines("a", "b", "c"), "a\nB\nc\n", DEFAULT, 2, DIFFERS, "B", 0),
    ("the output is one line short", lines("a", "b", "c"), "a\nb", DEFAULT, 3, MISSING, "", 0),
    ("short, with its newline", lines("a", "b", "c"), "a\nb\n", DEFAULT, 3, MISSING, "", 0),
    ("short by two, trailing newlines", lines("a", "b", "c", "d"), "a\nb\n\n\n", DEFAULT, 3, MISSING, "", 0),
    ("no output at all", "a", "", DEFAULT, 1, MISSING, "", 0),
    ("the output is one line long", lines("a", "b"), "a\nb\nc\n", DEFAULT, 2, EXTRA, "c", 0),
    ("the output goes on for lines", lines("a", "b"), "a\nb\nc\nd\ne\n", DEFAULT, 2, EXTRA, "c", 2),
    ("the last line goes on", lines("a", "b"), "a\nbc\n", DEFAULT, 2, DIFFERS, "bc", 0),
    ("a line missing inside", lines("a", "b", "c", "d"), "a\nb\nd\n", DEFAULT, 3, DIFFERS, "d", 0),
    ("short after a wildcard", lines("a", "...", "m", "n"), "a\nb\nm", DEFAULT, 4, MISSING, "", 0),
    ("short inside a wildcard's line", lines("a ...", "m", "..."), "a b c", DEFAULT, 2, MISSING, "", 0),
    ("short after an inline wildcard", lines("took ... s", "next"), "took 3 s", DEFAULT, 2, MISSING, "", 0),
    ("long after a wildcard", lines("a", "...", "z"), "a\nb\nz\nq\n", DEFAULT, 3, EXTRA, "q", 0),
    (
        "a middle line nowhere",
        lines("start", "...", "middle", "...", "end"),
        "start\nx\nend\n",
        DEFAULT,
        3,
        DIFFERS,
        "end",
        0,
    ),
    ("with fuzzy tokens", lines("pid NNN", "state up"), "pid 42\nstate down\n", ("NNN",), 2, DIFFERS, "state down", 0),
]


@pytest.mark.parametrize(
    ("body", "actual", "tokens", "line", "divergence", "actual_line", "more_lines"),
    [case[1:] for case in BLAME_TABLE],
    ids=[case[0] for case in BLAME_TABLE],
)
def test_blame_table(
    body: str,
    actual: str,
    tokens: tuple[str, ...],
    line: int,
    divergence: Divergence,
    actual_line: str,
    more_lines: int,
) -> None:
    blame = blame_text(actual, body, tokens)
    assert blame is not None
    assert (blame.line, blame.divergence, blame.actual_line, blame.more_lines) == (
        line,
        divergence,
        actual_line,
        more_lines,
    )


def numbered(count: int, wrong: int | None = None) -> list[str]:
    return [f"line {n}" if n != wrong else f"line {n}".replace("0", "O") for n in range(1, count + 1)]


# (case, expected body, output, tokens, the hunk)
VIEW_TABLE: list[tuple[str, str, str, tuple[str, ...], list[str]]] = [
    (
        "a whole-line wildcard is folded, not 24 added lines",
        lines("a", "...", "z-wrong"),
        "\n".join(ALPHABET) + "\n",
        DEFAULT,
        ["@@ -1,3 +1,26 @@", " a", " ... (24 lines matched by ...)", "-z-wrong", "+z"],
    ),
    (
        "an inline wildcard on a line that matches is no change",
        lines("start", "took ... s", "end"),
        "start\ntook 3.2 s\nend2\n",
        DEFAULT,
        ["@@ -1,3 +1,3 @@", " start", " took 3.2 s", "-end", "+end2"],
    ),
    (
        "a wildcard at the start",
        lines("...", "y", "z-wrong"),
        "a\nb\ny\nz\n",
        DEFAULT,
        ["@@ -1,3 +1,4 @@", " ... (2 lines matched by ...)", " y", "-z-wrong", "+z"],
    ),
    (
        "a wildcard at the end",
        lines("a", "b-wrong", "..."),
        "a\nb\nc\nd\n",
        DEFAULT,
        ["@@ -1,2 +1,2 @@", " a", "-b-wrong", "+b"],
    ),
    (
        "consecutive wildcard lines",
        lines("a", "...", "...", "z-wrong"),
        "a\nb\nc\nd\nz\n",
        DEFAULT,
        ["@@ -1,4 +1,5 @@", " a", " ... (1 line matched by ...)", " ... (2 lines matched by ...)", "-z-wrong", "+z"],
    ),
    (
        "a line that ends with a wildcard takes the lines after it",
        lines("x", "step ...", "done", "y"),
        "x\nstep 1\nstep 2\ndone\nz\n",
        DEFAULT,
        ["@@ -1,4 +1,5 @@", " x", " step ... (2 lines matched by ...)", " done", "-y", "+z"],
    ),
    (
        "missing lines: nothing left to match them",
        lines("a", "b", "c", "d"),
        "a\nb\n",
        DEFAULT,
        ["@@ -1,4 +1,2 @@", " a", " b", "-c", "-d"],
    ),
    (
        "a line missing inside",
        lines("a", "b", "c", "d", "e"),
        "a\nb\nd\ne\n",
        DEFAULT,
        ["@@ -1,5 +1,4 @@", " a", " b", "-c", " d", " e"],
    ),
    (
        "extra lines",
        lines("a", "b"),
        "a\nb\nc\nd\n",
        DEFAULT,
        ["@@ -1,2 +1,4 @@", " a", " b", "+c", "+d"],
    ),
    (
        "extra lines after a wildcard",
        lines("a", "...", "z"),
        "a\nb\nz\nq\n",
        DEFAULT,
        ["@@ -1,3 +1,4 @@", " a", " ... (1 line matched by ...)", " z", "+q"],
    ),
    (
        "a middle line nowhere",
        lines("start", "...", "middle", "...", "end"),
        "start\nfoo\nbar\nend\n",
        DEFAULT,
        [
            "@@ -1,5 +1,4 @@",
            " start",
            " ... (1 line matched by ...)",
            "-middle",
            " ... (1 line matched by ...)",
            " end",
        ],
    ),
    (
        "a line between inline wildcards",
        lines("alpha N", "beta 3", "gamma N"),
        "alpha 1\nbeta 2\ngamma 3\n",
        ("N",),
        ["@@ -1,3 +1,3 @@", " alpha 1", "-beta 3", "+beta 2", " gamma 3"],
    ),
    (
        "a middle line nowhere in a long output: the window's fold says it may take more",
        lines("line 0", "...", "never", "...", "line 999"),
        "".join(f"line {n}\n" for n in range(1000)),
        DEFAULT,
        [
            "@@ -1,4 +1,82 @@",
            " line 0",
            " ... (1 line matched by ...)",
            "-never",
            " ... (80 or more lines matched by ...)",
        ],
    ),
    (
        "fuzzy tokens",
        lines("pid NNN", "NNN", "state up"),
        "pid 42\nx\ny\nstate down\n",
        ("NNN",),
        ["@@ -1,3 +1,4 @@", " pid 42", " NNN (2 lines matched by NNN)", "-state up", "+state down"],
    ),
    (
        "what a log hides is written out",
        lines("a", "hello"),
        "a\nhello\r\n",
        DEFAULT,
        ["@@ -1,2 +1,2 @@", " a", "-hello", "+hello\\r"],
    ),
    (
        "spaces ending a line are written out",
        lines("a", "hello"),
        "a\nhello  \n",
        DEFAULT,
        ["@@ -1,2 +1,2 @@", " a", "-hello", "+hello\\x20\\x20"],
    ),
    ("a tab is written out", "a\tb", "a    b\n", DEFAULT, ["@@ -1,1 +1,1 @@", "-a\\tb", "+a    b"]),
    ("a no-break space is named", "1 000", "1\u00a0000\n", DEFAULT, ["@@ -1,1 +1,1 @@", "-1 000", "+1<U+00A0>000"]),
    (
        "one wrong character in 300 lines: three lines of context on each side",
        lines(*numbered(300, wrong=150)),
        "\n".join(numbered(300)) + "\n",
        DEFAULT,
        [
            "@@ -147,7 +147,7 @@",
            " line 147",
            " line 148",
            " line 149",
            "-line 15O",
            "+line 150",
            " line 151",
            " line 152",
            " line 153",
        ],
    ),
    (
        "a long run of extra lines is cut",
        "a",
        "a\n" + "".join(f"extra {n}\n" for n in range(1, 101)),
        DEFAULT,
        [
            "@@ -1,1 +1,101 @@",
            " a",
            *[f"+extra {n}" for n in range(1, 20)],
            "+[... 81 more output lines ...]",
        ],
    ),
    (
        "a later difference is mentioned",
        lines(*numbered(30, wrong=10)[:19], "line 2O", *numbered(30)[20:]),
        "\n".join(numbered(30)) + "\n",
        DEFAULT,
        [
            "@@ -7,7 +7,7 @@",
            " line 7",
            " line 8",
            " line 9",
            "-line 1O",
            "+line 10",
            " line 11",
            " line 12",
            " line 13",
            "[... and more differences further on: see the expected and actual output below ...]",
        ],
    ),
]


@pytest.mark.parametrize(
    ("body", "actual", "tokens", "hunk"), [case[1:] for case in VIEW_TABLE], ids=[case[0] for case in VIEW_TABLE]
)
def test_view_table(body: str, actual: str, tokens: tuple[str, ...], hunk: list[str]) -> None:
    examined = examine_text(actual, body, tokens)
    assert examined is not None
    assert list(examined.hunk) == hunk


def test_the_line_a_hunk_sets_against_the_blamed_one_is_the_one_the_message_quotes() -> None:
    """After a wildcard, the last expected line is set against the output's last line, not the wildcard's first."""
    examined = examine_text("\n".join(ALPHABET), lines("a", "...", "z-wrong"))
    assert examined is not None and examined.blame.actual_line == "z"


def test_a_secret_in_the_hunk_is_masked() -> None:
    examined = examine_text("token: s3cr3t-value\n", "token: ***", masker=Masker.of(["s3cr3t-value"]))
    assert examined is not None
    assert examined.hunk[-1] == "+token: ***"


def test_a_long_line_is_cut() -> None:
    examined = examine_text("x" * 5000 + "\n", "y")
    assert examined is not None
    assert examined.hunk[-1] == "+" + "x" * 400 + " [... 4600 more characters]"


def test_a_line_longer_than_a_read_is_one_line_its_start_shown_and_the_rest_counted() -> None:
    examined = examine_text("a\n" + "y" * 100_000 + "\nb\n", lines("a", "z", "b"))
    assert examined is not None
    assert list(examined.hunk) == [
        "@@ -1,3 +1,3 @@",
        " a",
        "-z",
        "+" + "y" * 400 + " [... 99600 more characters]",
        " b",
    ]
    examined = examine_text("y" * 1_000_000 + "x\n", "x")
    assert examined is not None
    assert list(examined.hunk) == ["@@ -1,1 +1,1 @@", "-x", "+" + "y" * 400 + " [... 999601 more characters]"]


def test_a_line_longer_than_a_read_in_a_file_says_its_size(tmp_path) -> None:  # type: ignore[no-untyped-def]
    output = tmp_path / "stdout.txt"
    output.write_text("a\n" + "y" * 200_000 + "\nb\n")
    examined = examine_file(str(output), lines("a", "z", "b"), DEFAULT)
    assert examined is not None
    assert examined.hunk[-2:] == ("+" + "y" * 400 + " [... the whole line is 195.3 KiB]", " b")


def test_the_kept_start_of_a_long_line_never_ends_in_part_of_a_secret() -> None:
    secret = "hf_" + "q" * 37
    examined = examine_text((secret * 3000)[:100_007] + "\n", "x", masker=Masker.of([secret]))
    assert examined is not None
    shown = examined.hunk[-1]
    assert shown.startswith("+***") and "hf_" not in shown and "q" not in shown, shown


def test_a_long_last_line_after_many_is_shown_from_its_start_never_from_inside_a_secret() -> None:
    secret = "hf_" + "q" * 37
    output = "a\n" * 300 + (secret * 3000)[:100_007] + "\n"
    examined = examine_text(output, lines("a", "...", "z"), masker=Masker.of([secret]))
    assert examined is not None
    assert examined.hunk[-1].startswith("+***") and "q" not in examined.hunk[-1], examined.hunk[-1][:80]
    examined = examine_text("a\n" * 300 + "b" * 100_000 + "c\n", lines("a", "...", "z"))
    assert examined is not None
    assert examined.hunk[-2:] == ("-z", "+" + "b" * 400 + " [... 99601 more characters]")
