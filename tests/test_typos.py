"""A typo cannot turn a run green: a near miss of a label is a document error, and --strict makes warnings errors."""

from __future__ import annotations

from pathlib import Path

FENCE = "```"


def _guide(marker: Path, label: str) -> str:
    """Two setups that leave a mark, and a #test-result whose #test carries LABEL."""
    return f"""
        {FENCE}shell #test-setup
        touch {marker}
        {FENCE}

        {FENCE}shell {label} id="query"
        echo 42
        {FENCE}

        {FENCE}text #test-result id="query"
        42
        {FENCE}
        """


def test_a_near_miss_of_a_label_stops_the_run_with_the_label_meant(guide_runner, tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    for label, meant in (("#tset", "#test"), ("#Test", "#test"), ("test", "#test")):
        run = guide_runner(_guide(marker, label))
        assert run.returncode == 2, run.stdout + run.stderr
        assert (
            f"[ERROR] {run.guide}:5: {label!r} is not a label, so this block would be ignored; did you mean {meant}?"
            in run.stderr
        )
        assert "1 document error; nothing was run" in run.stderr
        assert "has no #test" not in run.stderr  # one mistake, one error
        assert not marker.exists()


def test_strict_makes_a_warning_an_error_before_anything_runs(guide_runner, tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    guide = f"""
        {FENCE}shell #test-setup store="port"
        echo 8080
        {FENCE}

        {FENCE}shell #test-setup
        touch {marker}; echo "<port>"
        {FENCE}
        """
    run = guide_runner(guide, "--strict")
    assert run.returncode == 2, run.stdout + run.stderr
    assert f"[ERROR] {run.guide}:6: <port> is left as written" in run.stderr
    assert "warning:" not in run.stderr
    assert "--strict: the guides' warnings count as document errors" in run.stderr
    assert not marker.exists()
    listed = guide_runner(guide, "--strict", "--list")
    assert listed.returncode == 2 and f"[ERROR] {run.guide}:6: <port>" in listed.stderr
    assert guide_runner(guide).returncode == 0  # without --strict: a warning, and the run passes
    assert marker.exists()


def test_a_label_glued_to_its_language_or_typed_full_width_stops_the_run(guide_runner, tmp_path: Path) -> None:
    """Read as no label, the failing block was dropped and the guide passed, under --strict too."""
    marker = tmp_path / "ran"
    for label, fix in (
        ("bash#test-setup", "did you mean ```bash #test-setup? (a space between the language and the label)"),
        ("bash \N{FULLWIDTH NUMBER SIGN}test-setup", "did you mean #test-setup? (it is typed in full-width characters"),
    ):
        guide = f"""
            {FENCE}shell #test-setup
            touch {marker}
            {FENCE}

            {FENCE}{label}
            echo this setup fails; exit 1
            {FENCE}
            """
        for options in ((), ("--strict",)):
            run = guide_runner(guide, *options)
            assert run.returncode == 2, run.stdout + run.stderr
            assert f"[ERROR] {run.guide}:5: {label.split()[-1]!r} is not a label" in run.stderr
            assert fix in run.stderr
            assert not marker.exists()


def test_a_language_typed_full_width_is_said_with_the_word_to_type(guide_runner, tmp_path: Path) -> None:
    """An input method's full-width letters (U+FF53 for `s`, and so on) are not the language they look like: the
    error says so and what to type, as it does for a label typed so."""
    marker = tmp_path / "ran"
    for typed, meant in (("\uff53\uff48\uff45\uff4c\uff4c", "shell"), ("\uff42\uff41\uff53\uff48", "bash")):
        guide = f"""
            {FENCE}shell #test-setup
            touch {marker}
            {FENCE}

            {FENCE}{typed} #test-setup
            echo this setup fails; exit 1
            {FENCE}
            """
        run = guide_runner(guide)
        assert run.returncode == 2, run.stdout + run.stderr
        said = f"[ERROR] {run.guide}:5: the language {typed!r} is typed in full-width characters, as an input method"
        assert said in run.stderr
        assert f"type it in ASCII: {FENCE}{meant} #test-setup" in run.stderr
        assert not marker.exists()


def test_a_plain_fence_typed_full_width_is_an_error_not_a_fence_left_unrun(guide_runner, tmp_path: Path) -> None:
    """Read as plain fences, only ```shell runs: a full-width one was dropped, and the guide passed without it."""
    marker = tmp_path / "ran"
    for typed in ("\uff53\uff48\uff45\uff4c\uff4c", "\uff33\uff28\uff25\uff2c\uff2c"):  # in capitals too
        guide = f"""
            {FENCE}shell
            touch {marker}
            {FENCE}

            {FENCE}{typed}
            echo this step fails; exit 1
            {FENCE}
            """
        run = guide_runner(guide, "--dialect", "fences")
        assert run.returncode == 2, run.stdout + run.stderr
        said = f"[ERROR] {run.guide}:5: the language {typed!r} is typed in full-width characters, as an input method"
        assert said in run.stderr
        assert "its commands never run" in run.stderr and f"type it in ASCII: {FENCE}shell" in run.stderr
        assert not marker.exists()


def test_words_between_the_language_and_the_label_are_a_warning_an_error_under_strict(
    guide_runner, tmp_path: Path
) -> None:
    """As the reference engine reads it: the first word is the language, the words up to the label are ignored."""
    marker = tmp_path / "ran"
    guide = f"""
        {FENCE}shell title="Make the mark" #test-setup
        touch {marker}
        {FENCE}
        """
    warning = f"{tmp_path / 'guide.md'}:1: 'title=\"Make the mark\"' between the language and #test-setup is ignored:"
    strict = guide_runner(guide, "--strict")
    assert strict.returncode == 2, strict.stdout + strict.stderr
    assert f"[ERROR] {warning} write ```shell #test-setup" in strict.stderr
    assert not marker.exists()
    run = guide_runner(guide)
    assert run.returncode == 0, run.stdout + run.stderr
    assert f"warning: {warning}" in run.stderr
    assert marker.exists()  # run as the shell block it is


def test_a_labelled_fence_indented_into_code_is_a_warning_an_error_under_strict(guide_runner, tmp_path: Path) -> None:
    """Four spaces more than its list item wants make a fence an indented code block: shown, never run."""
    marker = tmp_path / "ran"
    guide = f"""
        1. Make the mark:

               {FENCE}shell #test-setup
               touch {marker}
               {FENCE}

        {FENCE}shell #test-setup
        echo the next step
        {FENCE}
        """
    where = f"{tmp_path / 'guide.md'}:3:"
    strict = guide_runner(guide, "--strict")
    assert strict.returncode == 2, strict.stdout + strict.stderr
    assert f"[ERROR] {where} this labelled fence is indented into an indented code block" in strict.stderr
    run = guide_runner(guide)
    assert run.returncode == 0, run.stdout + run.stderr
    assert f"warning: {where} this labelled fence is indented into an indented code block" in run.stderr
    assert "indent it as the text it belongs to" in run.stderr and not marker.exists()


def test_a_plain_fence_in_capitals_is_a_warning_naming_the_word_to_write_an_error_under_strict(
    guide_runner, tmp_path: Path
) -> None:
    """As the reference engine reads them, only ```shell runs: ```Shell, ```SHELL or ```Bash were dropped without a
    word and the guide passed. They still do not run (parity), but the run says so at the fence's line."""
    for typed, fix in (
        ("Shell", "write it in lower case: ```shell"),
        ("SHELL", "write it in lower case: ```shell"),
        ("Bash", "write ```shell to run it"),
    ):
        marker = tmp_path / f"ran-{typed}"
        guide = f"""
            {FENCE}shell
            echo ok
            {FENCE}

            {FENCE}{typed}
            touch {marker}
            {FENCE}
            """
        run = guide_runner(guide, "--dialect", "fences")
        assert run.returncode == 0, run.stdout + run.stderr
        said = f"warning: {run.guide}:5: this {FENCE}{typed} fence never runs"
        assert said in run.stderr and fix in run.stderr, run.stderr
        assert not marker.exists()
        strict = guide_runner(guide, "--dialect", "fences", "--strict")
        assert strict.returncode == 2, strict.stdout + strict.stderr
        assert f"[ERROR] {run.guide}:5: this {FENCE}{typed} fence never runs" in strict.stderr
        assert not marker.exists()


def test_an_expected_text_in_capitals_is_a_warning_too(guide_runner, tmp_path: Path) -> None:
    """```Text right after a run fence is no expected output: the output it shows would never be checked."""
    guide = f"""
        {FENCE}shell
        echo ok
        {FENCE}

        {FENCE}Text
        something else
        {FENCE}
        """
    run = guide_runner(guide, "--dialect", "fences")
    assert run.returncode == 0, run.stdout + run.stderr
    said = f"warning: {run.guide}:5: this {FENCE}Text fence is no expected output, so the output it shows is never"
    assert said in run.stderr and "write it in lower case: ```text" in run.stderr, run.stderr


def test_a_console_fence_typed_full_width_is_an_error_with_the_word_to_type(guide_runner, tmp_path: Path) -> None:
    """Read as a console session, only the first ```pycon fence runs: a full-width one before it (or alone) was
    left out, another session ran in its place or none was found, with no line to blame."""
    marker = tmp_path / "ran"
    typed = "\uff50\uff59\uff43\uff4f\uff4e"
    for rest in ("", f"\n{FENCE}pycon\n>>> open({str(marker)!r}, 'w').close()\n{FENCE}\n"):
        guide = f"# T\n\n{FENCE}{typed}\n>>> print(1)\n2\n{FENCE}\n{rest}"
        run = guide_runner(guide, "--dialect", "pycon")
        assert run.returncode == 2, run.stdout + run.stderr
        said = f"[ERROR] {run.guide}:3: the language {typed!r} is typed in full-width characters, as an input method"
        assert said in run.stderr, run.stderr
        assert "no console session runs from it" in run.stderr and f"type it in ASCII: {FENCE}pycon" in run.stderr
        assert not marker.exists()
