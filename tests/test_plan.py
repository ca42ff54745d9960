"""Plan tests: document errors with their lines, the valid semantics of the label contract, step selection."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

import pytest

from ci.guide.model import DocumentError, Label, Language, Load, Plan, Problem
from ci.guide.parse import parse_guide
from ci.guide.plan import (
    DEFAULT_TIMEOUT_S,
    block_loads,
    build_plan,
    guides_without_blocks,
    parse_duration,
    parse_load,
)
from ci.guide.selection import only_idents, select_steps
from ci.report.listing import previewed_commands

FILE = "docs/guide.md"
F = "```"  # a fence, so that guides below read as they would in a file


def plan_of(
    text: str, *, preset_names: Iterable[str] = (), default_timeout_s: float | None = None, file: str = FILE
) -> Plan:
    return build_plan(parse_guide(text, file), preset_names=preset_names, default_timeout_s=default_timeout_s)


def problems_of(text: str, *, preset_names: Iterable[str] = (), file: str = FILE) -> list[Problem]:
    with pytest.raises(DocumentError) as caught:
        plan_of(text, preset_names=preset_names, file=file)
    return caught.value.problems


def line_of(text: str, needle: str, nth: int = 1) -> int:
    """1-based line of the nth line containing needle (a needle ending in a newline must end the line).

    This is the test's own reading of where a block or an error is.
    """
    if needle.endswith("\n"):
        hits = [n for n, line in enumerate(text.split("\n"), start=1) if line.endswith(needle[:-1])]
    else:
        hits = [n for n, line in enumerate(text.split("\n"), start=1) if needle in line]
    assert len(hits) >= nth, f"test bug: {needle!r} occurs {len(hits)} times in the guide"
    return hits[nth - 1]


def block(info: str, body: str = "true") -> str:
    return f"{F}{info}\n{body}\n{F}\n\n"


def pair(test_id: str, out: str = "ok", test_params: str = "", result_params: str = "") -> str:
    """A valid #test with its #test-result."""
    return block(f'shell #test id="{test_id}"{test_params}', f"echo {out}") + block(
        f'shell #test-result id="{test_id}"{result_params}', out
    )


# ---------------------------------------------------------------------------
# Document errors: one per guide, each on the right line, with a message that names the fault.

ERROR_CASES: list[tuple[str, str, str, int, str]] = [
    # (case id, guide, needle marking the line the error belongs to, nth occurrence, word the message must contain)
    ("unknown-parameter", "# T\n\n" + pair("a", test_params=' colour="red"'), "colour=", 1, "colour"),
    ("unknown-bare-word", "# T\n\n" + pair("a", test_params=" verbose"), "verbose", 1, "verbose"),
    (
        "unquoted-value",
        "# T\n\n" + block("shell #test id=abc") + block('#test-result id="abc"', "x"),
        "id=abc",
        1,
        "abc",
    ),
    ("flag-with-value", "# T\n\n" + pair("a", result_params=' disable_fuzzy="x"'), "disable_fuzzy", 1, "disable_fuzzy"),
    ("store-on-test", "# T\n\n" + pair("a", test_params=' store="s"'), 'store="s"', 1, "store"),
    ("fuzzy-on-test", "# T\n\n" + pair("a", test_params=" fuzzy='x'"), "fuzzy='x'", 1, "fuzzy"),
    ("skip-on-result", "# T\n\n" + pair("a", result_params=" skip='no'"), "skip='no'", 1, "skip"),
    ("timeout-on-result", "# T\n\n" + pair("a", result_params=" timeout='9'"), "timeout='9'", 1, "timeout"),
    (
        "test-without-result",
        "# T\n\n" + pair("a") + block('shell #test id="lonely"'),
        'id="lonely"',
        1,
        "lonely",
    ),
    ("test-without-id", "# T\n\n" + pair("a") + block("shell #test", "echo x"), "#test\n", 1, "id"),
    ("result-without-id", "# T\n\n" + pair("a") + block("shell #test-result", "x"), "#test-result\n", 1, "id"),
    ("duplicate-test-id", "# T\n\n" + pair("a") + block('shell #test id="a"'), '#test id="a"', 2, "duplicate"),
    (
        "duplicate-result-id",
        "# T\n\n" + pair("a") + block('shell #test-result id="a"', "ok"),
        '#test-result id="a"',
        2,
        "duplicate",
    ),
    (
        "duplicate-setup-id",
        "# T\n\n" + block('shell #test-setup id="s"') + block('shell #test-setup id="s"'),
        'id="s"',
        2,
        "duplicate",
    ),
    ("load-never-stored", "# T\n\n" + pair("a", test_params=' load="ghost>>G"'), "ghost", 1, "ghost"),
    (
        "load-stored-only-later",
        "# T\n\n" + pair("a", test_params=' load="later>>L"') + block('shell #test-setup store="later"'),
        'load="later',
        1,
        "later",
    ),
    (
        "result-load-never-stored",
        "# T\n\n" + pair("a", result_params=' load="ghost>>G"'),
        "ghost",
        1,
        "ghost",
    ),
    (
        "setup-load-never-stored",
        "# T\n\n" + block('shell #test-setup store="x" load="x>>X"'),
        "load=",
        1,
        "'x'",
    ),
    (
        "test-inside-comment",
        "# T\n\n<!--\n" + block('shell #test id="h"') + "-->\n\n" + block('shell #test-result id="h"', "ok"),
        '#test id="h"',
        1,
        "comment",
    ),
    (
        "result-inside-comment",
        "# T\n\n"
        + block('shell #test id="h"', "echo ok")
        + "<!--\n"
        + block('shell #test-result id="h"', "ok")
        + "-->\n",
        '#test-result id="h"',
        1,
        "comment",
    ),
    (
        "missing-language",
        "# T\n\n" + block('#test id="a"', "echo ok") + block('#test-result id="a"', "ok"),
        "#test id",
        1,
        "language",
    ),
    ("missing-language-setup", "# T\n\n" + block("#test-setup"), "#test-setup", 1, "language"),
    (
        "unsupported-language",
        "# T\n\n" + block('ruby #test id="a"', "puts 1") + block('#test-result id="a"', "1"),
        "ruby",
        1,
        "ruby",
    ),
    ("bad-timeout", "# T\n\n" + pair("a", test_params=" timeout='5 minutes'"), "timeout=", 1, "5 minutes"),
    ("zero-timeout", "# T\n\n" + block("shell #test-setup timeout='0'"), "timeout=", 1, "timeout"),
    (
        "disable-fuzzy-with-fuzzy",
        "# T\n\n" + pair("a", result_params=" disable_fuzzy fuzzy='x'"),
        "disable_fuzzy",
        1,
        "disable_fuzzy",
    ),
    (
        "load-without-arrows",
        "# T\n\n" + block('shell #test-setup store="name"') + pair("a", test_params=' load="name"'),
        'load="name"',
        1,
        ">>",
    ),
    ("unterminated-quote", "# T\n\n" + pair("a", test_params=" skip='oops"), "skip='oops", 1, "quote"),
    ("invalid-front-matter-yaml", "---\nci:\n\ttimeout: 3h\n---\n\n# T\n\n" + pair("a"), "\ttimeout", 1, "yaml"),
    (
        "unknown-front-matter-key",
        "---\nci:\n  timeout: 3h\n  timout: 2h\n---\n\n# T\n\n" + pair("a"),
        "timout:",
        1,
        "timout",
    ),
    (
        "bad-front-matter-timeout",
        "---\nci:\n  timeout: 5 minutes\n---\n\n# T\n\n" + pair("a"),
        "5 minutes",
        1,
        "5 minutes",
    ),
]


