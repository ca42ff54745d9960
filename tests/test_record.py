"""results.json and its contract: real runs validate against docs/results.schema.json, and the reader reads them back."""

from __future__ import annotations

import hashlib
import json
import subprocess
import textwrap
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from ci.guide.model import Label, Load, Status, Step
from ci.guide.parse import parse_guide
from ci.guide.plan import build_plan
from ci.maintain.lastrun import recheck
from ci.record import RECORD_FILE, RECORD_VERSION, RecordError, block_from_json, read_record, read_run, run_record
from ci.record.outcome import (
    Attempt,
    BlockResult,
    BoundedText,
    CollectedFile,
    Collection,
    DiagnosticResult,
    Divergence,
    EarlierRun,
    GuideOutcome,
    MatchReport,
    PredatingFile,
    TrackedProcess,
)

REPO = Path(__file__).resolve().parents[1]
RECORD_0_2_0 = REPO / "tests" / "fixtures" / "results-0.2.0" / RECORD_FILE  # version 4, written by guide-guard 0.2.0
SCHEMA = json.loads((REPO / "docs" / "results.schema.json").read_text(encoding="utf-8"))
FENCE = "```"

# Two guides in one run: every verdict a block can get without a timeout, a hidden setup that stores, a
# result that loads, ci.collect (one glob matching nothing) and ci.diagnostics after a failure.
FIRST = f"""
---
ci:
  collect: ["logs/*.log", "/nowhere/*.log"]
  diagnostics:
    - 'echo "card 0: OK"'
---
# Prepare

<!--
{FENCE}shell #test-setup store="WORD"
mkdir -p logs && echo "trained" > logs/train.log
echo hello
{FENCE}
-->

{FENCE}shell #test id="greets" load="WORD>>W"
echo "<W> world"
{FENCE}

{FENCE}shell #test-result id="greets" load="WORD>>W"
<W> world
{FENCE}

{FENCE}shell #test id="elsewhere" skip='not on this machine'
echo never
{FENCE}

{FENCE}shell #test-result id="elsewhere"
never
{FENCE}

{FENCE}shell #test id="drifted"
echo "version 1.3"
{FENCE}

{FENCE}shell #test-result id="drifted"
version 1.2
{FENCE}

{FENCE}shell #test-setup id="after"
echo not reached
{FENCE}
"""

SECOND = f"""
{FENCE}shell #test-setup id="crashes"
echo "BOOM: the trainer crashed" >&2
exit 3
{FENCE}
"""


def _errors(record: Any) -> list[str]:
    validator = jsonschema.Draft202012Validator(SCHEMA)
    return [
        f"{'/'.join(map(str, error.absolute_path))}: {error.message}"
        for error in sorted(validator.iter_errors(record), key=str)
    ]


def _run(
    run_harness: Callable[..., subprocess.CompletedProcess[str]], tmp_path: Path, guides: dict[str, str], *args: str
) -> subprocess.CompletedProcess[str]:
    paths = []
    for name, text in guides.items():
        (tmp_path / name).write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
        paths.append(str(tmp_path / name))
    return run_harness(*paths, "--output-dir", str(tmp_path / "out"), *args, timeout_s=120)


def _record(tmp_path: Path) -> dict[str, Any]:
    record: dict[str, Any] = json.loads((tmp_path / "out" / RECORD_FILE).read_text(encoding="utf-8"))
    return record


