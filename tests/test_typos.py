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