@pytest.mark.parametrize(
    ("guide", "needle", "nth", "word"), [c[1:] for c in ERROR_CASES], ids=[c[0] for c in ERROR_CASES]
)
def test_document_error_is_reported_on_its_line(guide: str, needle: str, nth: int, word: str) -> None:
    line = line_of(guide, needle, nth)
    problems = problems_of(guide)
    where = [str(p) for p in problems]
    assert all(p.file == FILE for p in problems), f"every problem must name the guide: {where}"
    assert {p.line for p in problems} == {line}, f"expected the error on line {line} only, got {where}"
    assert any(word.lower() in p.message.lower() for p in problems), f"no message mentions {word!r}: {where}"


def test_every_document_error_is_found_in_one_pass_sorted_by_line() -> None:
    guide = (
        "# Many faults\n\n"
        + pair("ok1")
        + pair("p1", test_params=' colour="red"')  # unknown parameter
        + block("shell #test id=abc")  # unquoted value (its result below has id "abc")
        + block('shell #test-result id="abc"', "x")
        + pair("p2", result_params=' disable_fuzzy="x"')  # flag with a value
        + pair("p3", test_params=' store="s"')  # key on the wrong label
        + block('shell #test id="lonely"')  # no result
        + block("shell #test", "echo no-id")  # no id
        + pair("ok1")  # duplicate test id (and duplicate result id on the next block)
        + pair("p4", test_params=' load="ghost>>G"')  # never stored
        + pair("p5", test_params=' load="later>>L"')  # stored only later
        + block('shell #test-setup store="later"')
        + "<!--\n"
        + block('shell #test id="hid"')  # non-setup in a comment
        + "-->\n\n"
        + block('shell #test-result id="hid"', "ok")
        + block('#test id="nolang"', "echo ok")  # no language
        + block('#test-result id="nolang"', "ok")
        + block('ruby #test id="rb"', "puts 1")  # unsupported language
        + block('#test-result id="rb"', "1")
        + pair("p6", test_params=" timeout='5 minutes'")  # bad timeout
        + pair("p7", result_params=" fuzzy='x' disable_fuzzy")  # conflict
        + pair("p8", test_params=' load="later"')  # no >>
        + pair("p9", test_params=" skip='oops")  # unterminated quote
    )
    expected = {
        line_of(guide, "colour="): "colour",
        line_of(guide, "id=abc"): "abc",
        line_of(guide, 'disable_fuzzy="x"'): "disable_fuzzy",
        line_of(guide, 'store="s"'): "store",
        line_of(guide, 'id="lonely"'): "lonely",
        line_of(guide, "#test\n"): "id",
        line_of(guide, '#test id="ok1"', 2): "duplicate",
        line_of(guide, '#test-result id="ok1"', 2): "duplicate",
        line_of(guide, "ghost>>"): "ghost",
        line_of(guide, "later>>"): "later",
        line_of(guide, '#test id="hid"'): "comment",
        line_of(guide, '#test id="nolang"'): "language",
        line_of(guide, "ruby #test"): "ruby",
        line_of(guide, "5 minutes"): "5 minutes",
        line_of(guide, "fuzzy='x' disable_fuzzy"): "disable_fuzzy",
        line_of(guide, 'load="later"'): ">>",
        line_of(guide, "skip='oops"): "quote",
    }
    problems = problems_of(guide)
    reported = [p.line for p in problems]
    assert reported == sorted(reported), f"problems must come sorted by line: {reported}"
    assert all(p.file == FILE for p in problems)
    missing = [
        f"line {line}: {word}"
        for line, word in sorted(expected.items())
        if not any(p.line == line and word.lower() in p.message.lower() for p in problems)
    ]
    assert not missing, f"not reported: {missing}; got {[str(p) for p in problems]}"
    stray = sorted({p.line for p in problems} - set(expected))
    assert not stray, f"problems on lines with no error: {stray}; got {[str(p) for p in problems]}"


