"""Operator guarantees: secrets masked everywhere, bounded memory on huge output, resources recorded."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ci.base.text import Masker, secret_values

FENCE = "```"


def test_secrets_are_masked_in_every_report(guide_runner, tmp_path: Path) -> None:
    summary = tmp_path / "summary.md"
    junit = tmp_path / "junit.xml"
    secret = "hf_s3cr3t_value_123"
    other = "named-by-flag-456"
    run = guide_runner(
        f"""
        {FENCE}shell #test-setup store="leak"
        echo "$HF_TOKEN"
        {FENCE}

        {FENCE}shell #test id="echo" load="leak>>L"
        echo "token=<L> other=$PLAIN_VALUE"
        echo "stderr $HF_TOKEN" >&2
        exit 1
        {FENCE}

        {FENCE}shell #test-result id="echo"
        token=<L>
        {FENCE}
        """,
        "--junit",
        str(junit),
        "--mask-env",
        "PLAIN_VALUE",
        env={
            "HF_TOKEN": secret,
            "PLAIN_VALUE": other,
            "GITHUB_ACTIONS": "true",
            "GITHUB_STEP_SUMMARY": str(summary),
        },
    )
    assert run.returncode == 1
    reports = {
        "console": run.stdout.replace(f"::add-mask::{secret}", "").replace(f"::add-mask::{other}", ""),
        "junit": junit.read_text(),
        "summary": summary.read_text(),
        "results.json": (run.output_dir / "results.json").read_text(),
    }
    for name, text in reports.items():
        assert secret not in text, f"secret leaked into {name}"
        assert other not in text, f"--mask-env value leaked into {name}"
    assert "token=***" in run.stdout and "stderr ***" in run.stdout
    assert f"::add-mask::{secret}" in run.stdout.splitlines()[0:3]
    assert json.loads(reports["results.json"])["blocks"][0]["captured"] == {"leak": "***"}
    # without --mask-files the files on disk keep everything: nothing is lost
    assert secret in (run.output_dir / run.block("leak")["stdout_path"]).read_text()


def test_only_values_secret_by_name_and_shape_are_masked(guide_runner, tmp_path: Path) -> None:
    # names that merely contain TOKEN, and plain words or numbers: masking them would hide them in the whole job
    run = guide_runner(
        f"""
        {FENCE}shell #test-setup store="config"
        echo "use_cache=$TOKENIZERS_PARALLELISM max=$MAX_NEW_TOKENS hf=$HF_TOKEN"
        echo "named $PLAIN_WORD"
        exit 1
        {FENCE}
        """,
        "--mask-env",
        "PLAIN_WORD",
        env={
            "TOKENIZERS_PARALLELISM": "false",
            "MAX_NEW_TOKENS": "1024",
            "HF_TOKEN": "offline",
            "PLAIN_WORD": "production",
            "GITHUB_ACTIONS": "true",
            "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md"),
        },
    )
    assert run.returncode == 1, run.stdout
    assert "::add-mask::" not in run.stdout
    assert "use_cache=false max=1024 hf=offline" in run.stdout
    assert "named production" in run.stdout


def test_a_secret_pasted_with_its_newline_is_masked_as_printed(guide_runner, tmp_path: Path) -> None:
    # `echo $X` (unquoted) and most tools print the value without its newline or CRLF
    token, key = "hf_pasted_value_789", "k3y-from-windows-42"
    run = guide_runner(
        f"""
        {FENCE}shell #test-setup store="print"
        echo "token="$HF_TOKEN" key="$API_KEY
        printf 'quoted=%s|\\n' "$HF_TOKEN"
        exit 1
        {FENCE}
        """,
        "--junit",
        str(tmp_path / "junit.xml"),
        env={"HF_TOKEN": token + "\n", "API_KEY": key + "\r\n"},
    )
    assert run.returncode == 1
    for name, text in {
        "console": run.stdout,
        "junit": (tmp_path / "junit.xml").read_text(),
        "results.json": (run.output_dir / "results.json").read_text(),
    }.items():
        assert token not in text and key not in text, f"secret leaked into {name}"
    assert "token=***" in run.stdout and "key=***" in run.stdout
    assert "quoted=***\n|" in run.stdout  # the newline the value brought is shown, not masked away


def test_a_secret_across_the_cut_of_a_long_output_shows_no_part(guide_runner, tmp_path: Path) -> None:
    # one long line: the head is cut 8 KiB in, the tail 16 KiB before the end, each through a secret
    token = "hf_cut_in_two_0123456789"
    run = guide_runner(
        f"""
        {FENCE}shell #test-setup store="long"
        head -c 8180 /dev/zero | tr '\\0' a; printf %s "$HF_TOKEN"
        head -c 40000 /dev/zero | tr '\\0' b; printf %s "$HF_TOKEN"
        head -c 16380 /dev/zero | tr '\\0' c
        exit 1
        {FENCE}

        {FENCE}shell #test id="long-mismatch"
        head -c 8180 /dev/zero | tr '\\0' a; printf %s "$HF_TOKEN"
        head -c 300000 /dev/zero | tr '\\0' b; printf %s "$HF_TOKEN"
        head -c 16380 /dev/zero | tr '\\0' c
        {FENCE}

        {FENCE}shell #test-result id="long-mismatch"
        not this
        {FENCE}
        """,
        "--keep-going",
        "--junit",
        str(tmp_path / "junit.xml"),
        env={"HF_TOKEN": token},
    )
    assert run.returncode == 1
    assert "omitted" in run.stdout
    for name, text in {"console": run.stdout, "junit": (tmp_path / "junit.xml").read_text()}.items():
        assert not any("a" + token[:n] in text for n in range(1, len(token))), f"a secret's head leaked into {name}"
        assert not any(token[-n:] + "c" in text for n in range(1, len(token))), f"a secret's tail leaked into {name}"


def test_a_secret_streamed_in_two_writes_is_masked(guide_runner) -> None:
    token = "hf_streamed_in_halves_42"
    run = guide_runner(
        f"""
        {FENCE}shell #test-setup
        printf 'before %s' "${{HF_TOKEN:0:10}}"
        sleep 1  # the live view reads what is written so far in between
        printf '%s after\\n' "${{HF_TOKEN:10}}"
        {FENCE}
        """,
        "--stream",
        env={"HF_TOKEN": token},
    )
    assert run.returncode == 0, run.stdout
    assert "before *** after" in run.stdout
    assert token[:10] not in run.stdout and token[10:] not in run.stdout


@pytest.mark.parametrize(
    ("name", "value", "masked"),
    [
        ("HF_TOKEN", "hf_abcdef123456", True),
        ("github_token", "ghp_abcdef123456", True),
        ("AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMI/K7MDENG", True),
        ("CLIENT_SECRET", "c1ient-s3cret", True),
        ("DB_PASSWORD_FILE_CONTENT", "pa55-word!", True),
        ("TOKEN", "t0ken-value", True),
        ("TOKENIZERS_PARALLELISM", "not-false-9", False),  # TOKEN inside a word is no convention
        ("MAX_NEW_TOKENS", "1024-tokens", False),
        ("MONKEY", "banana-42x", False),
        ("HF_TOKEN", "false", False),  # a plain word
        ("HF_TOKEN", "1234567890", False),  # a plain number
        ("HF_TOKEN", "1.2.3-4", True),
        ("HF_TOKEN", "ab1!", False),  # too short
        ("HF_TOKEN", "   \n", False),
    ],
)
def test_the_secret_rule(name: str, value: str, masked: bool) -> None:
    assert bool(Masker.of(secret_values({name: value})).secrets) is masked


def test_a_gibibyte_of_output_keeps_the_harness_small(guide_runner) -> None:
    run = guide_runner(
        f"""
        {FENCE}shell #test id="flood"
        yes "all work and no play" | head -c 1073741824
        echo
        echo "the end"
        {FENCE}

        {FENCE}shell #test-result id="flood"
        all work and no play
        ...
        the end
        {FENCE}
        """,
        "--verbose",  # a passing block's actual output is shown with -v
        timeout_s=600,
    )
    assert run.returncode == 0, run.stdout[-2000:]
    block = run.block("flood")
    assert block["stdout_bytes"] > 1 << 30
    assert (run.output_dir / block["stdout_path"]).stat().st_size == block["stdout_bytes"]
    assert "the end" in run.stdout  # the tail is shown
    assert len(run.stdout) < 200_000  # but not the gigabyte
    assert run.record["harness_peak_rss_bytes"] < 100 * 1024 * 1024
    (run.output_dir / block["stdout_path"]).unlink()  # a GiB is too much to leave in /tmp


def test_peak_memory_and_cpu_time_are_recorded(guide_runner) -> None:
    run = guide_runner(
        f"""
        {FENCE}python #test-setup
        import time
        data = bytearray(64 * 1024 * 1024)
        for i in range(0, len(data), 4096):
            data[i] = 1
        end = time.process_time() + 0.3
        while time.process_time() < end:
            pass
        time.sleep(0.3)
        {FENCE}
        """
    )
    assert run.returncode == 0
    block = run.blocks[0]
    assert block["peak_rss_bytes"] >= 64 * 1024 * 1024
    assert block["cpu_s"] >= 0.3


def test_setsid_nohup_server_is_found_and_ended(guide_runner, tmp_path: Path) -> None:
    pidfile = tmp_path / "server.pid"
    ready = tmp_path / "server.ready"
    # the interpreter itself: a `python` on PATH may be a shim (pyenv's is a script), seen under its own name
    # when the teardown comes before its exec. The block ends once the server runs: a teardown that came
    # while setsid and nohup were still exec'ing would see their command lines, not the server's
    run = guide_runner(
        f"""
        {FENCE}shell #test-setup
        setsid nohup {sys.executable} -c "import pathlib, time; pathlib.Path('{ready}').touch(); time.sleep(300)" >/dev/null 2>&1 < /dev/null &
        echo $! > {pidfile}
        until [ -e {ready} ]; do sleep 0.05; done
        {FENCE}
        """
    )
    assert run.returncode == 0
    ended = run.record["guides"][0]["processes_ended"]
    pid = int(pidfile.read_text())
    assert pid in [p["pid"] for p in ended]
    assert "time.sleep(300)" in next(p["command"] for p in ended if p["pid"] == pid)


def test_a_failed_stack_dump_is_one_line_and_the_kill_still_happens(guide_runner, tmp_path: Path) -> None:
    fake = tmp_path / "py-spy"
    fake.write_text("#!/bin/sh\necho 'Error: Permission denied (os error 13)' >&2\nexit 1\n")
    fake.chmod(0o755)
    run = guide_runner(
        f"""
        {FENCE}python #test-setup timeout='1'
        import time
        time.sleep(300)
        {FENCE}
        """,
        "--grace",
        "1",
        env={"GUIDE_GUARD_PY_SPY": str(fake)},
    )
    block = run.blocks[0]
    assert block["status"] == "timed_out"
    assert block["stack_dumps"] == []
    [note] = block["stack_dump_notes"]
    assert note.endswith("failed: Error: Permission denied (os error 13)")
    assert note in run.stdout


def test_output_is_on_disk_while_the_block_runs_even_if_the_harness_is_killed(
    tmp_path: Path, harness_env: dict[str, str]
) -> None:
    import os
    import signal
    import subprocess
    import sys
    import time

    guide = tmp_path / "g.md"
    guide.write_text(f"{FENCE}shell #test-setup\necho 'written before the crash'\nexec sleep 300\n{FENCE}\n")
    harness = subprocess.Popen(
        [sys.executable, "-m", "ci.run", str(guide), "--output-dir", str(tmp_path / "out")],
        cwd=tmp_path,
        env=harness_env,
        stdout=subprocess.DEVNULL,
    )
    stdout_file = tmp_path / "out" / "blocks" / "001-1.stdout.txt"
    for _ in range(200):
        if stdout_file.exists() and stdout_file.read_text():
            break
        time.sleep(0.05)
    harness.send_signal(signal.SIGKILL)
    harness.wait()
    assert stdout_file.read_text() == "written before the crash\n"
    # a SIGKILLed harness cannot clean up: end its block by hand (the fixture checks nothing is left)
    for line in subprocess.run(["pgrep", "-f", "^sleep 300$"], capture_output=True, text=True).stdout.split():
        environ = Path(f"/proc/{line}/environ").read_bytes()
        if f"GUIDE_GUARD_TEST_ID={harness_env['GUIDE_GUARD_TEST_ID']}".encode() in environ:
            os.kill(int(line), signal.SIGKILL)


def _run_harness_under(
    launcher: str, guide: Path, output_dir: Path, env: dict[str, str], **run: Any
) -> subprocess.CompletedProcess[Any]:
    """`python -m ci.run GUIDE` started by the Python program LAUNCHER (given the command line as its arguments)."""
    command = [sys.executable, "-m", "ci.run", str(guide), "--output-dir", str(output_dir)]
    return subprocess.run([sys.executable, "-c", launcher, *command], env=env, capture_output=True, timeout=120, **run)


def test_own_peak_memory_is_not_inherited_from_a_big_parent(tmp_path: Path, harness_env: dict[str, str]) -> None:
    # Linux carries ru_maxrss across exec: a harness started by a big process must not report its size
    guide = tmp_path / "g.md"
    guide.write_text(f"{FENCE}shell #test-setup\necho hi\n{FENCE}\n")
    launcher = (
        "import subprocess, sys\n"
        "ballast = bytearray(300 * 1024 * 1024)\n"
        "for i in range(0, len(ballast), 4096): ballast[i] = 1\n"
        "sys.exit(subprocess.run(sys.argv[1:]).returncode)\n"
    )
    done = _run_harness_under(launcher, guide, tmp_path / "out", harness_env)
    assert done.returncode == 0
    record = json.loads((tmp_path / "out" / "results.json").read_text())
    assert record["harness_peak_rss_bytes"] < 100 * 1024 * 1024


def test_a_daemon_that_drops_its_environment_is_still_ended(guide_runner, tmp_path: Path) -> None:
    pidfile = tmp_path / "bare.pid"
    run = guide_runner(
        f"""
        {FENCE}shell #test-setup
        setsid env -i sleep 300 >/dev/null 2>&1 < /dev/null &
        echo $! > {pidfile}
        {FENCE}
        """
    )
    assert run.returncode == 0
    pid = int(pidfile.read_text())
    assert pid in [p["pid"] for p in run.record["guides"][0]["processes_ended"]]


def test_a_harness_started_with_a_thousand_descriptors_open_still_waits_on_its_blocks(
    tmp_path: Path, harness_env: dict[str, str]
) -> None:
    """Descriptors 3..1023 taken by whoever started it: the harness's own get numbers past 1024."""
    guide = tmp_path / "g.md"
    guide.write_text(f"{FENCE}shell #test-setup\nsleep 0.3\necho waited\n{FENCE}\n")
    launcher = (
        "import os, resource, sys\n"
        "soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)\n"
        "resource.setrlimit(resource.RLIMIT_NOFILE, (min(4096, hard), hard))\n"
        "null = os.open(os.devnull, os.O_RDONLY)\n"
        "for fd in range(3, 1024):\n"
        "    if fd != null:\n"
        "        os.dup2(null, fd, inheritable=True)\n"
        "os.set_inheritable(null, True)\n"
        "os.execv(sys.argv[1], sys.argv[1:])\n"
    )
    done = _run_harness_under(launcher, guide, tmp_path / "o", harness_env, text=True)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    [block] = json.loads((tmp_path / "o" / "results.json").read_text())["blocks"]
    assert block["status"] == "passed" and block["captured"] == {}
