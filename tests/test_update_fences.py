"""`ci.run GUIDE --update` on a plain-fence guide: a ```text fence whose search failed becomes an excerpt found again.

The expected text of a plain fence is searched for anywhere in the block's
output (ci.expect.search): the rewrite keeps it an excerpt (updated_excerpt),
and whatever it writes, the search finds it in the output it was written from.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ci.expect.search import search_matches
from ci.guide.dialects import plan_guide
from ci.maintain.excerpt import updated_excerpt
from ci.maintain.realign import CannotRewrite

Harness = Callable[..., subprocess.CompletedProcess[str]]
FENCE = "```"
TRAILING = "   "  # kept out of the source line, where linters would strip it
NOISE = "".join(f"noise line {i}\n" for i in range(30))


def _found(output: str, body: str, values: dict[str, str]) -> bool:
    for placeholder, value in values.items():
        body = body.replace(f"<{placeholder}>", value)
    return search_matches(output, body)


@pytest.mark.parametrize(
    ("body", "output", "values", "expected"),
    [
        pytest.param("b...d", "a\nb\nc\nd\n", {}, "b...d", id="still-found-untouched"),
        pytest.param("Version: 1.0", NOISE + "Version: 2.0\nmore\n", {}, "Version: 2.0", id="the-line-like-it"),
        pytest.param(
            "tool version 1.2.x\nstate: xxx",
            "intro\ntool version 2.0.1\nstatus: busy, 3 workers\nbye\n",
            {},
            "tool version 1.2.x\nstatus: xxx",
            id="placeholders-kept",
        ),
        pytest.param(
            "load_tensors: ...CANN0 model buffer size = ...",
            "0.00.734 I load_tensors:        CANN1 model buffer size =     0.00 MiB\n",
            {},
            "load_tensors: ...CANN1 model buffer size = ...",
            id="part-of-a-line-stays-a-part",
        ),
        # a changed line is written whole, never cut to its old length (`status: fa`, which the search finds too)
        pytest.param("status: ok", NOISE + "status: failed\nmore\n", {}, "status: failed", id="changed-last-line"),
        pytest.param("ok: status", NOISE + "failed: status\n", {}, "failed: status", id="changed-first-line"),
        pytest.param("a\nstatus: ok", "a\nstatus: broken\n", {}, "a\nstatus: broken", id="no-word-cut"),
        pytest.param("a\nc", "x\na\nb\nc\ny\n", {}, "a\nb\nc", id="line-added-inside"),
        pytest.param("a\nz", "a\r\nb\r\n", {}, "a\nb", id="crlf-output"),
        pytest.param(
            "ref <UPSTREAM_REF> old",
            "ref abc123 new\n",
            {"UPSTREAM_REF": "abc123"},
            "ref <UPSTREAM_REF> new",
            id="load",
        ),
        pytest.param(
            # printed literally: `...` and `xxx` find themselves, a version written `1.2.x` would read as digits
            "loading... xxx 9.9.x fail",
            "tool version 2.0.1\nloading... xxx 1.2.x done\n",
            {},
            "loading... xxx 1.2... done",
            id="literal-placeholders-in-the-output",
        ),
        pytest.param(
            "nothing like it", "\n\ncompletely\n\ndifferent\n\n", {}, "completely\n\ndifferent", id="whole-output"
        ),
        pytest.param("gone", "```\n  ```text\n", {}, "...```\n...```text", id="lines-that-would-close-the-fence"),
    ],
)
def test_updated_excerpt(body: str, output: str, values: dict[str, str], expected: str) -> None:
    assert not _found(output, body, values) or body == expected
    new_body = updated_excerpt(body, output, values)
    assert new_body == expected
    assert _found(output, new_body, values)


def test_an_output_of_blanks_gives_no_excerpt_and_a_long_one_is_not_expected_whole() -> None:
    assert updated_excerpt("ready", " \n\n") is None
    with pytest.raises(CannotRewrite, match=r"whose 101 lines are too many to expect whole \(at most 100 lines"):
        updated_excerpt("ready", NOISE * 3 + "".join(f"{i}\n" for i in range(11)))


_OUTPUT_LINES = ["a", "b c", "v 1.2.3", "v 1.2.x", "1.2.x", "x...y", "xxx", "pid 7, ok", "```", "  ```x", "", " "]
_BODY_LINES = ["a", "b c", "v 1.2.x", "xxx", "...", "x ... y", "pid xxx, ok", "", "gone"]


@settings(max_examples=120, deadline=None)
@given(body=st.lists(st.sampled_from(_BODY_LINES), max_size=5), output=st.lists(st.sampled_from(_OUTPUT_LINES)))
def test_an_excerpt_is_always_found_where_it_was_written_from(body: list[str], output: list[str]) -> None:
    text, expected = "\n".join(output) + "\n", "\n".join(body).strip("\n") or "gone"
    new_body = updated_excerpt(expected, text)
    if search_matches(text, expected):
        assert new_body == expected  # still found: left as written
    elif not text.strip():
        assert new_body is None  # nothing to expect
    else:
        assert new_body is not None
        assert search_matches(text, new_body)
        # a ```text fence reads it back as written: no line of it closes the fence, no blank line ends it
        (step,) = plan_guide(f"```shell\ntrue\n```\n```text\n{new_body}\n```\n", "g.md", dialect="fences").steps
        assert step.expected is not None and step.expected.body == new_body


GUIDE = f"""\
# Plain fences

Prose kept byte for byte:{TRAILING}

