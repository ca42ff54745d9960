"""Stores and loads in the plan: which loads are valid (an earlier store, a --set name), the load syntax, a
forgotten load warned of, and the commands previewed with what is known before the run."""

from __future__ import annotations

import pytest
from plan_guides import FILE, F, block, pair, plan_of, problems_of

from ci.guide.model import DocumentError, Label, Load
from ci.guide.parse import parse_guide
from ci.guide.plan import block_loads, parse_load
from ci.report.listing import previewed_commands

# ---------------------------------------------------------------------------
# Loads: which are valid, and what the plan makes of them.


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


def test_a_result_loads_what_is_stored_before_its_test_runs_wherever_the_result_stands() -> None:
    # The expected text is filled in when the #test runs: a value stored between the #test and its result is not
    # there yet (the original engine accepts the guide, then matches `<V>` as written), and a result written
    # above its #test may load a value stored in between.
    between = (
        block('shell #test id="a"', "echo v")
        + block('shell #test-setup store="v"', "echo v")
        + block('shell #test-result id="a" load="v>>V"', "<V>")
    )
    (problem,) = problems_of(between)
    assert str(problem).startswith(f"{FILE}:9: load of 'v', which no earlier block stores"), str(problem)
    above = (
        block('shell #test-result id="a" load="v>>V"', "<V>")
        + block('shell #test-setup store="v"', "echo v")
        + block('shell #test id="a"', "echo v")
    )
    test = plan_of(above).steps[1]
    assert test.expected is not None and test.expected.loads == (Load("v", "V"),)


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


@pytest.mark.parametrize(
    ("value", "load"),
    [
        ("model_path>>MODEL_PATH", Load("model_path", "MODEL_PATH")),
        ("a>>b>>c", None),  # exactly one >>, as the reference engine reads it
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
