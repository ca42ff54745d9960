"""Step selection (--only, --from, --until) in the plan: the blocks each leaves out and why, the idents it takes,
and the selections that are document errors (an unknown or misspelt name, nothing selected, a needed setup
left out)."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from plan_guides import FILE, block, pair, plan_of

from ci.guide.model import DocumentError, Plan
from ci.guide.plan import guides_without_blocks
from ci.guide.selection import only_idents, select_steps

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