def test_document_error_lines_are_right_after_front_matter() -> None:
    guide = "---\nci:\n  timeout: 1h\n---\n\n# T\n\n" + pair("a", test_params=' colour="red"')
    assert [p.line for p in problems_of(guide)] == [line_of(guide, "colour=")]


# ---------------------------------------------------------------------------
# Valid guides: what the plan says about them.


def test_preset_names_make_a_load_valid() -> None:
    guide = "# T\n\n" + pair("a", test_params=' load="tok>>TOKEN"')
    assert problems_of(guide)
    plan = plan_of(guide, preset_names={"tok"})
    assert plan.steps[0].loads == (Load("tok", "TOKEN"),)


def test_load_of_an_earlier_store_is_valid_and_repeatable() -> None:
    guide = (
        "# T\n\n"
        + block('shell #test-setup store="m"', "echo m")
        + block('python #test-setup store="n"', "print(1)")
        + pair("a", test_params=' load="m>>M" load="n>>N"', result_params=' load="m>>M"')
    )
    test = plan_of(guide).steps[2]
    assert test.loads == (Load("m", "M"), Load("n", "N"))
    assert test.expected is not None
    assert test.expected.loads == (Load("m", "M"),)


def test_setup_may_load_and_store() -> None:
    guide = "# T\n\n" + block('shell #test-setup store="x"') + block('shell #test-setup store="y" load="x>>X"')
    steps = plan_of(guide).steps
    assert [(s.store, s.loads) for s in steps] == [("x", ()), ("y", (Load("x", "X"),))]


@pytest.mark.parametrize(
    ("front_matter", "default_timeout_s", "block_timeout", "expected"),
    [
        (None, None, None, 10800.0),
        (None, 120.0, None, 120.0),
        ("45m", 120.0, None, 2700.0),
        ("45m", None, None, 2700.0),
        ("45m", 120.0, "30s", 30.0),
        (None, 120.0, "2h", 7200.0),
        (None, None, "90", 90.0),
    ],
)
def test_timeout_precedence(
    front_matter: str | None, default_timeout_s: float | None, block_timeout: str | None, expected: float
) -> None:
    head = f"---\nci:\n  timeout: {front_matter}\n---\n\n" if front_matter else ""
    timeout = f" timeout='{block_timeout}'" if block_timeout else ""
    guide = head + "# T\n\n" + pair("a", test_params=timeout) + block(f"shell #test-setup{timeout}")
    plan = plan_of(guide, default_timeout_s=default_timeout_s)
    assert [s.timeout_s for s in plan.steps] == [expected, expected]
    assert DEFAULT_TIMEOUT_S == 10800.0