def _by_name(record: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {b["id"] or b["store"]: b for b in record["blocks"]}


def test_the_schema_is_a_valid_versioned_draft_2020_12_schema() -> None:
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    assert SCHEMA["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert SCHEMA["$id"].endswith(f":{RECORD_VERSION}")
    assert SCHEMA["properties"]["version"]["const"] == RECORD_VERSION


def _every_part(tmp_path: Path) -> tuple[GuideOutcome, EarlierRun]:
    """A guide's outcome with every object of the file in it, set (its first block) and unset (its second)."""
    setup, test = build_plan(parse_guide(textwrap.dedent(FIRST).lstrip("\n"), "first.md")).steps[:2]
    ended = TrackedProcess(7, "sleep 300", "greets", "SIGKILL")
    diagnostic = DiagnosticResult(
        'echo "card 0: OK"', str(tmp_path / "blocks" / "d.txt"), 11, False, 0, False, 0.25, "exit 0",
        (PredatingFile("/var/log/train.log", 1_700_000_000.0),),
    )  # fmt: skip
    earlier = EarlierRun("/runs/earlier", "2026-01-02T03:04:05+00:00")
    match = MatchReport(1, "<W> world", 14, Divergence.DIFFERS, "hi world", 0, None, "", "<W> world", "", 1)
    every = BlockResult(
        step=test, status=Status.MISMATCH, exit_code=0, duration_s=1.5, message="mismatch at line 1",
        stdout_path=str(tmp_path / "blocks" / "2.stdout.txt"), stderr_path=str(tmp_path / "blocks" / "2.stderr.txt"),
        stdout_bytes=9, stderr_bytes=4,
        expected=BoundedText("hello", 20_000, complete=False, path=str(tmp_path / "blocks" / "2.expected.txt")),
        match=match, stored=("WORD", BoundedText("hello", 5, complete=True)), marker_found="BOOM",
        dumps=(str(tmp_path / "blocks" / "2.dump"),), dump_notes=("py-spy is not installed",), ended=(ended,),
        peak_rss_bytes=2048, cpu_s=0.5, diagnostics=(diagnostic,), start_s=0.75, reason="BOOM: no card",
        attempts=(
            Attempt(1, Status.TIMED_OUT, None, 2.0, "timed out after 2s", str(tmp_path / "blocks" / "2.attempt-1.out"),
                    None, 3, 0, ended=(ended,), dumps=(str(tmp_path / "blocks" / "2.attempt-1.dumps" / "1.txt"),)),
        ),
        kept_from=earlier, loaded_sha256={"WORD": hashlib.sha256(b"hello").hexdigest()},
    )  # fmt: skip
    unset = BlockResult(setup, Status.NOT_RUN, None, 0.0, "not run", None, None, 0, 0, None, None, None, None)
    collected = CollectedFile("logs/*.log", "/w/logs/train.log", str(tmp_path / "collected" / "train.log"), 8, 8,
                              False, "", 1_700_000_000.0, True)  # fmt: skip
    outcome = GuideOutcome(
        plan=build_plan(parse_guide(textwrap.dedent(FIRST).lstrip("\n"), "first.md")),
        results=(every, unset), leftovers=(ended,), interrupted_by=None, started_at="2026-01-02T03:05:00+00:00",
        duration_s=2.5, collection=Collection(str(tmp_path / "collected"), 64, (collected,), ("/nowhere/*.log",)),
        cleanup=(diagnostic,),
    )  # fmt: skip
    return outcome, earlier


def test_the_schema_holds_every_key_the_codec_writes_and_no_other(tmp_path: Path) -> None:
    """Key by key: each object of the schema is one the writer writes, with the same keys, all required, no other
    (the schema is kept by hand beside the codec: this holds the two together); both the set and the unset
    values of each key are of the type it says."""
    outcome, earlier = _every_part(tmp_path)
    record = json.loads(json.dumps(run_record([outcome], 1, tmp_path, resumed_from=earlier)))
    assert _errors(record) == []
    guide, block = record["guides"][0], record["blocks"][0]
    written = {
        "guide": guide,
        "collection": guide["collected"],
        "collected_file": guide["collected"]["files"][0],
        "diagnostic": guide["cleanup"][0],
        "predating_file": guide["cleanup"][0]["predating_files"][0],
        "block": block,
        "whole_text": block["expected_whole"],
        "process": block["processes_ended"][0],
        "attempt": block["attempts"][0],
        "earlier_run": block["kept_from"],
    }
    objects = {name: d for name, d in SCHEMA["$defs"].items() if d.get("type") == "object"}
    assert set(objects) == set(written)
    for name, described in [("run", SCHEMA), *objects.items()]:
        keys = set((written | {"run": record})[name])
        assert set(described["properties"]) == keys, name
        assert set(described["required"]) == keys and described["additionalProperties"] is False, name
    unset = record["blocks"][1]
    assert unset["kept_from"] is None and unset["expected"] is None and unset["attempts"] == []


def test_a_block_reads_back_as_it_was_written(tmp_path: Path) -> None:
    """The one codec both ways: a block read back is the one written, but for what the file does not hold."""
    outcome, earlier = _every_part(tmp_path)
    record = json.loads(json.dumps(run_record([outcome], 1, tmp_path, resumed_from=earlier)))
    for written, raw in zip(outcome.results, record["blocks"], strict=True):
        step = replace(
            written.step,
            body="",
            skip_reason=None,
            expected=None,
            recorded_sha256=written.step.code_sha256,
            recorded_result_sha256=written.step.result_sha256,
        )
        assert block_from_json(raw, tmp_path) == replace(written, step=step, match=None)


def test_a_record_of_guide_guard_0_2_0_reads() -> None:
    """Version 4, as 0.2.0 wrote it (a run resumed from another, tests/fixtures/results-0.2.0/guide.md): no
    streams_merged; kept blocks, an attempt, a value recorded cut, a diagnostic."""
    run = read_record(RECORD_0_2_0)
    assert json.loads(RECORD_0_2_0.read_text(encoding="utf-8"))["version"] == 4
    assert run.exit_status == 1 and run.resumed_from is not None
    (guide,) = run.guides
    blocks = {b.step.name: b for b in guide.blocks}
    assert {name: b.status for name, b in blocks.items()} == {
        "WORD": Status.SKIPPED,
        "BIG": Status.SKIPPED,
        "greets": Status.SKIPPED,
        "elsewhere": Status.NOT_RUN,
        "flaky": Status.PASSED,
        "drifted": Status.MISMATCH,
        "after": Status.NOT_RUN,
    }
    assert [name for name, b in blocks.items() if b.passed] == ["WORD", "BIG", "greets", "flaky"]
    assert blocks["WORD"].kept_from == run.resumed_from and blocks["greets"].step.loads == (Load("WORD", "W"),)
    assert blocks["BIG"].captured == {} and blocks["BIG"].stored is not None
    name, big = blocks["BIG"].stored
    assert (name, big.complete, big.size_bytes) == ("BIG", False, 20_000)
    assert big.path == str(RECORD_0_2_0.parent / "blocks" / "002-BIG.stored.txt")
    (attempt,) = blocks["flaky"].attempts
    assert (attempt.number, attempt.status, attempt.exit_code, attempt.stderr_bytes) == (1, Status.FAILED, 3, 14)
    drifted = blocks["drifted"]
    assert drifted.printed and not drifted.step.merge_streams
    assert drifted.step.code_sha256 == hashlib.sha256(b'echo "version 1.3"').hexdigest()
    assert drifted.expected is not None and drifted.expected.whole == "version 1.2"
    assert [d.command for d in drifted.diagnostics] == ['echo "card 0: OK"']
    # version 6's keys: what its #test-result and loaded values were, unknown (a resume says so)
    assert blocks["greets"].step.result_sha256 is None and blocks["greets"].loaded_sha256 == {}


def test_a_run_of_several_guides_and_every_verdict_matches_the_schema(tmp_path: Path, run_harness) -> None:
    done = _run(run_harness, tmp_path, {"first.md": FIRST, "second.md": SECOND}, "--error-marker", "BOOM")
    assert done.returncode == 1, done.stdout + done.stderr
    record = _record(tmp_path)
    assert _errors(record) == []
    # what the schema was checked against really holds each part
    assert [Path(g["guide"]).name for g in record["guides"]] == ["first.md", "second.md"]
    blocks = _by_name(record)
    assert {name: b["status"] for name, b in blocks.items()} == {
        "WORD": "passed",
        "greets": "passed",
        "elsewhere": "skipped",
        "drifted": "mismatch",
        "after": "not_run",
        "crashes": "failed",
    }
    assert blocks["WORD"]["captured"] == {"WORD": "hello"} and blocks["WORD"]["hidden"] is True
    assert blocks["greets"]["loads"] == [["WORD", "W"]] and blocks["greets"]["expected"] == "hello world"
    assert blocks["drifted"]["first_unmatched_line"] == 1
    assert blocks["crashes"]["error_marker"] == "BOOM" and blocks["crashes"]["stderr_path"]
    assert not any(b["streams_merged"] for b in blocks.values())  # the label contract keeps them apart
    # why it failed: its stderr's line with the run's marker; a mismatch's message says why already
    assert blocks["crashes"]["reason"] == "BOOM: the trainer crashed"
    assert blocks["drifted"]["reason"] is None and blocks["greets"]["reason"] is None
    assert [d["command"] for d in blocks["drifted"]["diagnostics"]] == ['echo "card 0: OK"']
    collected = record["guides"][0]["collected"]
    assert [f["pattern"] for f in collected["files"]] == ["logs/*.log"]
    assert collected["unmatched"] == ["/nowhere/*.log"]
    assert record["guides"][1]["collected"] is None


def test_the_schema_refuses_what_the_writer_never_writes(tmp_path: Path, run_harness) -> None:
    done = _run(run_harness, tmp_path, {"first.md": FIRST})
    assert done.returncode == 1, done.stdout + done.stderr
    record = _record(tmp_path)
    assert _errors(record) == []
    newer = {**record, "version": RECORD_VERSION + 1}
    assert _errors(newer) == [f"version: {RECORD_VERSION} was expected"]
    unknown_status = json.loads(json.dumps(record))
    unknown_status["blocks"][0]["status"] = "flaky"
    assert _errors(unknown_status)[0].startswith("blocks/0/status: 'flaky' is not one of")
    extra_key = json.loads(json.dumps(record))
    extra_key["guides"][0]["collected"]["files"][0]["owner"] = "root"
    assert _errors(extra_key)
    missing_key = json.loads(json.dumps(record))
    del missing_key["blocks"][1]["code_sha256"]
    assert _errors(missing_key) == ["blocks/1: 'code_sha256' is a required property"]


def test_a_timeout_with_stack_dumps_and_a_leftover_match_the_schema(tmp_path: Path, run_harness) -> None:
    guide = f"""
    {FENCE}shell #test-setup
    nohup sleep 300 >/dev/null 2>&1 &
    {FENCE}

    {FENCE}python #test-setup id="stuck" timeout='2'
    import time

    def waiting_for_the_capture_server():
        while True:
            time.sleep(0.1)

    waiting_for_the_capture_server()
    {FENCE}
    """
    done = _run(run_harness, tmp_path, {"guide.md": guide}, "--grace", "1")
    assert done.returncode == 1, done.stdout + done.stderr
    record = _record(tmp_path)
    assert _errors(record) == []
    stuck = _by_name(record)["stuck"]
    assert stuck["status"] == "timed_out" and stuck["exit_code"] is None
    assert stuck["stack_dumps"], stuck["stack_dump_notes"]
    assert stuck["processes_ended"]
    assert [p["command"] for p in record["guides"][0]["processes_ended"]] == ["sleep 300"]


def test_an_interrupted_run_matches_the_schema(tmp_path: Path, run_harness) -> None:
    # the block's parent is the harness: the block stops the run as a cancelled CI job would
    guide = f'{FENCE}shell #test-setup id="cancels"\nkill -TERM $PPID; sleep 600\n{FENCE}\n'
    done = _run(run_harness, tmp_path, {"guide.md": guide}, "--grace", "1")
    assert done.returncode == 128 + 15, done.stdout + done.stderr
    record = _record(tmp_path)
    assert _errors(record) == []
    assert record["guides"][0]["interrupted_by_signal"] == 15
    assert _by_name(record)["cancels"]["status"] == "error"


def test_the_reader_gives_back_statuses_labels_and_values(tmp_path: Path, run_harness) -> None:
    done = _run(run_harness, tmp_path, {"first.md": FIRST, "second.md": SECOND})
    assert done.returncode == 1, done.stdout + done.stderr
    run = read_run(tmp_path / "out")
    assert run.exit_status == 1
    first = run.guide_for("first.md")
    assert first is not None and first.started_at == _record(tmp_path)["guides"][0]["started_at"]
    assert [(b.step.label, b.status) for b in first.blocks] == [
        (Label.SETUP, Status.PASSED),
        (Label.TEST, Status.PASSED),
        (Label.TEST, Status.SKIPPED),
        (Label.TEST, Status.MISMATCH),
        (Label.SETUP, Status.NOT_RUN),
    ]
    assert all(isinstance(b.step.label, Label) and isinstance(b.status, Status) for b in first.blocks)
    drifted = first.test("drifted")
    assert drifted is not None and drifted.printed
    assert drifted.step.code_sha256 == hashlib.sha256(b'echo "version 1.3"').hexdigest()
    assert drifted.stdout_path is not None and Path(drifted.stdout_path).read_text() == "version 1.3\n"
    assert first.blocks[0].captured == {"WORD": "hello"}
    second = run.guide_for("second.md")
    assert second is not None and [b.status for b in second.blocks] == [Status.FAILED]
    assert not second.blocks[0].printed


def _rewrite_version(tmp_path: Path, version: object) -> Path:
    path = tmp_path / "out" / RECORD_FILE
    record = json.loads(path.read_text(encoding="utf-8"))
    if version is None:
        del record["version"]
    else:
        record["version"] = version
    path.write_text(json.dumps(record), encoding="utf-8")
    return path


def test_the_reader_reads_the_versions_it_knows_and_refuses_another(tmp_path: Path, run_harness) -> None:
    done = _run(run_harness, tmp_path, {"first.md": FIRST})
    assert done.returncode == 1, done.stdout + done.stderr
    read_run(tmp_path / "out")  # this version reads
    _rewrite_version(tmp_path, 1)  # a run of an earlier guide-guard: version 2 only added an ended_by value
    assert read_run(tmp_path / "out").guide_for("first.md") is not None
    path = _rewrite_version(tmp_path, RECORD_VERSION + 1)
    with pytest.raises(RecordError) as refused:
        read_run(tmp_path / "out")
    message = str(refused.value)
    assert str(path) in message
    assert (
        f"version {RECORD_VERSION + 1}" in message
        and f"reads versions 1, 2, 3, 4, 5 and {RECORD_VERSION} only" in message
    )
    _rewrite_version(tmp_path, None)
    with pytest.raises(RecordError, match="no 'version' number"):
        read_run(tmp_path / "out")


def test_update_refuses_a_run_of_a_newer_version_and_leaves_the_guide_alone(tmp_path: Path, run_harness) -> None:
    done = _run(run_harness, tmp_path, {"first.md": FIRST})
    assert done.returncode == 1, done.stdout + done.stderr
    path = _rewrite_version(tmp_path, RECORD_VERSION + 1)
    guide = tmp_path / "first.md"
    before = guide.read_text(encoding="utf-8")
    update = run_harness(str(guide), "--update", "--from-run", str(tmp_path / "out"))
    assert update.returncode == 2
    assert f"--from-run: {path} is a run record of version {RECORD_VERSION + 1}" in update.stderr
    assert guide.read_text(encoding="utf-8") == before


def _steps(text: str) -> dict[str, Step]:
    plan = build_plan(parse_guide(textwrap.dedent(text).lstrip("\n"), "first.md"))
    return {step.name: step for step in plan.steps}


def test_the_last_run_recheck_sets_results_as_written_now_against_the_recorded_stdout(
    tmp_path: Path, run_harness
) -> None:
    done = _run(run_harness, tmp_path, {"first.md": FIRST})
    assert done.returncode == 1, done.stdout + done.stderr
    recorded = read_run(tmp_path / "out").guide_for("first.md")
    assert recorded is not None
    drifted, greets = recorded.test("drifted"), recorded.test("greets")
    assert drifted is not None and greets is not None

    as_run = _steps(FIRST)
    check = recheck(recorded, drifted, as_run["drifted"])
    assert (check.command_changed, check.first_unmatched_line()) == (False, 1)
    loaded = recheck(recorded, greets, as_run["greets"])
    assert (dict(loaded.values), loaded.missing, loaded.expected_body) == ({"W": "hello"}, (), "hello world")
    assert loaded.first_unmatched_line() is None

    fixed = _steps(FIRST.replace("version 1.2\n", "version 1.3\n"))
    assert recheck(recorded, drifted, fixed["drifted"]).first_unmatched_line() is None
    rewritten = _steps(FIRST.replace('echo "version 1.3"', 'echo "version 1.4"'))
    assert recheck(recorded, drifted, rewritten["drifted"]).command_changed
