"""Parser tests: small guides under tests/fixtures/parse/*.md against golden *.json expectations.

Each golden file lists, for its guide, every labelled block the parser must find
(label, language, params, body, 1-based fence line, nearest heading, hidden), the
lines carrying a warning or a syntax problem, and the front matter text.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ci.guide.model import Block
from ci.guide.parse import ParsedGuide, parse_guide

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "parse"
GUIDES = sorted(FIXTURES.glob("*.md"))
BLOCK_FIELDS = ("label", "language", "params", "body", "line", "heading", "hidden")


def _block_as_dict(block: Block) -> dict[str, Any]:
    """A parsed block in the golden files' vocabulary."""
    return {
        "label": block.label.value,
        "language": block.language,
        "params": [[param.key, param.value] for param in block.params],
        "body": block.body,
        "line": block.line,
        "heading": block.heading,
        "hidden": block.hidden,
    }


def _golden(guide: Path) -> dict[str, Any]:
    golden = guide.with_suffix(".json")
    assert golden.is_file(), f"{guide.name}: golden file {golden.name} is missing"
    return json.loads(golden.read_text(encoding="utf-8"))


def _parse_fixture(guide: Path, *, crlf: bool = False) -> ParsedGuide:
    text = guide.read_text(encoding="utf-8")
    if crlf:
        text = text.replace("\n", "\r\n")
    return parse_guide(text, guide.name)


def _assert_blocks(guide: Path, parsed: ParsedGuide, expected: list[dict[str, Any]]) -> None:
    actual = [_block_as_dict(block) for block in parsed.blocks]
    assert [b["line"] for b in actual] == [b["line"] for b in expected], (
        f"{guide.name}: labelled blocks found at lines {[b['line'] for b in actual]}, "
        f"expected at lines {[b['line'] for b in expected]}"
    )
    for got, want in zip(actual, expected, strict=True):
        for field in BLOCK_FIELDS:
            assert got[field] == want[field], (
                f"{guide.name}:{want['line']}: block {field} is {got[field]!r}, expected {want[field]!r}"
            )


def test_fixture_directory_is_populated() -> None:
    assert len(GUIDES) >= 7, f"expected the parser fixtures under {FIXTURES}"


@pytest.mark.parametrize("guide", GUIDES, ids=[g.stem for g in GUIDES])
def test_fixture_blocks_match_golden(guide: Path) -> None:
    golden = _golden(guide)
    parsed = _parse_fixture(guide)
    assert all(block.file == guide.name for block in parsed.blocks), f"{guide.name}: blocks must name their guide"
    _assert_blocks(guide, parsed, golden["blocks"])


@pytest.mark.parametrize("guide", GUIDES, ids=[g.stem for g in GUIDES])
def test_fixture_problems_warnings_and_front_matter(guide: Path) -> None:
    golden = _golden(guide)
    parsed = _parse_fixture(guide)
    assert [p.line for p in parsed.problems] == golden["problems"], (
        f"{guide.name}: syntax problems {[str(p) for p in parsed.problems]}, expected at lines {golden['problems']}"
    )
    assert [w.line for w in parsed.warnings] == golden["warnings"], (
        f"{guide.name}: warnings {[str(w) for w in parsed.warnings]}, expected at lines {golden['warnings']}"
    )
    front_matter = parsed.front_matter.rstrip("\n") if parsed.front_matter is not None else None
    assert front_matter == golden["front_matter"], f"{guide.name}: front matter is {parsed.front_matter!r}"
    if golden["front_matter"] is not None:
        assert parsed.front_matter_line == 1, f"{guide.name}: front matter opens on line 1"


@pytest.mark.parametrize("guide", GUIDES, ids=[g.stem for g in GUIDES])
def test_fixture_with_crlf_line_endings_parses_the_same(guide: Path) -> None:
    """A guide saved with Windows line endings gives the same blocks, with no stray \\r in bodies or params."""
    _assert_blocks(guide, _parse_fixture(guide, crlf=True), _golden(guide)["blocks"])


def test_hidden_fence_after_text_on_comment_line_keeps_its_line() -> None:
    text = "intro\n\n<!-- for CI\nmore words\n\n```shell #test-setup\ntrue\n```\n-->\n"
    parsed = parse_guide(text, "g.md")
    assert [(b.line, b.hidden) for b in parsed.blocks] == [(6, True)]


def test_label_word_must_be_exact() -> None:
    """`#test-results` and `#tests` are not labels: the block is not read, and each is an error on its line."""
    text = '# H\n\n```shell #test-results id="a"\nx\n```\n\n```shell #tests id="b"\ny\n```\n'
    parsed = parse_guide(text, "g.md")
    assert parsed.blocks == ()
    assert [p.line for p in parsed.problems] == [3, 7]
    assert parsed.warnings == ()


