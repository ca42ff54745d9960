"""ci.collect and ci.diagnostics, end to end with real processes: what a red (or green) run keeps and explains."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
import time
import xml.etree.ElementTree as ET
from pathlib import Path

from ci.runner.collect import COLLECT_MAX_DIRECTORIES, collect_files
from ci.runner.predating import files_named

FENCE = "```"


def _wait_for(path: Path) -> None:
    for _ in range(600):
        if path.exists() and path.read_text().strip():
            return
        time.sleep(0.05)
    raise AssertionError(f"{path} never appeared")


def _start_harness(guide: Path, env: dict[str, str], *args: str) -> subprocess.Popen[str]:
    """`python -m ci.run GUIDE` started in the guide's directory (its output in out/ there), for a test to signal."""
    return subprocess.Popen(
        [sys.executable, "-m", "ci.run", str(guide), "--output-dir", str(guide.parent / "out"), *args],
        cwd=guide.parent,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _section(stdout: str, title_start: str) -> str:
    """The text of the job log's `--- title...` section, up to the next section or verdict line."""
    start = stdout.index(f"--- {title_start}")
    body = stdout[start:].split("\n", 1)[1]
    ends = [i for i in (body.find("\n--- "), body.find("\n[ERROR] [")) if i >= 0]
    return body[: min(ends)] if ends else body


# ---------------------------------------------------------------------------
# ci.collect


def test_collect_copies_matching_files_whatever_the_verdict(guide_runner, tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / "app").mkdir(parents=True)
    (home / "app" / "trace.txt").write_text("from home\n")
    absolute = tmp_path / "abs"
    absolute.mkdir()
    (absolute / "server-1.log").write_text("server one\n")
    run = guide_runner(
        f"""
        ---
        ci:
          collect: ["logs/*.log", "{absolute}/server-*.log", "~/app/*.txt", "/nowhere/*.log"]
        ---
        {FENCE}shell #test-setup
        mkdir -p logs
        echo "the trainer said this" > logs/train.log
        echo "ignored" > logs/train.txt
        exit 4
        {FENCE}
        """,
        env={"HOME": str(home)},
    )
    assert run.returncode == 1, run.stdout + run.stderr
    collected = run.record["guides"][0]["collected"]
    assert collected["directory"] == "collected"
    assert collected["cap_bytes"] == 64 * 1024 * 1024
    by_source = {f["source"]: f for f in collected["files"]}
    train = by_source[str(tmp_path / "logs" / "train.log")]
    assert train["pattern"] == "logs/*.log"
    assert train["copied_to"] == f"collected{tmp_path}/logs/train.log"
    assert (run.output_dir / train["copied_to"]).read_text() == "the trainer said this\n"
    assert (train["size_bytes"], train["copied_bytes"], train["truncated"], train["note"]) == (22, 22, False, "")
    assert (run.output_dir / by_source[str(absolute / "server-1.log")]["copied_to"]).read_text() == "server one\n"
    assert (run.output_dir / by_source[str(home / "app" / "trace.txt")]["copied_to"]).read_text() == "from home\n"
    assert len(by_source) == 3  # logs/train.txt matched nothing
    assert collected["unmatched"] == ["/nowhere/*.log"]
    # the job log says where the copies are and what matched nothing
    assert (
        f"collected 3 files (ci.collect, each capped at its last 64.0 MiB) into {run.output_dir}/collected"
        in run.stdout
    )
    assert f"  {tmp_path}/logs/train.log (22 B)\n" in run.stdout
    assert "  /nowhere/*.log: matched no file\n" in run.stdout


def test_collect_on_a_passing_run_and_without_the_key(guide_runner) -> None:
    guide = f"""
        {FENCE}shell #test-setup
        echo kept > run.log
        {FENCE}
        """
    run = guide_runner('---\nci:\n  collect: ["run.log"]\n---\n' + textwrap.dedent(guide))
    assert run.returncode == 0, run.stdout + run.stderr
    (entry,) = run.record["guides"][0]["collected"]["files"]
    assert (run.output_dir / entry["copied_to"]).read_text() == "kept\n"

    shutil.rmtree(run.output_dir)
    plain = guide_runner(guide)
    assert plain.record["guides"][0]["collected"] is None
    assert not (plain.output_dir / "collected").exists()
    assert "collected" not in plain.stdout


def test_collection_waits_until_the_runs_processes_are_ended(guide_runner, tmp_path: Path) -> None:
    # The background server writes its last words when the harness ends it at teardown: they must be in the copy.
    run = guide_runner(
        f"""
        ---
        ci:
          collect: ["server.log"]
        ---
        {FENCE}shell #test-setup
        ( trap 'echo "server: SIGTERM, shutting down" >> server.log; exit 0' TERM
          echo "server: up" >> server.log
          while :; do sleep 0.1; done ) &
        until [ -s server.log ]; do sleep 0.05; done
        {FENCE}
        """
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.record["guides"][0]["processes_ended"], "the background server should have been ended at teardown"
    (entry,) = run.record["guides"][0]["collected"]["files"]
    assert (run.output_dir / entry["copied_to"]).read_text() == "server: up\nserver: SIGTERM, shutting down\n"


def test_collect_says_what_it_could_not_copy_and_goes_on(guide_runner, tmp_path: Path) -> None:
    run = guide_runner(
        f"""
        ---
        ci:
          collect: ["odd/*", "after.log"]
        ---
        {FENCE}shell #test-setup
        mkdir -p odd/subdir
        mkfifo odd/fifo
        ln -s /nonexistent/file odd/dangling
        ln -s loop odd/loop
        echo fine > odd/plain.log
        echo after > after.log
        {FENCE}
        """
    )
    assert run.returncode == 0, run.stdout + run.stderr
    notes = {Path(f["source"]).name: f for f in run.record["guides"][0]["collected"]["files"]}
    assert notes["fifo"]["note"] == "not copied: a FIFO"
    assert notes["subdir"]["note"].startswith("not copied: a directory")
    assert notes["dangling"]["note"] == "not copied: cannot open it (No such file or directory)"
    assert notes["loop"]["note"].startswith("not copied: cannot open it (Too many levels of symbolic links")
    assert all(notes[name]["copied_to"] is None for name in ("fifo", "subdir", "dangling", "loop"))
    assert (run.output_dir / notes["plain.log"]["copied_to"]).read_text() == "fine\n"
    assert (run.output_dir / notes["after.log"]["copied_to"]).read_text() == "after\n"
    assert f"  {tmp_path}/odd/fifo: not copied: a FIFO\n" in run.stdout


def test_a_file_left_by_an_earlier_run_is_said_to_predate_this_one(guide_runner, tmp_path: Path) -> None:
    """Last night's server log at a fixed path is no news of tonight: the log, results.json and the summary say so."""
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "server.log").write_text("yesterday's server\n")
    os.utime(logs / "server.log", (1_700_000_000, 1_700_000_000))  # 2023-11-14 22:13:20 UTC
    summary = tmp_path / "summary.md"
    run = guide_runner(
        f"""
        ---
        ci:
          collect: ["logs/*.log"]
          diagnostics: ["tail -n 3 logs/server.log logs/train.log"]
        ---
        {FENCE}shell #test-setup
        echo "tonight's trainer" > logs/train.log
        exit 1
        {FENCE}
        """,
        env={"GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": str(summary)},
    )
    assert run.returncode == 1, run.stdout + run.stderr
    said = "last modified 2023-11-14 22:13:20 UTC, before this guide started: maybe an earlier run's"
    files = {Path(f["source"]).name: f for f in run.record["guides"][0]["collected"]["files"]}
    assert (files["server.log"]["predates_run"], files["server.log"]["modified_at"]) == (
        True,
        "2023-11-14T22:13:20+00:00",
    )
    assert files["train.log"]["predates_run"] is False  # written by a block of this run
    assert f"  {logs}/server.log (19 B): {said}\n" in run.stdout
    assert f"  {logs}/train.log (18 B)\n" in run.stdout
    # the diagnostic read both: only the old one is named
    diagnostic = run.blocks[0]["diagnostics"][0]
    assert diagnostic["predating_files"] == [{"path": f"{logs}/server.log", "modified_at": "2023-11-14T22:13:20+00:00"}]
    assert _section(run.stdout, "files diagnostic 1 names that predate this guide").split("\n")[1] == (
        f"{logs}/server.log: {said}"
    )
    assert f"`{logs}/server.log`: {said}" in summary.read_text(encoding="utf-8")
    assert "train.log" not in summary.read_text(encoding="utf-8")


def test_the_files_a_diagnostic_names_are_its_words_that_are_files(tmp_path: Path) -> None:
    (tmp_path / "a.log").write_text("a")
    (tmp_path / "b.log").write_text("b")
    (tmp_path / "sub").mkdir()
    command = f"tail -n 50 a.log; cat {tmp_path}/b.log <{tmp_path}/a.log 2>/dev/null | grep -v x sub nothing.log"
    assert files_named(command, str(tmp_path)) == [str(tmp_path / "a.log"), str(tmp_path / "b.log")]
    assert files_named("cat *.log", str(tmp_path)) == [str(tmp_path / "a.log"), str(tmp_path / "b.log")]
    assert files_named("cat ~/a.log 'unbalanced", str(tmp_path), home=str(tmp_path)) == [str(tmp_path / "a.log")]


def test_collect_keeps_the_end_of_a_file_over_the_cap(tmp_path: Path) -> None:
    log = tmp_path / "big.log"
    log.write_bytes(b"".join(b"line %05d\n" % n for n in range(1000)))  # 11000 bytes
    collection = collect_files(["*.log"], workdir=str(tmp_path), destination=tmp_path / "out", cap_bytes=110)
    (entry,) = collection.files
    assert (entry.size_bytes, entry.copied_bytes, entry.truncated) == (11000, 110, True)
    assert Path(entry.copied_to or "").read_bytes() == b"".join(b"line %05d\n" % n for n in range(990, 1000))


def test_collect_stops_at_the_total_and_names_stay_apart(tmp_path: Path) -> None:
    for name in ("a", "b", "c"):
        (tmp_path / f"{name}.log").write_bytes(name.encode() * 100)
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "a.log").write_bytes(b"s" * 10)
    collection = collect_files(
        ["*.log", "**/a.log"], workdir=str(tmp_path), destination=tmp_path / "out", total_bytes=250
    )
    kept = {Path(f.source).relative_to(tmp_path).as_posix(): f for f in collection.files}
    assert list(kept) == ["a.log", "b.log", "c.log", "sub/a.log"]  # a.log matched twice, listed once
    assert [kept[n].copied_bytes for n in kept] == [100, 100, 50, 0]
    assert kept["c.log"].truncated and "250 B in all was used up" in kept["c.log"].note
    assert Path(kept["c.log"].copied_to or "").read_bytes() == b"c" * 50
    assert Path(kept["a.log"].copied_to or "").read_bytes() == b"a" * 100
    assert kept["sub/a.log"].copied_to != kept["a.log"].copied_to


