"""The benchmark scripts run end to end on tiny sizes and print their tables (no timing assertions)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

# a layer of its own beside the suite (pyproject's addopts deselect it; .ci/run runs it with -m bench)
pytestmark = pytest.mark.bench

REPO = Path(__file__).resolve().parents[1]


def run_script(*argv: str, timeout_s: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *argv],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout_s,
        stdin=subprocess.DEVNULL,
    )


def table_rows(out: str, header_first: str) -> tuple[list[str], list[list[str]]]:
    """The header (split) of the first table whose header starts with `header_first`, and its rows until a blank line."""
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.split()[:1] == [header_first])
    rows = []
    for line in lines[start + 2 :]:  # header, then a rule
        if not line.strip():
            break
        rows.append(line.split())
    return lines[start].split(), rows


def test_resume_bench_runs() -> None:
    done = run_script("bench/resume.py", "--scale", "0.02", "--repeat", "1", "--rehearsal-repeat", "0")
    assert done.returncode == 0, done.stdout + done.stderr
    _, rows = table_rows(done.stdout, "run")
    blocks_run = {" ".join(row[:-3]): int(row[-3]) for row in rows}
    assert blocks_run == {
        "first run (fails at train)": 8,
        "after the fix: whole guide": 9,
        "after the fix: --resume": 3,
        "saved by --resume": 6,
    }, done.stdout
    assert "--resume ran: start-server, train, monitor" in done.stdout


def test_overhead_bench_runs() -> None:
    done = run_script("bench/overhead.py", "--sizes", "3,5", "--repeat", "1")
    assert done.returncode == 0, done.stdout + done.stderr
    header, rows = table_rows(done.stdout, "N")
    assert "ci/bash" in header and "ci/baseline" in header, done.stdout
    assert [row[0] for row in rows] == ["3", "5"], done.stdout
    ratio_count = len([word for word in header if word.startswith("ci/")])
    for row in rows:
        ratios = row[-ratio_count - 1 : -1]  # before the last column, ci ms/block
        assert len(ratios) == ratio_count and all(cell.endswith("x") or cell == "-" for cell in ratios), row
        assert float(row[-1]) > 0, row
    assert "fixed and per-block cost of ci.run at N=5" in done.stdout
    assert "marginal cost per block" in done.stdout


def test_overhead_bench_reports_the_target() -> None:
    done = run_script("bench/overhead.py", "--sizes", "200", "--repeat", "1")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "target at N=200" in done.stdout
    assert "all 200 blocks skip=''" in done.stdout


def test_overhead_bench_rejects_bad_sizes() -> None:
    done = run_script("bench/overhead.py", "--sizes", "0")
    assert done.returncode == 2
    assert "sizes" in done.stderr


def test_matching_bench_runs() -> None:
    done = run_script(
        "bench/matching.py",
        "--sizes",
        "1",
        "--wildcards",
        "1,10",
        "--repeat",
        "1",
        "--adversarial-n",
        "50,100",
        "--adversarial-repeats",
        "1,2",
        "--regex-timeout",
        "1",
    )
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert "match_file throughput" in out and "MB/s" in out
    header, rows = table_rows(out, "size")
    assert "regex" in header, out
    assert [row[1] for row in rows] == ["1", "10"], out
    assert "adversarial family" in out
    assert out.count("...a...b") >= 2 and out.count("...a...a...b") >= 2, out
    assert "growth exponent" in out


def test_signals_bench_runs() -> None:
    done = run_script("bench/signals.py", "--grace", "1", "--repeat", "1")
    assert done.returncode == 0, done.stdout + done.stderr
    header, rows = table_rows(done.stdout, "situation")
    assert header[:5] == ["situation", "signal", "exit", "reports", "left"], done.stdout
    statuses = {" ".join(row[:-7]): row[-7:-4] for row in rows}  # names have spaces; then time, (worst), <=, target
    assert statuses == {
        "waiting on a block SIGTERM": ["143", "all", "0"],
        "grace period SIGTERM": ["143", "all", "0"],
        "stack dump SIGTERM": ["143", "all", "0"],
        "teardown SIGTERM": ["143", "all", "0"],
        "second signal SIGTERM+SIGINT": ["143", "all", "0"],
        "SIGHUP, a block SIGHUP": ["129", "all", "0"],
    }, done.stdout


def test_leftovers_bench_runs_beside_an_older_revision() -> None:
    done = run_script("bench/leftovers.py", "--counts", "3,6", "--repeat", "1", "--grace", "1", "--against", "HEAD")
    assert done.returncode == 0, done.stdout + done.stderr
    header, rows = table_rows(done.stdout, "leftovers")
    assert header.count("reports") == 2 and header.count("left") == 2, done.stdout  # this tree, then HEAD's code
    reported = ["143", "all", "0"]  # exit status, reports, left running
    cells = [(row[0], row[2:5], row[8:11]) for row in rows]  # count | this tree | HEAD
    assert cells == [("3", reported, reported), ("6", reported, reported)], done.stdout
    assert "growth exponent" in done.stdout


def test_run_all_quick_writes_the_document(tmp_path: Path) -> None:
    done = run_script("bench/run.py", "--quick", "--out-dir", str(tmp_path))
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    for title in ("Overhead", "Reference", "Matching", "Memory", "Timeouts", "Startup", "Resume", "Search", "Summary"):
        assert f"== {title}" in out, out
    summary = out[out.index("== Summary") :]
    assert "verdict" in summary
    for benchmark in ("overhead", "reference", "matching", "memory", "timeouts", "startup", "resume", "search"):
        assert f"\n{benchmark} " in summary, summary
    document = (tmp_path / "performance.md").read_text(encoding="utf-8")
    assert "Quick run" in document
    for heading in ("## Summary", "## Machine", "## How to reproduce", "## Overhead", "## Timeouts"):
        assert heading in document, document
    for fact in ("| CPU |", "| memory |", "| kernel |", "| Python |", "| temp dir |"):
        assert fact in document, document
    plots = sorted(path.name for path in tmp_path.glob("performance-*.png"))
    if plots:
        assert plots == ["performance-adversarial.png", "performance-matching.png", "performance-overhead.png"]
    else:
        assert "matplotlib is not installed" in document


def test_run_all_rejects_unknown_benchmarks() -> None:
    done = run_script("bench/run.py", "--quick", "--only", "overhead,nothing")
    assert done.returncode == 2
    assert "choose from" in done.stderr


def test_search_bench_runs_and_the_verdicts_agree() -> None:
    done = run_script("bench/search.py", "--sizes", "1000,4000", "--repeat", "1", "--regex-timeout", "20")
    assert done.returncode == 0, done.stdout + done.stderr
    _, rows = table_rows(done.stdout, "case")
    assert [(row[0], row[1]) for row in rows] == [
        ("log", "1000"),
        ("log", "4000"),
        ("adversarial", "1000"),
        ("adversarial", "4000"),
    ], done.stdout
    assert all(row[-1] == "same" for row in rows), done.stdout  # the reference's regex finds what ours finds
    assert "growth exponent of ours (adversarial):" in done.stdout


def test_reference_bench_runs_without_the_reference() -> None:
    done = run_script("bench/reference.py", "--sizes", "2,4", "--list-sizes", "10,40", "--repeat", "1")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "reference: not given (--reference DIR" in done.stdout, done.stdout
    header, rows = table_rows(done.stdout, "N")
    assert header[:4] == ["N", "floor", "s", "R"], done.stdout
    assert [(row[0], row[2]) for row in rows] == [("2", "-"), ("4", "-")], done.stdout  # R skipped, its column "-"
    _, listed = table_rows(done.stdout, "blocks")
    assert [row[0] for row in listed] == ["10", "40"], done.stdout
    assert "per-block cost, 2->4 blocks" in done.stdout
    assert "--list of 40 blocks vs 10" in done.stdout


def test_reference_bench_names_a_checkout_that_is_not_one(tmp_path: Path) -> None:
    done = run_script(
        "bench/reference.py", "--reference", str(tmp_path), "--sizes", "2", "--list-sizes", "10", "--repeat", "1"
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"reference: {tmp_path} has no src/workflows/markdown_doc_test_base.py" in done.stdout, done.stdout
