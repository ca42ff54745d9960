"""Values mean what they say: one-pass substitution, front matter taken as written, fences that are what they look."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ci.guide.placeholders import substitute

FENCE = "```"


def test_a_loaded_value_is_pasted_as_it_is_whatever_the_order_of_the_loads(guide_runner) -> None:
    run = guide_runner(
        f"""
        {FENCE}shell #test-setup store="a"
        printf 'x<B>y'
        {FENCE}

        {FENCE}shell #test-setup store="b"
        printf '<A><A><A>'
        {FENCE}

        {FENCE}shell #test id="ab" load="a>>A" load="b>>B"
        echo '<A>|<B>'
        {FENCE}

        {FENCE}shell #test-result id="ab"
        x<B>y|<A><A><A>
        {FENCE}

        {FENCE}shell #test id="ba" load="b>>B" load="a>>A"
        echo '<A>|<B>'
        {FENCE}

        {FENCE}shell #test-result id="ba"
        x<B>y|<A><A><A>
        {FENCE}

        {FENCE}shell #test id="expected"
        echo 'x<B>y'
        {FENCE}

        {FENCE}shell #test-result id="expected" load="a>>A" load="b>>B"
        <A>
        {FENCE}
        """,
        "--keep-going",
    )
    assert run.statuses() == {"a": "passed", "b": "passed", "ab": "passed", "ba": "passed", "expected": "passed"}, (
        run.stdout
    )


_PLACEHOLDERS = st.sampled_from(["A", "B", "AB", "A>"])


@given(
    text=st.text("<>AB x", max_size=30),
    loads=st.lists(st.tuples(_PLACEHOLDERS, st.text("<>AB x", max_size=12)), max_size=4),
)
@settings(max_examples=300, deadline=None)
def test_substitution_is_one_pass_over_the_text(text: str, loads: list[tuple[str, str]]) -> None:
    result = substitute(text, tuple(loads))
    # the order of distinct placeholders does not matter, and nothing grows beyond the values pasted once
    first: dict[str, str] = {}
    for placeholder, value in loads:
        first.setdefault(placeholder, value)
    assert substitute(text, tuple(reversed(list(first.items())))) == result
    longest = max((len(value) for value in first.values()), default=0)
    assert len(result) <= len(text) * max(longest, 1)
    # a value holding placeholders comes out as it is
    if len(first) == 1 and text == f"<{next(iter(first))}>":
        assert result == next(iter(first.values()))


def test_front_matter_values_are_taken_as_written(guide_runner) -> None:
    run = guide_runner(
        f"""
        ---
        ci:
          timeout: 010
          env:
            PYTHON_VERSION: 3.10
            UMASK: 0022
            WAIT: 1:30
            FLAG: on
            EMPTY:
            QUOTED: "0x1F"
        ---
        {FENCE}shell #test id="env"
        printf '%s|' "$PYTHON_VERSION" "$UMASK" "$WAIT" "$FLAG" "$EMPTY" "$QUOTED"
        {FENCE}

        {FENCE}shell #test-result id="env"
        3.10|0022|1:30|on||0x1F|
        {FENCE}
        """
    )
    assert run.returncode == 0, run.stdout
    listed = json.loads(run_list(run.guide).stdout)
    assert listed[0]["timeout_s"] == 10


def run_list(guide: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ci.run", str(guide), "--list", "--format", "json"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize(
    ("guide", "errors"),
    [
        (
            "---\nci:\n  timeout: 5m\n  env:\n    A: one\n    A: two\n  timeout: 1h\n---\n",
            [
                "guide.md:6: front matter: ci.env.A is given twice (first at line 5)",
                "guide.md:7: front matter: ci.timeout is given twice (first at line 3)",
            ],
        ),
        ("---\nci:\n  timeout: 5m\n\n# Title\n", ["guide.md:1: front matter is never closed"]),
        (
            f"{FENCE}shell #test-setup skip='needs `npu-smi`'\nnpu-smi info\n{FENCE}\n",
            ["guide.md:1: this line looks like a labelled fence but is not one: a ``` fence's parameters cannot"],
        ),
        (  # HTML runs to the next blank line: the fence is text there, which the original engine skips unsaid
            f"<details>\n<summary>Set up</summary>\n{FENCE}shell #test-setup\ntrue\n{FENCE}\n</details>\n",
            ["guide.md:3: this line looks like a labelled fence but is not one: it opens no code block where it"],
        ),
    ],
    ids=["key-twice", "unclosed", "backtick", "details"],
)
def test_front_matter_and_fences_that_would_be_read_otherwise_are_document_errors(
    guide_runner, guide: str, errors: list[str]
) -> None:
    body = f'\n{FENCE}shell #test id="a"\necho a\n{FENCE}\n\n{FENCE}shell #test-result id="a"\na\n{FENCE}\n'
    run = guide_runner(guide + body)
    assert run.returncode == 2, run.stdout + run.stderr
    said = [line.split("[ERROR] ")[-1].replace(f"{run.guide.parent}/", "") for line in run.stderr.splitlines()]
    for error in errors:
        assert any(line.startswith(error) for line in said), (error, run.stderr)


def test_a_lone_carriage_return_in_the_text_makes_no_fence_a_false_one(guide_runner) -> None:
    # CommonMark, and so the parser, ends a line at a lone CR (an old Mac editor, a pasted log): the check
    # for lines that look like labelled fences must count lines the same way, or it finds every fence after
    # the CR one line off, outside the code blocks, and calls each a false fence.
    run = guide_runner(
        f'Some text\rpasted with a CR.\n\n{FENCE}shell #test id="a"\necho a\n{FENCE}\n\n'
        f'{FENCE}shell #test-result id="a"\na\n{FENCE}\n'
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "looks like a labelled fence" not in run.stderr