def test_collect_copies_a_growing_file_as_it_was_when_the_copy_started(tmp_path: Path) -> None:
    log = tmp_path / "growing.log"
    with open(log, "wb") as handle:
        handle.truncate(48 * 1024 * 1024)  # sparse: a long copy, while a real process keeps appending
    start_bytes = log.stat().st_size
    program = f"import time\nwith open({str(log)!r}, 'ab', buffering=0) as f:\n    while True:\n        f.write(b'x' * 4096)\n        time.sleep(0.001)"
    writer = subprocess.Popen([sys.executable, "-c", program])
    try:
        while log.stat().st_size == start_bytes:  # it is writing
            time.sleep(0.01)
        collection = collect_files([str(log)], workdir=str(tmp_path), destination=tmp_path / "out")
    finally:
        writer.kill()
        writer.wait()
    (entry,) = collection.files
    copy = Path(entry.copied_to or "").read_bytes()
    assert not entry.truncated
    assert len(copy) == entry.copied_bytes == entry.size_bytes  # not a byte of what came after the start
    with open(log, "rb") as handle:
        assert handle.read(len(copy)) == copy
    assert entry.size_bytes < log.stat().st_size
    assert entry.note == "" or entry.note.startswith("it grew by")


def test_several_guides_collect_apart(tmp_path: Path, run_harness) -> None:
    guides = []
    for number, word in ((1, "one"), (2, "two")):
        guide = tmp_path / f"g{number}.md"
        guide.write_text(
            f'---\nci:\n  collect: ["same.log"]\n---\n{FENCE}shell #test-setup\necho {word} > same.log\n{FENCE}\n'
        )
        guides.append(str(guide))
    done = run_harness(*guides, "--output-dir", str(tmp_path / "out"), timeout_s=120)
    assert done.returncode == 0, done.stdout + done.stderr
    record = json.loads((tmp_path / "out" / "results.json").read_text())
    copies = [g["collected"]["files"][0]["copied_to"] for g in record["guides"]]
    assert copies == [f"collected/1-g1{tmp_path}/same.log", f"collected/2-g2{tmp_path}/same.log"]
    assert [(tmp_path / "out" / c).read_text() for c in copies] == ["one\n", "two\n"]


