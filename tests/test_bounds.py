"""What the harness keeps bounded whatever a guide or its blocks do: report sizes, guides read from URLs, stderr scans."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FENCE = "```"
REPORT_LIMIT_BYTES = 200_000  # every report stays under this, whatever the value's size


def _sparse_stderr_block(name: str, marker: str, offset: str) -> str:
    """A setup whose stderr file it makes 20 GiB long (sparse: no disk) with MARKER written at OFFSET bytes."""
    return f"""
        {FENCE}python #test-setup id="{name}"
        import os
        size = 20 * 2**30
        with open(os.readlink("/proc/self/fd/2"), "r+b") as stderr:
            stderr.truncate(size)
            stderr.seek({offset})
            stderr.write(b"{marker}\\n")
        {FENCE}
        """


def test_error_markers_are_looked_for_in_the_first_and_last_8_mib_of_a_huge_stderr(guide_runner) -> None:
    """The whole stderr was scanned: a block making it 20 GiB (sparse, at no cost to itself) held the run 81 s."""
    run = guide_runner(
        _sparse_stderr_block("middle", "MIDDLE_MARK", "size // 2")
        + _sparse_stderr_block("late", "LATE_MARK", "size - 2**20 + 100"),
        "--error-marker",
        "MIDDLE_MARK",
        "--error-marker",
        "LATE_MARK",
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr
    middle, late = run.block("middle"), run.block("late")
    assert middle["stderr_bytes"] == late["stderr_bytes"] == 20 * 2**30
    assert middle["error_marker"] is None  # only in the part not scanned
    assert late["error_marker"] == "LATE_MARK"
    assert "--- stderr (20.0 GiB, contains 'LATE_MARK')" in run.stdout
    assert len(run.stdout.encode()) < REPORT_LIMIT_BYTES
    docs = (REPO / "docs" / "authoring.md").read_text(encoding="utf-8")
    assert "looked for in the first and last 8 MiB of stderr" in docs
