"""Labels in the plan: every document error on its line, one mistake one error naming its fix (the near misses of
a label, a parameter, an id), and what the plan makes of valid labels (ordinals, names, languages, results)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from conftest import COLOUR_VARIABLES
from plan_guides import FILE, F, block, line_of, pair, plan_of, problems_of

from ci.guide.model import Label, Language
from ci.run import main

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
# Valid labels: what the plan says about them.


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
        ("Shell", Language.SHELL),  # in any case, as GitHub highlights it; the original engine takes only `shell`
        ("PYTHON", Language.PYTHON),
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


def test_an_id_may_hold_spaces() -> None:
    # the original engine splits the info string at every space and refuses id="first check"; a quoted value is
    # whole here, as for every parameter
    guide = block('shell #test id="first check"', "echo ok") + block('shell #test-result id="first check"', "ok")
    (step,) = plan_of(guide).steps
    assert (step.id, step.expected is not None and step.expected.body) == ("first check", "ok")


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


def test_a_block_is_named_by_its_id_else_its_store_else_its_place() -> None:
    guide = (
        f'{F}shell #test-setup id="fetch" store="model_path"\necho m\n{F}\n\n'
        f'{F}shell #test-setup store="data_path"\necho d\n{F}\n\n'
        f"{F}shell #test-setup\necho anonymous\n{F}\n"
    )
    steps = plan_of(guide).steps
    assert [step.name for step in steps] == ["fetch", "data_path", "#3"]
    assert [step.named_by for step in steps] == [("id=fetch", "store=model_path"), ("store=data_path",), ()]


# ---------------------------------------------------------------------------
# One mistake, one error, with the fix ("did you mean").

MISTAKES = Path(__file__).resolve().parent / "fixtures" / "mistakes"
REPO = MISTAKES.parents[2]
MISTAKE_GUIDES = sorted(MISTAKES.glob("*.md"))


def test_every_mistake_fixture_is_found() -> None:
    assert len(MISTAKE_GUIDES) >= 30, f"expected the one-mistake guides under {MISTAKES}"


@pytest.mark.parametrize("guide", MISTAKE_GUIDES, ids=[guide.stem for guide in MISTAKE_GUIDES])
def test_one_mistake_is_one_error_naming_its_fix(
    guide: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """tests/fixtures/mistakes/CASE.md is a guide with one mistake; CASE.err is what `--list` prints for it (the
    plan on stdout, then the warnings and errors on stderr) and its exit status. UPDATE_GOLDEN=1 rewrites them."""
    monkeypatch.chdir(REPO)  # the guide is named as a writer names it, from the repository's top
    for name in COLOUR_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    status = main([guide.relative_to(REPO).as_posix(), "--list"])
    captured = capsys.readouterr()
    printed = f"{captured.out}{captured.err}exit status {status}\n"
    golden = guide.with_suffix(".err")
    if os.environ.get("UPDATE_GOLDEN") == "1":
        golden.write_text(printed, encoding="utf-8")
    assert golden.exists(), f"{golden} is missing: write it with UPDATE_GOLDEN=1, then review it"
    assert printed == golden.read_text(encoding="utf-8"), (
        f"{golden} differs (rerun with UPDATE_GOLDEN=1, review the diff)"
    )