{FENCE}shell
echo "tool version 2.0.1"
echo "status: busy, 3 workers" >&2
echo "loading... xxx 1.2.x done"
{FENCE}

{FENCE}text
tool version 1.2.x
state: xxx, ... workers
loading... xxx 9.9.x fail

{FENCE}

{FENCE}shell
echo "passing 1.2.3"
{FENCE}

{FENCE}text
passing 1.2.x
{FENCE}

{FENCE}shell
echo "no text fence"
{FENCE}
"""
UPDATED = GUIDE.replace(
    "state: xxx, ... workers\nloading... xxx 9.9.x", "status: xxx, ... workers\nloading... xxx 1.2..."
)
UPDATED = UPDATED.replace("1.2... fail", "1.2... done")


def test_update_rewrites_only_the_failed_search(tmp_path: Path, run_harness: Harness) -> None:
    guide = tmp_path / "guide.md"
    guide.write_text(GUIDE, encoding="utf-8")

    done = run_harness("guide.md", "--dialect", "fences", "--update", "--output-dir", "out")

    assert done.returncode == 0, done.stdout + done.stderr
    assert "guide.md: updated 1 ```text fence\n" in done.stderr
    assert done.stdout.splitlines()[-1].startswith("=== update: UPDATED: the run had 1 mismatch;"), done.stdout
    # the one excerpt rewritten, its wildcards kept; every other byte (the passing fence, its blank line) as it was
    assert guide.read_text(encoding="utf-8") == UPDATED  # which a run passes: the test below runs it


def test_update_writes_a_changed_line_whole_so_the_check_stays_as_strict(tmp_path: Path, run_harness: Harness) -> None:
    guide = tmp_path / "guide.md"
    command = f'{FENCE}shell\necho "status: failed"\n{FENCE}\n\n'
    guide.write_text(command + f"{FENCE}text\nstatus: ok\n{FENCE}\n", encoding="utf-8")

    done = run_harness("guide.md", "--dialect", "fences", "--update", "--output-dir", "out")

    assert done.returncode == 0, done.stdout + done.stderr
    assert guide.read_text(encoding="utf-8") == command + f"{FENCE}text\nstatus: failed\n{FENCE}\n"


def test_update_from_a_run_reads_the_guide_in_the_run_s_dialect_and_keeps_crlf(
    tmp_path: Path, run_harness: Harness
) -> None:
    guide = tmp_path / "guide.md"
    guide.write_bytes(GUIDE.replace("\n", "\r\n").encode("utf-8"))
    run = run_harness("guide.md", "--dialect", "fences", "--output-dir", "out")
    assert run.returncode == 1, run.stdout + run.stderr

    # results.json does not say how the run read the guide: read as labels, it has no block, which is said
    unread = run_harness("guide.md", "--update", "--from-run", "out")
    assert unread.returncode == 2, unread.stdout + unread.stderr
    assert "read with --dialect labels, the guide has no block to run, but 3 blocks of it ran, in the run in" in (
        unread.stderr
    )
    assert "update it with the --dialect that run was given" in unread.stderr

    done = run_harness("guide.md", "--dialect", "fences", "--update", "--from-run", "out")
    assert done.returncode == 0, done.stdout + done.stderr
    assert guide.read_bytes() == UPDATED.replace("\n", "\r\n").encode("utf-8")
    # the updated guide passes: its CRLF line ends put no carriage return in a command or an expected text
    again = run_harness("guide.md", "--dialect", "fences", "--output-dir", "again")
    assert again.returncode == 0, again.stdout + again.stderr


def test_a_command_run_with_upstream_ref_from_the_environment_is_the_one_in_the_guide(
    tmp_path: Path, run_harness: Harness
) -> None:
    # CI passes UPSTREAM_REF in the environment, which a run puts in the guide's text; the update, on a machine
    # without it, still knows the command as the one that ran, and keeps the placeholder the author wrote
    guide = tmp_path / "guide.md"
    command = f'{FENCE}shell\necho "built from <UPSTREAM_REF>"\n{FENCE}\n\n'
    guide.write_text(command + f"{FENCE}text\nbuilt from <UPSTREAM_REF> yesterday\n{FENCE}\n", encoding="utf-8")
    run = run_harness("guide.md", "--dialect", "fences", "--output-dir", "out", env={"UPSTREAM_REF": "abc123"})
    assert run.returncode == 1, run.stdout + run.stderr

    done = run_harness("guide.md", "--dialect", "fences", "--update", "--from-run", "out")

    assert done.returncode == 0, done.stdout + done.stderr
    assert guide.read_text(encoding="utf-8") == command + f"{FENCE}text\nbuilt from <UPSTREAM_REF>\n{FENCE}\n"


def test_a_guide_with_labels_run_as_plain_fences_is_not_updated_as_labels(tmp_path: Path, run_harness: Harness) -> None:
    guide = tmp_path / "guide.md"
    text = f"{FENCE}shell #test-setup\necho set up\n{FENCE}\n\n{FENCE}shell\necho new\n{FENCE}\n\n{FENCE}text\nold\n{FENCE}\n"
    guide.write_text(text, encoding="utf-8")
    assert run_harness("guide.md", "--dialect", "fences", "--output-dir", "out").returncode == 1

    done = run_harness("guide.md", "--update", "--from-run", "out")  # read as labels: one setup, no mismatch to find

    assert done.returncode == 2, done.stdout + done.stderr
    assert "the guide is read as labelled blocks, but a block without an id mismatched" in done.stderr
    assert guide.read_text(encoding="utf-8") == text
