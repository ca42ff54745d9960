"""`--update` on a Python-console guide: the output lines of the statements whose output changed, rewritten in place."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from ci.maintain.console_update import rewrite_console
from ci.maintain.realign import CannotRewrite

Harness = Callable[..., subprocess.CompletedProcess[str]]
FENCE = "```"


def _guide(session: str) -> str:
    """A guide around SESSION (its `>>> ` lines from line 6), with prose and another fence the update must keep."""
    return f"# T\n\nProse, trailing blanks kept:  \n\n{FENCE}pycon\n{session}{FENCE}\n\n{FENCE}text\n41\n{FENCE}\n"


def test_only_the_changed_statements_outputs_are_rewritten_keeping_wildcards_and_every_other_byte() -> None:
    session = ">>> print(1)\n1\n>>> import os\n>>> print('v 2.0 at 0x2')\nv 1.0 at ...\n>>> print(5)\n4\n"
    rewrite = rewrite_console(_guide(session), "g.md", "1\nv 2.0 at 0x2\n5\n")
    new_session = session.replace("v 1.0 at ...", "v 2.0 at ...").replace("\n4\n", "\n5\n")
    assert rewrite.text == _guide(new_session)  # `import os` printed nothing, and still has no output line
    assert rewrite.statements == (9, 11)
    # more lines than before, where no other statement could have printed them
    rewrite = rewrite_console(_guide(">>> print(1); print(7)\n1\n"), "g.md", "1\n7\n")
    assert rewrite.text == _guide(">>> print(1); print(7)\n1\n7\n") and rewrite.statements == (6,)
    unchanged = _guide(">>> print(1)\n1\n")
    assert rewrite_console(unchanged, "g.md", "1\n").text == unchanged


@pytest.mark.parametrize(
    ("session", "output", "refusal"),
    [
        # which statement printed `3`? either reading changes one statement: no guess is written
        (">>> print(1)\n1\n>>> print(2)\n2\n", "1\n3\n2\n", r"g\.md:6: .*unambiguously.* the one at line 8 printed"),
        (">>> import os\n>>> print(2)\n2\n", "noise\n3\n", r"g\.md:7: .*unambiguously: which of its lines"),
        # print(1) grew by a line, or print(41) now prints two: changing one or two statements, both read well
        (">>> print(1); print(2)\n1\n>>> print(42)\n41\n", "1\n2\n42\n", r"g\.md:6: .*unambiguously"),
        # print(2) now prints nothing: no output line would mean any output
        (">>> print(1)\n1\n>>> print(2)\n2\n", "1\n", r"g\.md:6: the output cannot be attributed .*printed nothing"),
        (">>> print(1)\n1\n", "1\n\n2\n", r"g\.md:6: the statement now prints a blank line"),
        (
            ">>> print(1)\n1\n",
            ">>> 2\n",
            r"g\.md:6: the statement now prints a line the session would read as a prompt",
        ),
    ],
)
def test_an_output_not_attributed_or_written_unambiguously_is_refused_naming_the_line_and_the_fix(
    session: str, output: str, refusal: str
) -> None:
    with pytest.raises(CannotRewrite, match=f"{refusal}.*write the output by hand"):
        rewrite_console(_guide(session), "g.md", output)


def test_update_rewrites_a_console_guide_from_a_run_and_the_guide_then_passes(
    tmp_path: Path, run_harness: Harness
) -> None:
    session = ">>> print(6 * 7)\n41\n>>> x = 2\n>>> print(f'x is {x} at', hex(id(x)))\nx is 1 at ...\n"
    guide = tmp_path / "guide.md"
    guide.write_text(_guide(session), encoding="utf-8")
    plain = run_harness("guide.md", "--dialect", "pycon", "--output-dir", "out")
    assert plain.returncode == 1 and "MISMATCH #1 at guide.md:7:" in plain.stdout, plain.stdout

    done = run_harness("guide.md", "--dialect", "pycon", "--update", "--from-run", "out")

    assert done.returncode == 0, done.stdout + done.stderr
    assert "guide.md: updated the output of 2 statements (lines 6, 9)" in done.stderr
    assert "-41\n+42\n" in done.stdout and "+x is 2 at ...\n" in done.stdout
    new_session = session.replace("41", "42").replace("x is 1", "x is 2")
    assert guide.read_text(encoding="utf-8") == _guide(new_session)  # the wildcard kept, `x = 2` given no output
    again = run_harness("guide.md", "--dialect", "pycon", "--output-dir", "out2")
    assert again.returncode == 0, again.stdout + again.stderr


def test_update_after_a_run_refuses_what_it_cannot_attribute_and_leaves_the_guide(
    tmp_path: Path, run_harness: Harness
) -> None:
    guide = tmp_path / "guide.md"
    text = _guide(">>> print(1)\n1\n>>> print(2); print(3)\n3\n")
    guide.write_text(text, encoding="utf-8")

    done = run_harness("guide.md", "--dialect", "pycon", "--update", "--output-dir", "out")

    assert done.returncode == 1, done.stdout + done.stderr
    refusal = re.search(r"warning: guide\.md:6: the output cannot be attributed .* by hand; left alone", done.stderr)
    assert refusal is not None, done.stderr
    assert guide.read_text(encoding="utf-8") == text


def test_update_keeps_a_crlf_guide_crlf_and_rewrites_only_the_statement_that_changed(
    tmp_path: Path, run_harness: Harness
) -> None:
    guide = tmp_path / "guide.md"
    session = ">>> print(1)\n1\n>>> print(2)\n3\n>>> print(4)\n4\n"
    guide.write_bytes(_guide(session).replace("\n", "\r\n").encode("utf-8"))

    done = run_harness("guide.md", "--dialect", "pycon", "--update", "--output-dir", "out")

    assert done.returncode == 0, done.stdout + done.stderr
    assert "guide.md: updated the output of 1 statement (line 8)" in done.stderr
    updated = _guide(session.replace("\n3\n", "\n2\n")).replace("\n", "\r\n").encode("utf-8")
    assert guide.read_bytes() == updated
    again = run_harness("guide.md", "--dialect", "pycon", "--output-dir", "again")
    assert again.returncode == 0, again.stdout + again.stderr
