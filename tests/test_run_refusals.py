"""What the command line refuses before any block runs (exit 2): document errors, guides that cannot be read,
front matter no process can be given, absurd durations, unusable output places; and --help, answered at once."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

FENCE = "```"


def test_unusable_output_places_are_refused_before_anything_runs(guide_runner, tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    text = f"""
        {FENCE}shell #test-setup
        touch {marker}
        {FENCE}
        """
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    for args, says in [
        (("--junit", str(tmp_path)), "is a directory; name a file"),
        (("--junit", f"{a_file}/junit.xml"), "is a file, not a directory"),
    ]:
        run = guide_runner(text, *args)
        assert run.returncode == 2, run.stderr
        assert says in run.stderr and "[ERROR] --junit" in run.stderr
        assert not marker.exists()


def test_document_error_runs_nothing(guide_runner, tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    run = guide_runner(
        f"""
        {FENCE}shell #test-setup
        touch {marker}
        {FENCE}

        {FENCE}shell #test id="x"
        echo x
        {FENCE}

        {FENCE}shell #testing id="y"
        echo y
        {FENCE}
        """
    )
    assert run.returncode == 2
    assert "guide.md:5: #test id='x' has no #test-result" in run.stderr
    # the same guide's warnings come with its errors, so that one edit fixes both
    assert "warning: " in run.stderr and "guide.md:9: " in run.stderr and "#testing" in run.stderr
    assert not marker.exists()


def test_unreadable_and_non_utf8_guides_are_document_errors(tmp_path: Path, run_harness) -> None:
    bad = tmp_path / "latin1.md"
    bad.write_bytes(b"# Title\n\ncaf\xe9\n")
    for guide, message in (
        (bad, "latin1.md:3: the guide is not valid UTF-8"),
        (tmp_path / "missing.md", "cannot read the guide"),
    ):
        done = run_harness(str(guide))
        assert done.returncode == 2
        assert message in done.stderr


def test_help_is_fast_to_import() -> None:
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "ci.run", "--help"],
        capture_output=True,
        text=True,
        env={**os.environ},
    )
    assert done.returncode == 0
    for heavy in ("markdown_it", "yaml", "psutil", "requests"):
        assert f" {heavy}" not in done.stderr, f"--help imports {heavy}"


def test_front_matter_env_that_cannot_be_spawned_is_refused_before_any_block(guide_runner) -> None:
    """A name with `=` passed --list and then crashed at the first spawn; now nothing runs and the line is named."""
    run = guide_runner(
        f"""
        ---
        ci:
          env:
            "GREETING=x": hello
        ---
        {FENCE}shell #test-setup store="who"
        echo world
        {FENCE}
        """
    )
    assert run.returncode == 2, run.stdout + run.stderr
    assert "Traceback" not in run.stderr
    assert "guide.md:4: front matter ci.env: the name 'GREETING=x' contains '='" in run.stderr
    assert not (run.output_dir / "results.json").exists()


def test_front_matter_alias_bomb_is_refused_not_expanded(guide_runner) -> None:
    """Nine levels of nine aliases read as text are 9**9 strings: without the refusal this --list never ends."""
    levels = ['    l0: &l0 ["ha", "ha", "ha", "ha", "ha", "ha", "ha", "ha", "ha"]']
    levels += [f"    l{n}: &l{n} [{', '.join([f'*l{n - 1}'] * 9)}]" for n in range(1, 10)]
    text = (
        "---\nci:\n  upstream:\n" + "\n".join(levels) + f'\n---\n{FENCE}shell #test-setup store="x"\necho x\n{FENCE}\n'
    )
    run = guide_runner(text, "--list", timeout_s=60)
    assert run.returncode == 2, run.stdout + run.stderr
    assert "guide.md:5: front matter: YAML aliases (*name) are not allowed under ci" in run.stderr


def test_absurd_duration_options_are_usage_errors_naming_the_option(guide_runner) -> None:
    guide = f"""
        {FENCE}shell #test-setup store="x"
        echo x
        {FENCE}
        """
    for option, value in (("--timeout", "9" * 400), ("--grace", "200h"), ("--deadline", "8" * 400 + "h")):
        run = guide_runner(guide, option, value)
        assert run.returncode == 2, run.stdout + run.stderr
        assert f"[ERROR] {option}: duration" in run.stderr and "over the maximum of 7 days" in run.stderr
        assert not (run.output_dir / "results.json").exists()


def test_a_guide_with_no_runnable_block_is_a_usage_error(guide_runner) -> None:
    """It used to pass with exit 0, checking nothing; a misspelt label is the usual cause, so its warning stays."""
    text = f"""
        # Setup
        {FENCE}shell #testing-setup store="x"
        echo x
        {FENCE}
        """
    for args in ((), ("--list",)):
        run = guide_runner(text, *args)
        assert run.returncode == 2, run.stdout + run.stderr
        assert "guide.md: no runnable block, so there is nothing to check" in run.stderr
        # a near miss (#tset) is a document error of its own; only a farther word is the warning said here
        assert "a farther word such as #testing is ignored with a warning" in run.stderr
        assert "'#testing-setup' is not a label" in run.stderr
        assert not (run.output_dir / "results.json").exists()
