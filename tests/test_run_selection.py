"""Running part of a guide with --only, --from and --until: which blocks run, and the selections refused before
anything runs."""

from __future__ import annotations

FENCE = "```"


def test_selection_by_only_from_until(guide_runner) -> None:
    guide = "\n".join(f'{FENCE}shell #test-setup id="s{i}"\necho {i}\n{FENCE}\n' for i in range(1, 6))
    run = guide_runner(guide, "--only", "s2,4")
    assert [b["status"] for b in run.blocks] == ["not_run", "passed", "not_run", "passed", "not_run"]
    run = guide_runner(guide, "--from", "s2", "--until", "3")
    assert [b["status"] for b in run.blocks] == ["not_run", "passed", "passed", "not_run", "not_run"]
    bad = guide_runner(guide, "--only", "nope")
    assert bad.returncode == 2
    assert "--only 'nope' names no block" in bad.stderr
    assert bad.stdout == ""


NEEDS_A_SETUP = f"""
    {FENCE}shell #test-setup store="path"
    echo /data
    {FENCE}

    {FENCE}shell #test id="use" load="path>>P"
    echo <P>
    {FENCE}

    {FENCE}shell #test-result id="use"
    /data
    {FENCE}
    """


def test_a_selection_that_leaves_out_a_needed_setup_is_refused_before_anything_runs(guide_runner) -> None:
    run = guide_runner(NEEDS_A_SETUP, "--only", "use")
    assert run.returncode == 2
    assert run.stdout == ""
    assert run.stderr == (
        f"[ERROR] {run.guide}:5: #test id=use loads 'path', which #test-setup store=path at {run.guide}:1 stores, "
        "but --only leaves it out: pass --set path=VALUE, or add --only path to run it too\n"
        "[ERROR] 1 document error; nothing was run\n"
    )
    run = guide_runner(NEEDS_A_SETUP, "--from", "use")
    assert run.returncode == 2
    assert "but --from use starts after it: pass --set path=VALUE, or start there: --from path" in run.stderr


def test_a_selection_runs_when_set_gives_the_value_or_the_setup_is_added(guide_runner) -> None:
    run = guide_runner(NEEDS_A_SETUP, "--only", "use", "--set", "path=/data")
    assert (run.returncode, run.block("use")["status"]) == (0, "passed")
    run = guide_runner(NEEDS_A_SETUP, "--only", "use", "--only", "path")
    assert (run.returncode, run.block("use")["status"]) == (0, "passed")


def test_a_selection_that_selects_nothing_is_a_usage_error(guide_runner) -> None:
    text = f"""
        {FENCE}shell #test-setup store="first"
        echo 1
        {FENCE}

        {FENCE}shell #test-setup store="second"
        echo 2
        {FENCE}
        """
    run = guide_runner(text, "--from", "second", "--until", "first")
    assert run.returncode == 2, run.stdout + run.stderr
    assert "command line: --from second --until first selects no block to run" in run.stderr
    assert not (run.output_dir / "results.json").exists()
    assert guide_runner(text, "--from", "second", "--until", "second").statuses() == {
        "first": "not_run",
        "second": "passed",
    }


def test_only_selects_an_id_holding_a_comma_and_still_splits_lists(guide_runner) -> None:
    text = f"""
        {FENCE}shell #test-setup id="train,eval" store="first"
        echo 1
        {FENCE}

        {FENCE}shell #test-setup store="second"
        echo 2
        {FENCE}

        {FENCE}shell #test-setup store="third"
        echo 3
        {FENCE}
        """
    whole = guide_runner(text, "--only", "train,eval")
    assert whole.returncode == 0, whole.stdout + whole.stderr
    assert whole.statuses() == {"train,eval": "passed", "second": "not_run", "third": "not_run"}
    repeated = guide_runner(text, "--only", "train,eval", "--only", "third")
    assert repeated.statuses() == {"train,eval": "passed", "second": "not_run", "third": "passed"}
    listed = guide_runner(text, "--only", "second, third")
    assert listed.statuses() == {"train,eval": "not_run", "second": "passed", "third": "passed"}