def test_an_interrupted_run_still_collects(tmp_path: Path, harness_env: dict[str, str]) -> None:
    guide = tmp_path / "long.md"
    guide.write_text(
        f'---\nci:\n  collect: ["work.log"]\n---\n{FENCE}shell #test-setup\necho "got this far" > work.log\nsleep 600\n{FENCE}\n'
    )
    harness = _start_harness(guide, harness_env)
    _wait_for(tmp_path / "work.log")
    harness.send_signal(signal.SIGTERM)
    stdout, stderr = harness.communicate(timeout=60)
    assert harness.returncode == 143, stdout + stderr
    collected = json.loads((tmp_path / "out" / "results.json").read_text())["guides"][0]["collected"]
    (entry,) = collected["files"]
    assert (tmp_path / "out" / entry["copied_to"]).read_text() == "got this far\n"
    assert collected["cap_bytes"] == 4 * 1024 * 1024  # less of each file while the run is stopping


def test_a_stop_signal_during_the_collection_cuts_it_to_the_stopping_limits(
    tmp_path: Path, harness_env: dict[str, str]
) -> None:
    # 16 files of 64 MiB (sparse): copying them whole, 1 GiB, would outlast the 2 s a stop may take many times over
    guide = tmp_path / "big.md"
    guide.write_text(
        f'---\nci:\n  collect: ["big/*.log"]\n---\n{FENCE}shell #test-setup\n'
        f"mkdir big\nfor n in $(seq 10 25); do truncate -s 64M big/$n.log; done\n{FENCE}\n"
    )
    harness = _start_harness(guide, harness_env)
    try:
        while not (tmp_path / "out" / "collected").exists() and harness.poll() is None:
            time.sleep(0.005)  # the first copy has begun
        harness.send_signal(signal.SIGTERM)
        stdout, stderr = harness.communicate(timeout=60)
    finally:
        harness.kill()
    assert harness.returncode == 143, stdout + stderr
    (recorded,) = json.loads((tmp_path / "out" / "results.json").read_text())["guides"]
    assert recorded["interrupted_by_signal"] == signal.SIGTERM
    collected = recorded["collected"]
    files = collected["files"]
    assert len(files) == 16
    after_the_signal = [f for f in files if "the run was stopping" in f["note"]]
    assert after_the_signal, "every file was copied whole although a stop signal came during the copies"
    # from the signal on, at most the stopping cap of each file is kept, its end
    assert all(f["copied_bytes"] <= 4 * 1024 * 1024 for f in after_the_signal)
    assert sum(f["copied_bytes"] for f in files) < 16 * 64 * 1024 * 1024
    assert any("a stop signal came during the collection" in note for note in collected["notes"])