def test_block_timeout_applies_to_its_block_only() -> None:
    guide = "---\nci:\n  timeout: 10m\n---\n\n" + pair("a", test_params=' timeout="3h"') + pair("b")
    assert [s.timeout_s for s in plan_of(guide).steps] == [10800.0, 600.0]


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("90", 90.0), ("30s", 30.0), ("10m", 600.0), ("3h", 10800.0), ("1.5h", 5400.0), ("0.5m", 30.0), (" 7 ", 7.0)],
)
def test_parse_duration(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize(
    "text", ["", "abc", "5 minutes", "10x", "1h30m", "h", "-5", "0", "0s", "3 hours", "1e3", "169h", "9" * 400]
)
def test_parse_duration_rejects(text: str) -> None:
    with pytest.raises(ValueError):
        parse_duration(text)


@pytest.mark.parametrize(
    ("result_params", "tokens"),
    [
        ("", ("...",)),
        (" fuzzy='xxx'", ("xxx",)),
        (" fuzzy='<b>' fuzzy='<a>'", ("<b>", "<a>")),
        (" fuzzy='xxx' fuzzy='...'", ("xxx", "...")),
        (" disable_fuzzy", ()),
    ],
)
def test_fuzzy_tokens_in_effect(result_params: str, tokens: tuple[str, ...]) -> None:
    (step,) = plan_of("# T\n\n" + pair("a", result_params=result_params)).steps
    assert step.expected is not None
    assert step.expected.fuzzy == tokens


def test_expected_body_is_the_result_as_written() -> None:
    guide = "# T\n\n" + block('shell #test-setup store="v"') + block('shell #test id="a"', "echo x")
    guide += block('shell #test-result id="a" load="v>>V"', "line <V>\n  indented ...\n\n")
    step = plan_of(guide).steps[1]
    assert step.expected is not None
    assert step.expected.body == "line <V>\n  indented ..."
    assert step.expected.line == line_of(guide, "#test-result")


def test_result_without_test_is_ignored_with_a_warning() -> None:
    guide = (
        "# T\n\n" + pair("a") + block('shell #test-setup store="orphan"') + block('shell #test-result id="orphan"', "x")
    )
    plan = plan_of(guide)
    assert [s.name for s in plan.steps] == ["a", "orphan"]
    assert [(w.file, w.line) for w in plan.warnings] == [(FILE, line_of(guide, '#test-result id="orphan"'))]


def test_later_store_of_the_same_name_is_allowed() -> None:
    guide = (
        "# T\n\n"
        + block('shell #test-setup store="ckpt"', "echo one")
        + pair("a", test_params=' load="ckpt>>C"')
        + block('shell #test-setup store="ckpt"', "echo two")
        + pair("b", test_params=' load="ckpt>>C"')
    )
    steps = plan_of(guide).steps
    assert [(s.label, s.store) for s in steps] == [
        (Label.SETUP, "ckpt"),
        (Label.TEST, None),
        (Label.SETUP, "ckpt"),
        (Label.TEST, None),
    ]
    assert steps[3].loads == (Load("ckpt", "C"),)


def test_ordinals_count_only_tests_and_setups() -> None:
    guide = (
        "# T\n\n"
        + pair("a")
        + "```shell\nnot labelled\n```\n\n"
        + block('shell #test-setup store="s"')
        + pair("b")
        + block("shell #test-setup")
    )
    plan = plan_of(guide)
    assert [(s.ordinal, s.label, s.name) for s in plan.steps] == [
        (1, Label.TEST, "a"),
        (2, Label.SETUP, "s"),
        (3, Label.TEST, "b"),
        (4, Label.SETUP, "#4"),
    ]
    assert [s.line for s in plan.steps] == [
        line_of(guide, '#test id="a"'),
        line_of(guide, 'store="s"'),
        line_of(guide, '#test id="b"'),
        line_of(guide, "#test-setup\n"),
    ]


@pytest.mark.parametrize(
    ("word", "language"),
    [
        ("shell", Language.SHELL),
        ("bash", Language.SHELL),
        ("sh", Language.SHELL),
        ("python", Language.PYTHON),
        ("python3", Language.PYTHON),
    ],
)
def test_language_aliases(word: str, language: Language) -> None:
    guide = (
        "# T\n\n"
        + block(f'{word} #test id="a"')
        + block('text #test-result id="a"', "x")
        + block(f"{word} #test-setup")
    )
    plan = plan_of(guide)
    assert [(s.language, s.language_word) for s in plan.steps] == [(language, word), (language, word)]


def test_result_needs_no_language() -> None:
    guide = "# T\n\n" + block('shell #test id="a"') + block('#test-result id="a"', "x")
    (step,) = plan_of(guide).steps
    assert step.expected is not None and step.expected.body == "x"


def test_a_word_far_from_a_label_is_a_warning_not_an_error() -> None:
    guide = "# T\n\n" + pair("a") + block('shell #testing id="b"', "echo b")
    plan = plan_of(guide)
    assert [s.name for s in plan.steps] == ["a"]
    assert [w.line for w in plan.warnings] == [line_of(guide, "#testing")]
    assert "#testing" in plan.warnings[0].message


def test_ids_are_unique_per_label_kind_only() -> None:
    guide = "# T\n\n" + block('shell #test-setup id="a"') + pair("a")
    assert [(s.label, s.id) for s in plan_of(guide).steps] == [(Label.SETUP, "a"), (Label.TEST, "a")]


def test_hidden_setups_and_skip_reasons_reach_the_plan() -> None:
    guide = (
        "# T\n\n<!--\n"
        + block('shell #test-setup store="h"')
        + "-->\n\n"
        + pair("a", test_params=" skip='needs an NPU'")
        + block("shell #test-setup skip=''")
    )
    steps = plan_of(guide).steps
    assert [s.hidden for s in steps] == [True, False, False]
    assert [s.skip_reason for s in steps] == [None, "needs an NPU", "skipped"]


def test_front_matter_settings() -> None:
    guide = '---\nci:\n  timeout: 90\n  error_markers: [ERR99999]\n  env:\n    PYTHONUNBUFFERED: "1"\n---\n\n' + pair(
        "a"
    )
    settings = plan_of(guide).settings
    assert settings.timeout_s == 90.0
    assert settings.error_markers == ("ERR99999",)
    assert dict(settings.env) == {"PYTHONUNBUFFERED": "1"}


# ---------------------------------------------------------------------------
# select_steps: --only / --from / --until


SELECT_GUIDE = (
    "# T\n\n"
    + block('shell #test-setup store="env"')  # 1
    + pair("a")  # 2
    + pair("b")  # 3
    + block('shell #test-setup store="ckpt"')  # 4
    + pair("c")  # 5
)


def left_out(
    plans: Sequence[Plan] | None = None, only: Sequence[str] = (), start: str | None = None, until: str | None = None
) -> list[dict[int, str]]:
    return select_steps(plans or [plan_of(SELECT_GUIDE)], only=only, start=start, until=until)


@pytest.mark.parametrize(
    ("only", "start", "until", "skipped"),
    [
        ((), None, None, set()),
        (("a",), None, None, {1, 3, 4, 5}),
        (("ckpt",), None, None, {1, 2, 3, 5}),
        (("3",), None, None, {1, 2, 4, 5}),
        (("a", "c"), None, None, {1, 3, 4}),
        (("env", "5"), None, None, {2, 3, 4}),
        ((), "b", None, {1, 2}),
        ((), "ckpt", None, {1, 2, 3}),
        ((), None, "b", {4, 5}),
        ((), None, "ckpt", {5}),
        ((), "a", "ckpt", {1, 5}),
        ((), "2", "4", {1, 5}),
    ],
)
def test_select_steps(only: tuple[str, ...], start: str | None, until: str | None, skipped: set[int]) -> None:
    (reasons,) = left_out(only=only, start=start, until=until)
    assert set(reasons) == skipped
    for reason in reasons.values():
        flags = ["--only"] if only else [f for f, given in (("--from", start), ("--until", until)) if given]
        assert any(flag in reason for flag in flags), f"reason {reason!r} must name the option that left the block out"


@pytest.mark.parametrize(
    ("only", "start", "until", "ident"),
    [
        (("nope",), None, None, "nope"),
        ((), "missing", None, "missing"),
        ((), None, "99", "99"),
        (("a", "zz"), None, None, "zz"),
    ],
)
def test_select_unknown_ident_is_a_document_error(
    only: tuple[str, ...], start: str | None, until: str | None, ident: str
) -> None:
    with pytest.raises(DocumentError) as caught:
        left_out(only=only, start=start, until=until)
    assert len(caught.value.problems) == 1
    assert ident in caught.value.problems[0].message


def test_select_across_guides_names_blocks_of_any_guide() -> None:
    other = plan_of("# U\n\n" + pair("z"), file="other.md")
    first, second = left_out([plan_of(SELECT_GUIDE), other], only=("z",))
    assert set(first) == {1, 2, 3, 4, 5}
    assert second == {}


def test_front_matter_collect_and_diagnostics() -> None:
    guide = (
        "---\nci:\n  collect: ['/tmp/smoke-*.log', '~/ascend/log/**/*.log']\n"
        "  diagnostics:\n    - npu-smi info\n    - 'tail -n 50 /tmp/a.log: x'\n  diagnostics_timeout: 30s\n---\n\n"
        + pair("a")
    )
    settings = plan_of(guide).settings
    assert settings.collect == ("/tmp/smoke-*.log", "~/ascend/log/**/*.log")
    assert settings.diagnostics == ("npu-smi info", "tail -n 50 /tmp/a.log: x")
    assert settings.diagnostics_timeout_s == 30.0
    assert plan_of(pair("a")).settings.diagnostics_timeout_s is None


def test_front_matter_collect_and_diagnostics_errors_name_their_lines() -> None:
    guide = (
        "---\n"
        "ci:\n"
        '  collect: "/tmp/*.log"\n'
        "  diagnostics:\n"
        "    - npu-smi info\n"
        '    - ""\n'
        "    - 5\n"
        "    - echo card: 0\n"
        "    -\n"
        "    - [a, b]\n"
        "    - yes\n"
        "  diagnostics_timeout: soon\n"
        "---\n\n" + pair("a")
    )
    problems = problems_of(guide)
    assert [(p.line, p.message) for p in problems] == [
        (
            3,
            "front matter ci.collect must be a list of strings, a glob per item; "
            'write it as a list: collect: ["/tmp/*.log"]',
        ),
        (6, "front matter ci.diagnostics: item 2 is empty; give a command or remove the item"),
        (7, 'front matter ci.diagnostics: item 3 reads as the number 5, not a command: quote it, e.g. - "5"'),
        (
            8,
            'front matter ci.diagnostics: item 4 reads as a mapping, not as a command: quote it, e.g. - "echo card: 0"',
        ),
        (9, "front matter ci.diagnostics: item 5 is empty; give a command or remove the item"),
        (10, "front matter ci.diagnostics: item 6 is a nested list; give each command as an item of its own"),
        (11, "front matter ci.diagnostics: item 7 reads as true (YAML's yes/no/on/off/true/false): quote it"),
        (
            12,
            "front matter ci.diagnostics_timeout: bad duration 'soon': use seconds (90) or a unit: 30s, 10m, 3h",
        ),
    ]


def test_front_matter_cleanup_is_read_and_its_errors_name_their_lines() -> None:
    guide = '---\nci:\n  cleanup: ["rm -rf /tmp/smoke-work", "rm -f ~/.cache/x: y"]\n  cleanup_timeout: 10s\n---\n\n'
    settings = plan_of(guide + pair("a")).settings
    assert (settings.cleanup, settings.cleanup_timeout_s) == (("rm -rf /tmp/smoke-work", "rm -f ~/.cache/x: y"), 10.0)
    assert (plan_of(pair("a")).settings.cleanup, plan_of(pair("a")).settings.cleanup_timeout_s) == ((), None)
    bad = "---\nci:\n  cleanup: rm -rf /tmp/smoke-work\n  cleanup_timeout: soon\n  clean_up: [x]\n---\n\n"
    assert [(p.line, p.message) for p in problems_of(bad + pair("a"))] == [
        (
            3,
            "front matter ci.cleanup must be a list of strings, a command per item; "
            'write it as a list: cleanup: ["rm -rf /tmp/smoke-work"]',
        ),
        (4, "front matter ci.cleanup_timeout: bad duration 'soon': use seconds (90) or a unit: 30s, 10m, 3h"),
        (
            5,
            "front matter: unknown key ci.clean_up; did you mean ci.cleanup? allowed: cleanup, cleanup_timeout,"
            " collect, diagnostics, diagnostics_timeout, dialect, env, error_markers, retry, retry_delay, timeout,"
            " timeout_rules, upstream",
        ),
    ]


def test_front_matter_collect_must_be_a_list() -> None:
    guide = "---\nci:\n  collect: {logs: /tmp}\n---\n\n" + pair("a")
    (problem,) = problems_of(guide)
    assert problem.line == 3
    assert problem.message == (
        "front matter ci.collect must be a list of strings, a glob per item; "
        'e.g. collect: ["/tmp/server-*.log", "~/app/log/*.txt"]'
    )


@pytest.mark.parametrize(
    ("value", "load"),
    [
        ("model_path>>MODEL_PATH", Load("model_path", "MODEL_PATH")),
        ("a>>b>>c", Load("a", "b>>c")),  # split at the first >>
        ("model_path", None),
        (">>MODEL_PATH", None),
        ("model_path>>", None),
        ("", None),
    ],
)
def test_the_load_syntax(value: str, load: Load | None) -> None:
    assert parse_load(value) == load


def test_block_loads_are_the_well_formed_ones_in_order() -> None:
    [block] = parse_guide(f'{F}shell #test-setup load="b>>B" load="broken" load="a>>A"\necho\n{F}\n', FILE).blocks
    assert block_loads(block) == [Load("b", "B"), Load("a", "A")]


def test_a_block_is_named_by_its_id_else_its_store_else_its_place() -> None:
    guide = (
        f'{F}shell #test-setup id="fetch" store="model_path"\necho m\n{F}\n\n'
        f'{F}shell #test-setup store="data_path"\necho d\n{F}\n\n'
        f"{F}shell #test-setup\necho anonymous\n{F}\n"
    )
    steps = plan_of(guide).steps
    assert [step.name for step in steps] == ["fetch", "data_path", "#3"]
    assert [step.named_by for step in steps] == [("id=fetch", "store=model_path"), ("store=data_path",), ()]


def test_front_matter_env_that_no_environment_can_hold_is_a_document_error_on_its_line() -> None:
    guide = '---\nci:\n  env:\n    GOOD: "1"\n    "A=B": "2"\n    "": x\n    NULLED: "a\\0b"\n---\n\n' + pair("a")
    with pytest.raises(DocumentError) as raised:
        plan_of(guide)
    found = [(p.line, p.message) for p in raised.value.problems]
    assert [line for line, _ in found] == [5, 6, 7]
    assert "'A=B' contains '='" in found[0][1]
    assert "empty name" in found[1][1]
    assert "value of NULLED contains a NUL character" in found[2][1]


def test_front_matter_alias_under_ci_is_a_document_error_and_elsewhere_is_left_alone() -> None:
    elsewhere = "---\ntitle: &name Guide\nheading: *name\nci:\n  timeout: 90\n---\n\n" + pair("a")
    assert plan_of(elsewhere).settings.timeout_s == 90.0
    under_ci = '---\nshared: &limit 90\nci:\n  env:\n    A: "1"\n  timeout: *limit\n---\n\n' + pair("a")
    assert [(p.line, p.message) for p in problems_of(under_ci)] == [
        (6, "front matter: YAML aliases (*name) are not allowed under ci: write the value out in full")
    ]


def test_absurd_durations_are_document_errors_on_their_lines() -> None:
    """400 digits became Infinity in results.json, which is not JSON; the limit is 7 days, and 168h is allowed."""
    guide = "---\nci:\n  timeout: 8d\n---\n\n" + pair("a", test_params=f" timeout='{'9' * 400}'")
    found = [(p.line, p.message) for p in problems_of(guide)]
    assert [line for line, _ in found] == [3, 6]
    assert "bad duration '8d'" in found[0][1]
    assert (
        found[1][1]
        == "timeout: duration '99999999999999999...99999999999999999' is over the maximum of 7 days: give at most 168h"
    )
    assert plan_of("# T\n\n" + pair("a", test_params=" timeout='168h'")).steps[0].timeout_s == 7 * 24 * 3600


def test_a_selection_of_no_block_in_any_guide_is_a_document_error() -> None:
    with pytest.raises(DocumentError) as caught:
        left_out(start="c", until="a")
    assert [p.message for p in caught.value.problems] == [
        "--from c --until a selects no block to run; see --list for the blocks in their order"
    ]
    other = plan_of("# U\n\n" + pair("z"), file="other.md")
    assert left_out([plan_of(SELECT_GUIDE), other], start="z")[1] == {}  # one guide selecting nothing is fine


def test_guides_without_blocks_are_named() -> None:
    empty = plan_of("# Nothing to run\n\n" + block("shell") + block('shell #test-result id="x"'), file="empty.md")
    assert [(p.file, p.line) for p in guides_without_blocks([plan_of(SELECT_GUIDE), empty])] == [("empty.md", 0)]


@pytest.mark.parametrize(
    ("values", "idents"),
    [
        (("a,b",), ["a,b"]),  # a whole id wins over the split
        (("a,c",), ["a", "c"]),
        (("c, ckpt", "a,b"), ["c", "ckpt", "a,b"]),
        ((" , 2,",), ["2"]),
    ],
)
def test_only_values_name_a_whole_id_else_split_at_commas(values: tuple[str, ...], idents: list[str]) -> None:
    plan = plan_of(SELECT_GUIDE + pair("a,b"))
    assert only_idents(values, [plan]) == idents


# ---------------------------------------------------------------------------
# One mistake, one error, with the fix ("did you mean").

LABELS = "(the labels are #test, #test-result and #test-setup, spelt exactly)"
ONE_MISTAKE_CASES: list[tuple[str, str, str]] = [
    # (case id, guide, the one problem, as printed)
    (
        "unquoted-id",
        block("shell #test id=four") + block('shell #test-result id="four"', "4"),
        "1: unquoted value in 'id=four': write id=\"four\"",
    ),
    (
        "empty-unquoted-id",
        block("shell #test id=") + block("shell #test-setup"),
        '1: id= has no value: write id="..."',
    ),
    (
        "misspelt-id-on-test",
        block('shell #test ids="four"') + block('shell #test-result id="four"', "4"),
        "1: unknown parameter 'ids' on #test; did you mean id=\"four\"? allowed: id, load, rerun_on_resume, retry, retry_delay, skip, timeout",
    ),
    (
        "misspelt-id-on-result",
        block('shell #test id="four"') + block('shell #test-result ids="four"', "4"),
        "5: unknown parameter 'ids' on #test-result; did you mean id=\"four\"? allowed: disable_fuzzy, fuzzy, id, load",
    ),
    (
        "misspelt-timeout",
        block("shell #test id=\"a\" timout='5'") + block('shell #test-result id="a"'),
        "1: unknown parameter 'timout' on #test; did you mean timeout=\"5\"? allowed: id, load, rerun_on_resume, retry, retry_delay, skip, timeout",
    ),
    (
        "misspelt-flag",
        block('shell #test id="a"') + block('shell #test-result id="a" disable_fuzy'),
        "5: unknown parameter 'disable_fuzy' on #test-result; did you mean disable_fuzzy? allowed: disable_fuzzy, fuzzy, id, load",
    ),
    (
        "misspelt-rerun-flag",
        block("shell #test-setup rerun_on_resum"),
        "1: unknown parameter 'rerun_on_resum' on #test-setup; did you mean rerun_on_resume? allowed: id, load, rerun_on_resume, retry, retry_delay, skip, store, timeout",
    ),
    (
        "rerun-flag-given-a-value",
        block('shell #test-setup rerun_on_resume="yes"'),
        "1: rerun_on_resume is a flag and takes no value: write rerun_on_resume alone",
    ),
    (
        "unquoted-store",
        block("shell #test-setup store=port") + block('shell #test-setup load="port>>P"'),
        "1: unquoted value in 'store=port': write store=\"port\"",
    ),
    (
        "misspelt-store",
        block('shell #test-setup stor="port"') + block('shell #test-setup load="port>>P"'),
        "1: unknown parameter 'stor' on #test-setup; did you mean store=\"port\"? allowed: id, load, rerun_on_resume, retry, retry_delay, skip, store, timeout",
    ),
    (
        "unterminated-quote",
        block('shell #test skip=\'not here id="q"') + block('shell #test-result id="q"'),
        "1: unterminated quote in \"skip='not here\": close it with '",
    ),
    (
        "misspelt-result-label",
        block('shell #test id="a"') + block('shell #test-results id="a"'),
        "5: '#test-results' is not a label, so this block would be ignored; did you mean #test-result? " + LABELS,
    ),
    (
        "misspelt-test-label",
        block('shell #tset id="a"') + block('shell #test-result id="a"') + block("shell #test-setup"),
        "1: '#tset' is not a label, so this block would be ignored; did you mean #test? " + LABELS,
    ),
    (
        "label-in-capitals",
        block('shell #TEST id="a"') + block('shell #test-result id="a"') + block("shell #test-setup"),
        "1: '#TEST' is not a label, so this block would be ignored; did you mean #test? " + LABELS,
    ),
    (
        "result-label-far-from-any",
        block('shell #test id="a"') + block('shell #test-resulting id="a"'),
        "1: #test id='a' has no #test-result: the block at line 5 has id='a' but is labelled '#test-resulting', "
        "so it is ignored; did you mean #test-result?",
    ),
    (
        "misspelt-result-id",
        block('shell #test id="check"') + block('shell #test-result id="chek"'),
        "1: #test id='check' has no #test-result id='check'; did you mean the #test-result id='chek' at line 5? "
        "Give both the same id",
    ),
    (
        "misspelt-load-name",
        block('shell #test-setup store="port"') + block('shell #test-setup load="prot>>P"'),
        "5: load of 'prot', which no earlier block stores (stored so far: port); did you mean load=\"port>>P\"? "
        'Else add a #test-setup store="prot" above, or pass --set prot=VALUE',
    ),
    (
        "misspelt-language",
        block('shel #test-setup id="a"'),
        "1: unsupported language 'shel'; did you mean shell? use one of bash, python, python3, sh, shell",
    ),
    (
        "misspelt-front-matter-key",
        "---\nci:\n  timout: 1h\n---\n" + block("shell #test-setup"),
        "3: front matter: unknown key ci.timout; did you mean ci.timeout? "
        "allowed: cleanup, cleanup_timeout, collect, diagnostics, diagnostics_timeout, dialect, env, error_markers, retry, retry_delay, timeout, timeout_rules, upstream",
    ),
]


@pytest.mark.parametrize(
    ("guide", "problem"), [c[1:] for c in ONE_MISTAKE_CASES], ids=[c[0] for c in ONE_MISTAKE_CASES]
)
def test_one_mistake_is_one_error_naming_its_fix(guide: str, problem: str) -> None:
    with pytest.raises(DocumentError) as caught:
        plan_of(guide)
    assert [str(p) for p in caught.value.problems] == [f"{FILE}:{problem}"]
    assert caught.value.warnings == (), "what follows from the mistake is not a warning of its own either"


# ---------------------------------------------------------------------------
# A forgotten load: a `<NAME>` for a stored value that the block does not load.

FORGOTTEN_LOAD_GUIDE = (
    block('shell #test-setup store="port"', "echo 8080")  # 1
    + block('shell #test id="serve" load="port>>PORT"', 'echo "serving on <PORT>"')  # 5
    + block('shell #test-result id="serve"', "serving on <PORT>")  # 9
    + block('shell #test id="curl"', "curl -s localhost:<PORT>/\necho <port> <PORT>")  # 13
    + block('shell #test-result id="curl" load="port>>PORT"', "<PORT>")  # 18
)


def test_a_forgotten_load_is_a_warning_naming_the_load_to_add() -> None:
    plan = plan_of(FORGOTTEN_LOAD_GUIDE)
    assert [str(w) for w in plan.warnings] == [
        f"{FILE}:10: <PORT> is left as written: no load of this block replaces it, though the block at line 5 "
        'loads port into <PORT>; add load="port>>PORT" to its fence at line 9',
        f"{FILE}:14: <PORT> is left as written: no load of this block replaces it, though the block at line 5 "
        'loads port into <PORT>; add load="port>>PORT" to its fence at line 13',
        f"{FILE}:15: <port> is left as written: no load of this block replaces it, though #test-setup store=port "
        'at line 1 stores port; add load="port>>port" to its fence at line 13',
    ]


def test_a_forgotten_load_of_a_value_given_by_set_is_a_warning() -> None:
    guide = pair("a", test_params=' load="tok>>TOKEN"') + block('shell #test-setup id="use"', "echo <tok>")
    assert [str(w) for w in plan_of(guide, preset_names={"tok"}).warnings] == [
        f"{FILE}:10: <tok> is left as written: no load of this block replaces it, though --set gives tok; "
        'add load="tok>>tok" to its fence at line 9'
    ]


def test_angle_brackets_of_shell_and_html_are_not_forgotten_loads() -> None:
    body = (
        "sort < input.txt > sorted.txt\n"
        "cat <<EOF\n<html><body>port</body></html>\nEOF\n"
        "diff <(echo a) <(echo b)\n"
        "grep x <<< 'port'\n"
        "cat <file>out.txt\n"
        "echo <MODEL> loaded\n"
    )
    guide = (
        block('shell #test-setup store="port"', "echo 8080")
        + block('shell #test-setup store="model"', "echo m")
        + block('shell #test id="t" load="model>>MODEL"', body)
        + block('shell #test-result id="t" fuzzy="<any>"', "<html><any>")
        + block('shell #test-setup id="later"', "echo <ckpt>")  # ckpt: stored only after this block
        + block('shell #test-setup store="ckpt"', "echo c")
    )
    assert plan_of(guide).warnings == ()


def test_a_guide_with_errors_has_no_forgotten_load_warnings() -> None:
    """A misspelt `lod=` is one error; the `<PORT>` it leaves unloaded is not a warning as well."""
    guide = block('shell #test-setup store="port"') + block('shell #test-setup lod="port>>PORT"', "echo <PORT>")
    with pytest.raises(DocumentError) as caught:
        plan_of(guide)
    assert len(caught.value.problems) == 1
    assert caught.value.warnings == ()


# ---------------------------------------------------------------------------
# A selection that leaves out the setup storing a value a selected block loads.

NEEDS_GUIDE = (
    block('shell #test-setup store="path"', "echo /data")  # 1
    + block('shell #test-setup id="mk" store="model" load="path>>P"', "echo <P>/model")  # 5
    + pair("use", test_params=' load="model>>M"')  # 9
)


@pytest.mark.parametrize(
    ("only", "start", "message"),
    [
        (
            ("use",),
            None,
            "#test id=use loads 'model', which #test-setup id=mk at docs/guide.md:5 stores, but --only leaves it out: "
            "pass --set model=VALUE, or add --only path --only mk to run it and the setups it needs too",
        ),
        (
            ("use", "path"),
            None,
            "#test id=use loads 'model', which #test-setup id=mk at docs/guide.md:5 stores, but --only leaves it out: "
            "pass --set model=VALUE, or add --only mk to run it too",
        ),
        (
            (),
            "use",
            "#test id=use loads 'model', which #test-setup id=mk at docs/guide.md:5 stores, but --from use starts "
            "after it: pass --set model=VALUE, or start there: --from path",
        ),
        (
            ("use",),
            "mk",
            "#test id=use loads 'model', which #test-setup id=mk at docs/guide.md:5 stores, but --only leaves it out: "
            "pass --set model=VALUE, or add --only path --only mk and start there: --from path",
        ),
    ],
)
def test_a_selection_leaving_out_a_needed_setup_names_it_and_the_options_to_add(
    only: tuple[str, ...], start: str | None, message: str
) -> None:
    with pytest.raises(DocumentError) as caught:
        select_steps([plan_of(NEEDS_GUIDE)], only=only, start=start)
    assert [str(p) for p in caught.value.problems] == [f"{FILE}:9: {message}"]


def test_a_value_given_by_set_or_stored_by_a_selected_setup_is_no_problem() -> None:
    plan = plan_of(
        NEEDS_GUIDE
        + block('shell #test-setup store="model"', "echo again")
        + pair("late", test_params=' load="model>>M"')
    )
    assert select_steps([plan], only=("use",), preset_names={"model"}) == [
        {
            1: "not selected by --only",
            2: "not selected by --only",
            4: "not selected by --only",
            5: "not selected by --only",
        }
    ]
    assert 5 not in select_steps([plan], start="4")[0]  # the later setup runs and stores model for `late`
    skipped = plan_of(block('shell #test-setup store="x" skip="later"') + pair("t", test_params=' load="x>>X"'))
    assert select_steps([skipped]) == [{}]  # a skipped setup is not the selection's doing: found when it runs


def test_a_misspelt_selection_names_the_block_meant() -> None:
    with pytest.raises(DocumentError) as caught:
        select_steps([plan_of(NEEDS_GUIDE)], only=("uses",))
    assert [str(p) for p in caught.value.problems] == [
        "command line: --only 'uses' names no block; did you mean --only use? "
        "use an id, a store name or an ordinal (see --list)"
    ]


PREVIEWED = f"""\
{F}shell #test-setup store="port"
echo 8080
{F}

{F}shell #test-setup store="host" skip="no server here"
echo localhost
{F}

{F}shell #test id="get" load="port>>PORT" load="host>>HOST" load="user>>USER"
curl "http://<USER>@<HOST>:<PORT>/" <PORT>
{F}

{F}text #test-result id="get"
...
{F}
"""


@pytest.mark.parametrize(
    ("left_out", "preset", "command", "pending"),
    [
        # the setup runs: its value is the run's, a --set value of the same name is overwritten
        (
            {},
            {"port": "1", "user": "me"},
            'curl "http://me@<HOST>:<PORT>/" <PORT>',
            [
                "<PORT>: stored by #test-setup store=port at line 1 at run time",
                "<HOST>: no value: no block that runs before it stores host",  # its setup is skipped
            ],
        ),
        # left out by the selection: the --set value is the one loaded, wherever the placeholder stands
        (
            {1: "before --from get"},
            {"port": "9", "host": "h", "user": "me"},
            'curl "http://me@h:9/" 9',
            [],
        ),
    ],
)
def test_previewed_commands_substitute_what_is_known_before_the_run(
    left_out: dict[int, str], preset: dict[str, str], command: str, pending: list[str]
) -> None:
    plan = plan_of(PREVIEWED, preset_names=preset)
    previewed = previewed_commands(plan, left_out, preset)
    assert (previewed[3].text, list(previewed[3].pending)) == (command, pending)
    assert previewed[1].text == "echo 8080" and previewed[1].pending == ()


def test_authoring_md_lists_the_front_matter_keys_the_harness_allows() -> None:
    """The troubleshooting row of an unknown ci key (docs/authoring.md) names exactly what the error allows."""
    said = problems_of("---\nci:\n  timout: 3\n---\n\n" + pair("a"))[0].message
    allowed = said.split("allowed: ", 1)[1]
    docs = (Path(__file__).resolve().parents[1] / "docs" / "authoring.md").read_text(encoding="utf-8")
    (row,) = [line for line in docs.splitlines() if line.startswith("| `front matter: unknown key ci.timout")]
    assert f"| use {allowed} |" in row, row
