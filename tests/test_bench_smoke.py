"""The benchmark scripts run end to end on tiny sizes and print their tables (no timing assertions)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

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


def test_overhead_bench_runs() -> None:
    done = run_script("bench/overhead.py", "--sizes", "3,5", "--repeat", "1")
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert any(line.split()[:1] == ["N"] and "ci/bash" in line and "ci/baseline" in line for line in lines), done.stdout
    rows = [line.split() for line in lines if line.split()[:1] in (["3"], ["5"])]
    assert [row[0] for row in rows] == ["3", "5"], done.stdout
    for row in rows:
        assert row[4].endswith("x") and row[5].endswith("x"), row


def test_overhead_bench_reports_the_target() -> None:
    done = run_script("bench/overhead.py", "--sizes", "200", "--repeat", "1")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "target at N=200" in done.stdout


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
    throughput_rows = [line.split() for line in out.splitlines() if line.split()[:1] == ["1"]]
    assert [row[1] for row in throughput_rows] == ["1", "10"], out
    assert "adversarial family" in out
    assert out.count("...a...b") >= 2 and out.count("...a...a...b") >= 2, out