def test_a_near_miss_of_a_label_is_an_error_with_the_label_meant() -> None:
    words = ("#test-results", "#tests", "#tset", "#test_setup", "#Test", "#TEST-SETUP", "#testsetup", "test-result")
    text = "".join(f"```shell {word}\nx\n```\n\n" for word in words)
    labels = "(the labels are #test, #test-result and #test-setup, spelt exactly)"
    meant = ("#test-result", "#test", "#test", "#test-setup", "#test", "#test-setup", "#test-setup", "#test-result")
    parsed = parse_guide(text, "g.md")
    assert [str(p) for p in parsed.problems] == [
        f"g.md:{1 + 4 * n}: {word!r} is not a label, so this block would be ignored; did you mean {label}? {labels}"
        for n, (word, label) in enumerate(zip(words, meant, strict=True))
    ]
    assert parsed.warnings == ()


def test_a_word_farther_from_a_label_is_a_warning_and_ordinary_info_strings_are_nothing() -> None:
    text = "".join(
        f"```{info}\nx\n```\n\n"
        for info in ("shell #testing", "text", "test", "python title='test'", "console #rest-api", "bash {#lst:test}")
    )
    parsed = parse_guide(text, "g.md")
    assert parsed.problems == ()
    assert [str(w) for w in parsed.warnings] == [
        "g.md:1: '#testing' is not a label, so this block is ignored; did you mean #test? "
        "(the labels are #test, #test-result and #test-setup, spelt exactly)"
    ]


def test_an_unterminated_quote_is_one_problem_and_the_parameters_after_it_are_still_read() -> None:
    """The quote is read as closed before the next `key=`: the id after it still pairs the block, no error follows."""
    parsed = parse_guide('# H\n\n```shell #test skip=\'not here id="q"\nx\n```\n', "g.md")
    assert [str(p) for p in parsed.problems] == ["g.md:3: unterminated quote in \"skip='not here\": close it with '"]
    assert [(p.key, p.value) for p in parsed.blocks[0].params] == [("skip", "not here"), ("id", "q")]


def test_an_unquoted_value_is_still_read_and_planning_reports_it() -> None:
    parsed = parse_guide("```shell #test id=four\nx\n```\n", "g.md")
    assert parsed.problems == ()
    assert [(p.key, p.value, p.quoted) for p in parsed.blocks[0].params] == [("id", "four", False)]


def test_language_is_the_word_before_the_label_and_params_are_after() -> None:
    parsed = parse_guide('```python3 #test-setup store="v" id="x"\nprint(1)\n```\n', "g.md")
    (block,) = parsed.blocks
    assert block.language == "python3"
    assert [(p.key, p.value) for p in block.params] == [("store", "v"), ("id", "x")]


def test_body_keeps_leading_blank_lines_and_inner_blank_lines() -> None:
    parsed = parse_guide("```shell #test-setup\n\necho a\n\necho b\n\n\n```\n", "g.md")
    assert parsed.blocks[0].body == "\necho a\n\necho b"


def test_a_hidden_setup_may_be_a_tilde_or_longer_fence_or_open_on_the_comments_own_line() -> None:
    # authoring.md, section 12: the original engine looks only for lines starting ``` inside a comment, so it skips
    # the first, reads a fourth backtick as the language, and takes the third's closing line for an opening one
    tilde = "# H\n\n<!--\n~~~shell #test-setup\necho t\n~~~\n-->\n"
    longer = "# H\n\n<!--\n````shell #test-setup\necho '```'\n````\n-->\n"
    assert [(b.line, b.body, b.hidden) for b in parse_guide(longer, "g.md").blocks] == [(4, "echo '```'", True)]
    same_line = '# H\n\n<!-- ```shell #test-setup store="v"\necho v\n```\n-->\n'
    assert [(b.line, b.body, b.hidden) for b in parse_guide(tilde, "g.md").blocks] == [(4, "echo t", True)]
    assert [(b.line, b.body, b.hidden) for b in parse_guide(same_line, "g.md").blocks] == [(3, "echo v", True)]


def test_fence_in_blockquote_is_a_block() -> None:
    parsed = parse_guide('# Q\n\n> ```shell #test-setup store="q"\n> echo q\n> ```\n', "g.md")
    assert [(b.line, b.body, b.hidden) for b in parsed.blocks] == [(3, "echo q", False)]