def test_a_glob_does_not_follow_symbolic_links_into_a_loop(guide_runner, tmp_path: Path) -> None:
    # Two links back up the tree: a walk following them visits paths without end (the run never ended)
    run = guide_runner(
        f"""
        ---
        ci:
          collect: ["loop/**/*.log"]
        ---
        {FENCE}shell #test-setup
        mkdir -p loop/a/b
        ln -s .. loop/a/up
        ln -s ../.. loop/a/up2
        echo top > loop/top.log
        echo deep > loop/a/b/deep.log
        {FENCE}
        """,
        timeout_s=60,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    collected = run.record["guides"][0]["collected"]
    sources = [Path(f["source"]).relative_to(tmp_path).as_posix() for f in collected["files"]]
    assert sources == ["loop/a/b/deep.log", "loop/top.log"]
    assert collected["notes"] == []


def test_a_glob_search_stops_at_its_directory_limit_and_says_so(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    for number in range(COLLECT_MAX_DIRECTORIES + 1):
        (tree / f"d{number:05d}").mkdir(parents=True)
    (tree / "first.log").write_text("found\n")
    collection = collect_files(["tree/**/*.log"], workdir=str(tmp_path), destination=tmp_path / "out")
    assert [Path(f.source).name for f in collection.files] == ["first.log"]
    (note,) = collection.notes
    assert note == (
        f"tree/**/*.log: the search stopped after listing {COLLECT_MAX_DIRECTORIES:,} directories (the limit);"
        " files further on were not looked for"
    )


# ---------------------------------------------------------------------------
# ci.diagnostics


def test_a_failing_block_gets_its_diagnostics(guide_runner, tmp_path: Path) -> None:
    run = guide_runner(
        f"""
        ---
        ci:
          diagnostics:
            - 'echo "card 0: OK"; echo "dmesg: not permitted" >&2'
            - echo partial; exit 3
            - "echo still runs: after a failing one"
        ---
        # Train
        {FENCE}shell #test-setup
        echo "trainer crashed" >&2; exit 1
        {FENCE}

        {FENCE}shell #test-setup
        echo never
        {FENCE}
        """,
        "--junit",
        str(tmp_path / "junit.xml"),
    )
    assert run.returncode == 1, run.stdout + run.stderr
    first = run.blocks[0]
    assert run.blocks[1]["status"] == "not_run" and run.blocks[1]["diagnostics"] == []
    diagnostics = first["diagnostics"]
    assert [d["command"] for d in diagnostics] == [
        'echo "card 0: OK"; echo "dmesg: not permitted" >&2',
        "echo partial; exit 3",
        "echo still runs: after a failing one",
    ]
    assert [(d["exit_code"], d["message"], d["timed_out"]) for d in diagnostics] == [
        (0, "exit 0", False),
        (3, "exit 3", False),
        (0, "exit 0", False),
    ]
    # saved beside the block's own files, stdout and stderr together
    assert all(d["output_path"].startswith("blocks/001-1.diagnostics/") for d in diagnostics)
    assert (run.output_dir / diagnostics[0]["output_path"]).read_text() == "card 0: OK\ndmesg: not permitted\n"
    assert diagnostics[0]["output_bytes"] == len("card 0: OK\ndmesg: not permitted\n")
    # printed in the failing block's report, before its verdict line
    report = run.stdout[run.stdout.index("==> [1/2]") : run.stdout.index("[ERROR] [1/2]")]
    assert '--- diagnostic 1/3: echo "card 0: OK"; echo "dmesg: not permitted" >&2 (exit 0, 32 B in' in report
    assert _section(report, "diagnostic 1/3") == "card 0: OK\ndmesg: not permitted"
    assert _section(report, "diagnostic 2/3").strip() == "partial"
    assert "--- diagnostic 2/3: echo partial; exit 3 (exit 3, 8 B in" in report
    # and in the JUnit failure text
    failure = ET.parse(tmp_path / "junit.xml").find(".//failure")
    assert failure is not None and "card 0: OK" in (failure.text or "")


def test_a_hanging_diagnostic_is_cut_at_its_limit_with_its_tree(guide_runner, tmp_path: Path) -> None:
    # Its background child ignores SIGTERM; the test_id fixture fails the test if anything survives.
    run = guide_runner(
        f"""
        ---
        ci:
          diagnostics_timeout: 1s
          diagnostics:
            - "(trap '' TERM; sleep 600) & echo $! > {tmp_path}/child.pid; echo hanging; sleep 600"
            - 'if kill -0 "$(cat {tmp_path}/child.pid)" 2>/dev/null; then echo alive; else echo gone; fi'
        ---
        {FENCE}shell #test id="t"
        echo wrong
        {FENCE}

        {FENCE}shell #test-result id="t"
        right
        {FENCE}
        """,
        timeout_s=60,
    )
    assert run.returncode == 1, run.stdout + run.stderr
    block = run.block("t")
    assert block["status"] == "mismatch"
    hung, after = block["diagnostics"]
    assert (hung["timed_out"], hung["exit_code"]) == (True, None)
    assert hung["message"] == "timed out after 1s; its process tree was ended"
    assert (run.output_dir / hung["output_path"]).read_text() == "hanging\n"
    assert after["message"] == "exit 0"
    # the child that ignored SIGTERM was killed before the next diagnostic started, not left to the teardown
    assert (run.output_dir / after["output_path"]).read_text() == "gone\n"
    assert "(timed out after 1s; its process tree was ended, 8 B in" in run.stdout


def test_a_timed_out_block_gets_diagnostics_and_their_output_is_capped(guide_runner) -> None:
    run = guide_runner(
        f"""
        ---
        ci:
          diagnostics: ["yes diagnostic"]
        ---
        {FENCE}shell #test-setup timeout='1'
        sleep 600
        {FENCE}
        """,
        timeout_s=60,
    )
    assert run.returncode == 1
    (diagnostic,) = run.blocks[0]["diagnostics"]
    assert run.blocks[0]["status"] == "timed_out"
    assert diagnostic["output_capped"] is True
    assert diagnostic["output_bytes"] == 1024 * 1024
    assert diagnostic["message"] == "stopped at the 1 MiB output cap"
    shown = _section(run.stdout, "diagnostic 1/1")
    assert "omitted; the whole stream is on disk" in shown and len(shown) < 32 * 1024


def test_nothing_runs_when_every_block_passed(guide_runner, tmp_path: Path) -> None:
    run = guide_runner(
        f"""
        ---
        ci:
          diagnostics: ["touch {tmp_path}/diagnosed"]
        ---
        {FENCE}shell #test-setup
        exit 0
        {FENCE}

        {FENCE}shell #test-setup skip='not today'
        exit 1
        {FENCE}
        """
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert not (tmp_path / "diagnosed").exists()
    assert all(b["diagnostics"] == [] for b in run.blocks)
    assert "diagnostic" not in run.stdout


def test_a_stop_request_during_a_diagnostic_ends_it_and_the_rest(tmp_path: Path, harness_env: dict[str, str]) -> None:
    flag = tmp_path / "diagnosing"
    guide = tmp_path / "g.md"
    guide.write_text(
        f"---\nci:\n  diagnostics_timeout: 600s\n  diagnostics:\n"
        f'    - "echo yes > {flag}; sleep 600"\n    - "touch {tmp_path}/second"\n---\n'
        f"{FENCE}shell #test-setup\nexit 1\n{FENCE}\n\n{FENCE}shell #test-setup\necho never\n{FENCE}\n"
    )
    harness = _start_harness(guide, harness_env, "--keep-going")
    killer = threading.Timer(120, harness.kill)  # a harness that ignored the signal would wait 600 s
    killer.start()
    try:
        _wait_for(flag)
        harness.send_signal(signal.SIGTERM)
        stdout, stderr = harness.communicate(timeout=150)
    finally:
        killer.cancel()
    assert harness.returncode == 143, stdout + stderr
    record = json.loads((tmp_path / "out" / "results.json").read_text())
    first, second = record["blocks"]
    assert first["status"] == "failed"
    (diagnostic,) = first["diagnostics"]
    assert diagnostic["message"] == "interrupted by SIGTERM; its process tree was ended"
    assert second["status"] == "not_run" and second["message"] == "run interrupted by SIGTERM"
    assert not (tmp_path / "second").exists()


def test_diagnostics_run_in_the_blocks_environment(guide_runner, tmp_path: Path) -> None:
    run = guide_runner(
        f"""
        ---
        ci:
          env:
            CARD: "npu-3"
          diagnostics: ["echo $CARD in $PWD"]
        ---
        {FENCE}shell #test-setup
        false
        {FENCE}
        """,
        "--workdir",
        str(tmp_path),
    )
    (diagnostic,) = run.blocks[0]["diagnostics"]
    assert (run.output_dir / diagnostic["output_path"]).read_text() == f"npu-3 in {tmp_path}\n"
    assert os.path.isfile(run.output_dir / diagnostic["output_path"])


def test_diagnostics_started_before_the_deadline_get_no_more_than_their_share(guide_runner) -> None:
    # Each would hang for 600 s, its own limit: the first starts before the deadline, the second after it.
    # Run to their limits, the run would take 20 minutes; cut to the time left (at least 10 s), well under a minute.
    run = guide_runner(
        f"""
        ---
        ci:
          diagnostics_timeout: 600s
          diagnostics: ["sleep 600", "sleep 600"]
        ---
        {FENCE}shell #test-setup
        exit 1
        {FENCE}
        """,
        "--deadline",
        "6s",
        timeout_s=90,
    )
    assert run.returncode == 1, run.stdout + run.stderr
    diagnostics = run.blocks[0]["diagnostics"]
    assert [(d["timed_out"], d["message"]) for d in diagnostics] == [
        (True, "timed out after 10s; its process tree was ended"),
        (True, "timed out after 10s; its process tree was ended"),
    ]