def test_unterminated_quote_is_a_problem_on_the_fence_line() -> None:
    text = '# H\n\n```shell #test id="a" skip=\'oops\nx\n```\n'
    parsed = parse_guide(text, "g.md")
    assert parsed.problems, "an unterminated quote must be reported"
    assert {p.line for p in parsed.problems} == {3}
    assert all(p.file == "g.md" for p in parsed.problems)
    assert any("quote" in p.message for p in parsed.problems)


def test_comment_text_inside_a_fence_hides_nothing() -> None:
    text = "# V\n\n```shell #test-setup\necho '<!--'\n```\n\n```shell #test-setup\necho '-->'\n```\n"
    parsed = parse_guide(text, "g.md")
    assert [(b.line, b.hidden) for b in parsed.blocks] == [(3, False), (7, False)]


def test_heading_hidden_in_a_comment_does_not_name_later_visible_blocks() -> None:
    """Logs name a block by the nearest heading a reader sees above it, not one inside an HTML comment."""
    text = "# Visible\n\n<!--\n## Secret\n```shell #test-setup\nx\n```\n-->\n\n```shell #test-setup\ny\n```\n"
    parsed = parse_guide(text, "g.md")
    assert [(b.line, b.hidden) for b in parsed.blocks] == [(5, True), (10, False)]
    assert parsed.blocks[1].heading == "Visible"


def test_comment_further_down_an_html_block_keeps_its_lines() -> None:
    # One HTML block (<details> runs up to a blank line) whose comment opens on its third line.
    text = "# V\n\n<details>\n<summary>setup</summary>\n<!--\n```shell #test-setup\nx\n```\n-->\n</details>\n"
    parsed = parse_guide(text, "g.md")
    assert [(b.line, b.hidden, b.body) for b in parsed.blocks] == [(6, True, "x")]


def test_comment_openers_inside_a_comment_do_not_nest() -> None:
    """HTML comments do not nest: 500 lines of `<!--` parse (no RecursionError), the fence after them is hidden."""
    text = "# V\n\n" + "<!--\n" * 500 + "```shell #test-setup\ntrue\n```\n-->\n"
    parsed = parse_guide(text, "g.md")
    assert [(b.line, b.hidden) for b in parsed.blocks] == [(503, True)]
    assert parsed.problems == ()


def test_unterminated_labelled_fence_is_a_warning_saying_how_far_it_runs() -> None:
    text = '# V\n\n```shell #test-setup store="a"\necho a\n\n## Next\n\nprose\n'
    parsed = parse_guide(text, "g.md")
    assert [b.line for b in parsed.blocks] == [3]
    assert [(w.line, w.message) for w in parsed.warnings] == [
        (
            3,
            "this fence is never closed, so its block runs up to line 8, where its file, comment, "
            "quote or list item ends: close it with ```",
        )
    ]


def test_unterminated_plain_fence_warns_only_when_it_swallows_a_labelled_fence() -> None:
    swallowing = "````bash\nls\n```shell #test-setup\ntrue\n```\n"
    assert [
        (w.line, "labelled fences after it are read as its text" in w.message)
        for w in parse_guide(swallowing, "g.md").warnings
    ] == [(1, True)]
    assert parse_guide("```bash\nls\n", "g.md").warnings == ()
    closed = "```shell #test-setup\n```\n\n```shell #test-setup\nx\n```"  # closed on the file's last line
    assert parse_guide(closed, "g.md").warnings == ()


def test_labelled_fence_nested_past_the_parser_limit_is_a_warning() -> None:
    """GitHub renders fences in 21 quotes; the parser stops reading at its limit, so say so, even with bad parameters."""
    quotes = "> " * 21
    text = (
        f"# V\n\n{quotes}```shell #test-setup bad=\n{quotes}echo deep\n{quotes}```\n\n```shell #test-setup\ntrue\n```\n"
    )
    parsed = parse_guide(text, "g.md")
    assert [b.line for b in parsed.blocks] == [7]
    assert [w.line for w in parsed.warnings] == [3]
    assert "quote or list at line 3 nests deeper than the harness reads" in parsed.warnings[0].message
    assert parsed.problems == ()


def test_list_nested_past_the_parser_limit_hides_the_rest_of_the_file_with_a_warning_each() -> None:
    """Past 10 list levels the parser reads nothing more of the file: each labelled fence there is named."""
    levels = "".join("  " * depth + "- item\n" for depth in range(11))
    deep = "  " * 11
    text = f"# V\n\n{levels}\n{deep}```shell #test-setup\n{deep}echo\n{deep}```\n\n```shell #test-setup\ntrue\n```\n"
    parsed = parse_guide(text, "g.md")
    assert parsed.blocks == ()
    assert [w.line for w in parsed.warnings] == [15, 19]
    assert all("and nothing from there to line 21 is read" in w.message for w in parsed.warnings)
