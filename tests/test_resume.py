"""`python -m ci.run GUIDE --resume DIR`: a failed run continued where it failed, with what passed kept."""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import jsonschema
import pytest

SCHEMA = json.loads((Path(__file__).resolve().parents[1] / "docs" / "results.schema.json").read_text(encoding="utf-8"))

FENCE = "```"


def _setup(params: str, *body: str) -> str:
    return f"{FENCE}shell #test-setup {params}\n" + "\n".join(body) + f"\n{FENCE}\n\n"


def _test(ident: str, command: str, expected: str, params: str = "") -> str:
    return (
        f'{FENCE}shell #test id="{ident}"{params}\n{command}\n{FENCE}\n\n'
        f'{FENCE}shell #test-result id="{ident}"\n{expected}\n{FENCE}\n\n'
    )


# Four tiny blocks: each appends to a count file when it runs; `check` fails until the flag file says ok; `serve`
# leaves a sleep running, which the end of the run ends.
GREETING = _setup('store="greeting"', "echo run >> greeting.count", "echo hello")
SERVE = _setup('id="serve"', "echo run >> serve.count", "sleep 60 >/dev/null 2>&1 &")
CHECK = _test("check", 'test "$(cat flag 2>/dev/null)" = ok && echo "<G> from check"', "hello from check")
CHECK = CHECK.replace('id="check"\n', 'id="check" load="greeting>>G"\n', 1)
LAST = _setup('id="last" load="greeting>>G"', "echo run >> last.count", 'echo "<G> at last"')


def _guide(tmp_path: Path, *blocks: str, name: str = "guide.md") -> Path:
    guide = tmp_path / name
    guide.write_text("# Resume\n\n" + "".join(blocks), encoding="utf-8")
    return guide


def _runs(tmp_path: Path, name: str) -> int:
    path = tmp_path / f"{name}.count"
    return len(path.read_text(encoding="utf-8").splitlines()) if path.exists() else 0


def _record(directory: Path) -> dict[str, Any]:
    return json.loads((directory / "results.json").read_text(encoding="utf-8"))


def _line_of(guide: Path, text: str) -> int:
    return next(n for n, line in enumerate(guide.read_text(encoding="utf-8").splitlines(), 1) if text in line)


def _failed_run(tmp_path: Path, run_harness, *blocks: str) -> Path:
    """Run 1 of the guide: it fails at `check` (no flag file yet); its output directory."""
    done = run_harness("guide.md", "--output-dir", "run1")
    assert done.returncode == 1, done.stdout + done.stderr
    return tmp_path / "run1"


def test_a_resumed_run_keeps_what_passed_reruns_the_server_and_starts_at_the_failure(
    tmp_path: Path, run_harness
) -> None:
    guide = _guide(tmp_path, GREETING, SERVE, CHECK, LAST)
    run1 = _failed_run(tmp_path, run_harness)
    assert {b["id"] or b["store"]: b["status"] for b in _record(run1)["blocks"]} == {
        "greeting": "passed",
        "serve": "passed",
        "check": "failed",
        "last": "not_run",
    }
    (tmp_path / "flag").write_text("ok\n", encoding="utf-8")  # the fix

    done = run_harness("guide.md", "--resume", "run1", "--output-dir", "run2", "--junit", "run2.xml")

    assert done.returncode == 0, done.stdout + done.stderr
    # greeting ran once (run 1), serve twice (its sleep was ended at run 1's end), check and last now
    assert (_runs(tmp_path, "greeting"), _runs(tmp_path, "serve"), _runs(tmp_path, "last")) == (1, 2, 1)
    serve_line, check_line = _line_of(guide, 'id="serve"'), _line_of(guide, 'id="check"')
    assert f"resuming the run in {run1} (started " in done.stdout
    assert f"re-running serve (line {serve_line}): it started a process the earlier run ended at its end" in done.stdout
    assert f"starting at check (line {check_line})" in done.stdout
    assert f"greeting: SKIPPED: passed in the run this one resumes ({run1})" in done.stdout
    record, earlier = _record(tmp_path / "run2"), _record(run1)
    jsonschema.validate(record, SCHEMA)
    run1_started = earlier["guides"][0]["started_at"]
    assert record["resumed_from"] == {"directory": str(run1), "started_at": run1_started}
    assert earlier["resumed_from"] is None
    blocks = {b["id"] or b["store"]: b for b in record["blocks"]}
    assert {name: b["status"] for name, b in blocks.items()} == {
        "greeting": "skipped",
        "serve": "passed",
        "check": "passed",  # it loaded greeting's value from run 1
        "last": "passed",
    }
    assert blocks["greeting"]["kept_from"] == {"directory": str(run1), "started_at": run1_started}
    assert blocks["greeting"]["captured"] == {"greeting": "hello"}  # so that this run can be resumed in turn
    assert blocks["serve"]["kept_from"] is None
    assert (tmp_path / "run2" / blocks["last"]["stdout_path"]).read_text(encoding="utf-8") == "hello at last\n"
    skipped = ET.parse(tmp_path / "run2.xml").getroot().find(".//testcase[@name='#test-setup store=greeting']/skipped")
    assert skipped is not None and f"passed in the run this one resumes ({run1})" in (skipped.get("message") or "")
    # run 1's record is as it was
    assert earlier["blocks"][2]["status"] == "failed"

    # run 2 passed whole: resuming it has nothing to do
    again = run_harness("guide.md", "--resume", "run2", "--output-dir", "run3")
    assert again.returncode == 2, again.stdout + again.stderr
    assert "every block of guide.md passed in that run, so there is nothing to resume" in again.stderr
    assert not (tmp_path / "run3" / "results.json").exists()


def test_a_changed_block_refuses_the_resume_unless_told_to_go_on(tmp_path: Path, run_harness) -> None:
    guide = _guide(tmp_path, GREETING, SERVE, CHECK, LAST)
    _failed_run(tmp_path, run_harness)
    (tmp_path / "flag").write_text("ok\n", encoding="utf-8")
    _guide(tmp_path, GREETING.replace("echo hello", "echo hello; true"), SERVE, CHECK, LAST)

    refused = run_harness("guide.md", "--resume", "run1", "--output-dir", "run2")

    assert refused.returncode == 2, refused.stdout + refused.stderr
    line = _line_of(guide, 'store="greeting"')
    assert "guide.md changed since that run before the block the resume starts at" in refused.stderr
    assert f"changed since: greeting (line {line})" in refused.stderr
    assert "--resume-changed" in refused.stderr and "serve" not in refused.stderr
    assert (_runs(tmp_path, "greeting"), _runs(tmp_path, "serve")) == (1, 1)  # nothing ran

    # a block added before the start, and one removed there, are said too
    serve_line = _line_of(guide, 'id="serve"')
    added = _guide(tmp_path, GREETING, _setup('id="new"', "true"), CHECK, LAST)
    moved = run_harness("guide.md", "--resume", "run1", "--output-dir", "run2")
    assert moved.returncode == 2, moved.stdout + moved.stderr
    new_line = _line_of(added, 'id="new"')
    assert f"added since: new (line {new_line})" in moved.stderr
    assert f"removed since: serve (then at line {serve_line})" in moved.stderr
    assert "changed since:" not in moved.stderr
    _guide(tmp_path, GREETING.replace("echo hello", "echo hello; true"), SERVE, CHECK, LAST)

    done = run_harness("guide.md", "--resume", "run1", "--resume-changed", "--output-dir", "run2")

    assert done.returncode == 0, done.stdout + done.stderr
    assert f"warning: --resume-changed: changed since: greeting (line {line}); kept as it is" in done.stderr
    assert (_runs(tmp_path, "greeting"), _runs(tmp_path, "serve"), _runs(tmp_path, "last")) == (1, 2, 1)


def test_a_setup_marked_rerun_on_resume_runs_again_and_its_change_is_no_reason_to_refuse(
    tmp_path: Path, run_harness
) -> None:
    marked = GREETING.replace('store="greeting"', 'store="greeting" rerun_on_resume')
    skipped = _setup('id="later" skip="not on this machine"', "echo run >> later.count")
    _guide(tmp_path, marked, skipped, CHECK)
    run1 = _failed_run(tmp_path, run_harness)
    (tmp_path / "flag").write_text("ok\n", encoding="utf-8")
    _guide(tmp_path, marked.replace("echo hello", "echo hello; true"), skipped, CHECK)

    done = run_harness("guide.md", "--resume", str(run1), "--output-dir", "run2")

    assert done.returncode == 0, done.stdout + done.stderr
    assert "re-running greeting (line 3): it is marked rerun_on_resume" in done.stdout
    assert "starting at check (line " in done.stdout  # not at the block its skip= skips
    assert (_runs(tmp_path, "greeting"), _runs(tmp_path, "later")) == (2, 0)
    listed = run_harness("guide.md", "--list")
    assert "rerun_on_resume" in listed.stdout.splitlines()[1], listed.stdout
    entries = json.loads(run_harness("guide.md", "--list", "--format", "json").stdout)
    assert [entry.get("rerun_on_resume") for entry in entries] == [True, None, None]


def test_resume_refuses_what_is_no_finished_run_of_this_guide(tmp_path: Path, run_harness) -> None:
    _guide(tmp_path, GREETING, SERVE, CHECK, LAST)
    run1 = _failed_run(tmp_path, run_harness)
    _guide(tmp_path, GREETING, name="other.md")
    (tmp_path / "empty").mkdir()

    cases = {
        ("guide.md", "--resume", "empty", "--output-dir", "o"): f"{tmp_path / 'empty' / 'results.json'} does not exist",
        ("guide.md", "--resume", "missing", "--output-dir", "o"): "--resume missing: no such directory",
        ("other.md", "--resume", "run1", "--output-dir", "o"): "not other.md; resume a run of this guide",
        ("guide.md", "--resume", "run1", "--output-dir", "run1"): "are the same directory",
        ("guide.md", "--resume-changed"): "--resume-changed goes with --resume DIR",
        ("guide.md", "other.md", "--resume", "run1"): "continues the run of one guide",
        ("guide.md", "--resume", "run1", "--only", "check"): "--only does not go with it",
    }
    for args, message in cases.items():
        done = run_harness(*args)
        assert done.returncode == 2 and message in done.stderr, (args, done.stdout + done.stderr)
    # a run still holding its directory is not finished: its record may be an earlier one's
    holder = os.open(run1, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(holder, fcntl.LOCK_EX)
        busy = run_harness("guide.md", "--resume", "run1", "--output-dir", "o")
    finally:
        os.close(holder)
    assert busy.returncode == 2 and f"is still writing {run1}" in busy.stderr, busy.stderr
    assert "resume once it has ended" in busy.stderr
    # report artifacts downloaded one directory each (guide-run.yml): the newest attempt's record is read
    for attempt in (9, 10):
        shutil.copytree(run1, tmp_path / "artifacts" / f"guide-attempt-{attempt}" / "outputs")
    newest = tmp_path / "artifacts" / "guide-attempt-10" / "outputs"
    record = _record(newest)
    for entry in (*record["blocks"], *record["guides"]):
        entry["guide"] = "elsewhere.md"
    (newest / "results.json").write_text(json.dumps(record), encoding="utf-8")
    done = run_harness("guide.md", "--resume", "artifacts", "--output-dir", "o")
    assert done.returncode == 2 and f"--resume {newest}: that run ran elsewhere.md" in done.stderr, done.stderr
    assert _runs(tmp_path, "greeting") == 1  # none of them ran a block
    assert not (tmp_path / "o" / "results.json").exists()


def test_a_leftover_of_one_of_two_setups_sharing_a_name_reruns_both(tmp_path: Path, run_harness) -> None:
    # the record names a process's block as the log does: two setups storing `port` are both "port"
    first = _setup('store="port"', "echo run >> first.count", "sleep 60 >/dev/null 2>&1 &", "echo 8000")
    second = _setup('store="port"', "echo run >> second.count", "echo 8001")
    _guide(tmp_path, first, second, CHECK.replace('load="greeting>>G"', 'load="port>>G"'))
    _failed_run(tmp_path, run_harness)
    (tmp_path / "flag").write_text("ok\n", encoding="utf-8")

    done = run_harness("guide.md", "--resume", "run1", "--output-dir", "run2")

    # the one that left the sleep runs again, whichever of the two it was; the record cannot tell which
    assert (_runs(tmp_path, "first"), _runs(tmp_path, "second")) == (2, 2), done.stdout + done.stderr
    shared = "a process the earlier run ended at its end was started by a block named port"
    assert f"re-running port (line 3): {shared}" in done.stdout, done.stdout
    assert done.returncode == 1  # check now loads 8001 and prints "8001 from check", not the expected text


def test_a_kept_value_is_the_value_itself_not_the_record_s_masked_text(tmp_path: Path, run_harness) -> None:
    secret = {"SERVICE_TOKEN": "s3cret-value"}  # a name ending in _TOKEN: masked in every report
    token = _setup('store="token"', 'printf "%s\\n" "$SERVICE_TOKEN"')
    check = f'{FENCE}shell #test-setup id="check" load="token>>T"\ntest "<T>" = "$SERVICE_TOKEN" && test -f flag\n{FENCE}\n\n'
    later = check.replace('id="check"', 'id="later"').replace("-f flag", "-f flag2")
    _guide(tmp_path, token, check, later)
    done = run_harness("guide.md", "--output-dir", "run1", env=secret)
    assert done.returncode == 1, done.stdout + done.stderr
    assert _record(tmp_path / "run1")["blocks"][0]["captured"] == {"token": "***"}
    (tmp_path / "flag").write_text("ok\n", encoding="utf-8")

    resumed = run_harness("guide.md", "--resume", "run1", "--output-dir", "run2", env=secret)

    # check passed with the value itself; later fails (no flag2) after it
    assert resumed.returncode == 1, resumed.stdout + resumed.stderr
    assert [b["status"] for b in _record(tmp_path / "run2")["blocks"]] == ["skipped", "passed", "failed"]
    assert "s3cret-value" not in resumed.stdout + resumed.stderr
    (tmp_path / "flag2").write_text("ok\n", encoding="utf-8")

    # resumed in turn: the value kept by run 2, whose record shows it masked, is taken whole from run 2's files
    again = run_harness("guide.md", "--resume", "run2", "--output-dir", "run3", env=secret)

    assert again.returncode == 0, again.stdout + again.stderr
    assert [b["status"] for b in _record(tmp_path / "run3")["blocks"]] == ["skipped", "skipped", "passed"]


def test_until_leaves_out_what_it_leaves_out_on_a_resume(tmp_path: Path, run_harness) -> None:
    _guide(tmp_path, GREETING, SERVE, CHECK, LAST)
    _failed_run(tmp_path, run_harness)
    (tmp_path / "flag").write_text("ok\n", encoding="utf-8")

    # --until before the resume's start: nothing of the resume runs, and the log does not say it starts anywhere
    done = run_harness("guide.md", "--resume", "run1", "--until", "greeting", "--output-dir", "run2")
    blocks = {b["id"] or b["store"]: b["status"] for b in _record(tmp_path / "run2")["blocks"]}
    assert blocks["check"] == "not_run" and blocks["last"] == "not_run", (blocks, done.stdout)
    assert "not starting at check (line 13): --until ends the run before it" in done.stdout, done.stdout
    assert "re-running serve" not in done.stdout and blocks["greeting"] == "skipped"
    assert (_runs(tmp_path, "last"), _runs(tmp_path, "serve")) == (0, 1)


HELLO = _test("hello", "echo hello", "h...o")  # passes with the default wildcard


@pytest.mark.parametrize(
    ("edit", "what"),
    [
        (("h...o\n", "hullo\n"), "its #test-result (line {result})"),  # the text
        (('id="hello"\nh...o', "id=\"hello\" fuzzy='~~'\nh...o"), "its #test-result (line {result})"),  # `...` literal
        (('shell #test id="hello"', 'python #test id="hello"'), "its language (shell there, python now)"),
    ],
    ids=["text", "fuzzy", "language"],
)
def test_a_kept_test_whose_result_or_language_changed_refuses_the_resume(
    tmp_path: Path, run_harness, edit: tuple[str, str], what: str
) -> None:
    # a full run of the edited guide fails at hello: a resume that kept it would pass where that fails
    guide = _guide(tmp_path, GREETING, HELLO, CHECK)
    _failed_run(tmp_path, run_harness)
    (tmp_path / "flag").write_text("ok\n", encoding="utf-8")
    edited = guide.read_text(encoding="utf-8").replace(*edit)
    assert edited != guide.read_text(encoding="utf-8")
    guide.write_text(edited, encoding="utf-8")
    assert run_harness("guide.md", "--output-dir", "whole").returncode == 1

    refused = run_harness("guide.md", "--resume", "run1", "--output-dir", "run2")

    assert refused.returncode == 2, refused.stdout + refused.stderr
    line, result = _line_of(guide, '#test id="hello"'), _line_of(guide, '#test-result id="hello"')
    what = what.format(result=result)
    assert f"changed since: hello (line {line}): {what}" in refused.stderr
    assert not (tmp_path / "run2" / "results.json").exists()
    # told to go on, it keeps hello as it passed there, and says so
    done = run_harness("guide.md", "--resume", "run1", "--resume-changed", "--output-dir", "run2")
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{what}; kept as it is" in done.stderr


@pytest.mark.parametrize("name", ["ref", "DB_PASSWORD"])
def test_a_kept_block_whose_set_value_changed_refuses_the_resume(tmp_path: Path, run_harness, name: str) -> None:
    tag = _test("tag", 'test "<R>" = v1.0 && echo tagged', "tagged").replace(
        'id="tag"\n', f'id="tag" load="{name}>>R"\n', 1
    )
    guide = _guide(tmp_path, GREETING, tag, CHECK)
    done = run_harness("guide.md", "--output-dir", "run1", "--set", f"{name}=v1.0")
    assert done.returncode == 1, done.stdout + done.stderr
    recorded = {b["id"] or b["store"]: b for b in _record(tmp_path / "run1")["blocks"]}
    # the record says which value tag loaded by its hash alone; a secret's, stretched, is no lookup away
    (digest,) = recorded["tag"]["loaded_sha256"].values()
    plain = hashlib.sha256(b"v1.0").hexdigest()
    assert recorded["tag"]["loaded_sha256"].keys() == {name} and (digest == plain) is (name == "ref")
    assert "v1.0" not in (tmp_path / "run1" / "results.json").read_text(encoding="utf-8")
    (tmp_path / "flag").write_text("ok\n", encoding="utf-8")

    refused = run_harness("guide.md", "--resume", "run1", "--output-dir", "run2", "--set", f"{name}=v2.0")

    assert refused.returncode == 2, refused.stdout + refused.stderr
    line = _line_of(guide, 'id="tag"')
    assert (
        f"value changed since: tag (line {line}) loads {name}, and --set {name}=... gives it another" in refused.stderr
    )
    assert "v1.0" not in refused.stderr and "v2.0" not in refused.stderr  # a value may be a secret
    assert not (tmp_path / "run2" / "results.json").exists()
    # the same value: tag is kept, and what it loaded is carried on, so that run 2 can be resumed in turn
    same = run_harness("guide.md", "--resume", "run1", "--output-dir", "run2", "--set", f"{name}=v1.0")
    assert same.returncode == 0, same.stdout + same.stderr
    kept = {b["id"] or b["store"]: b for b in _record(tmp_path / "run2")["blocks"]}["tag"]
    assert (kept["status"], kept["loaded_sha256"]) == ("skipped", recorded["tag"]["loaded_sha256"])


def test_a_resume_without_output_dir_never_removes_the_run_it_resumes(tmp_path: Path, run_harness) -> None:
    # the run to resume is a temporary output directory over an hour old, with ten newer ones beside it: the
    # making of the resumed run's own prunes such directories
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    env = {"TMPDIR": str(temporary)}
    _guide(tmp_path, GREETING, SERVE, CHECK)
    assert run_harness("guide.md", env=env).returncode == 1
    parent = temporary / "guide-guard"
    (run1,) = parent.iterdir()
    for number in range(10):
        (parent / f"run-newer-{number}").mkdir()
    hours_ago = time.time() - 7200
    os.utime(run1, (hours_ago, hours_ago))
    (tmp_path / "flag").write_text("ok\n", encoding="utf-8")

    done = run_harness("guide.md", "--resume", str(run1), env=env)

    assert done.returncode == 0, done.stdout + done.stderr
    assert (run1 / "results.json").is_file(), sorted(p.name for p in parent.iterdir())
    assert _runs(tmp_path, "greeting") == 1  # kept from it


def test_a_plain_fence_inserted_above_the_others_is_a_new_block(tmp_path: Path, run_harness) -> None:
    one = f"{FENCE}shell\necho run >> one.count\n{FENCE}\n\n"
    check = f"{FENCE}shell\ntest -f flag\n{FENCE}\n\n"
    guide = _guide(tmp_path, one, check)
    assert run_harness("guide.md", "--dialect", "fences", "--output-dir", "run1").returncode == 1
    (tmp_path / "flag").write_text("ok\n", encoding="utf-8")
    _guide(tmp_path, f"{FENCE}shell\necho run >> new.count\n{FENCE}\n\n", one, check)

    refused = run_harness("guide.md", "--dialect", "fences", "--resume", "run1", "--output-dir", "run2")

    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert f"added since: #1 (line {_line_of(guide, 'new.count') - 1})" in refused.stderr
    assert "changed since:" not in refused.stderr

    done = run_harness(
        "guide.md", "--dialect", "fences", "--resume", "run1", "--resume-changed", "--output-dir", "run2"
    )

    assert done.returncode == 0, done.stdout + done.stderr
    assert (_runs(tmp_path, "new"), _runs(tmp_path, "one")) == (1, 1)  # the new fence ran; the one below was kept
    assert [b["status"] for b in _record(tmp_path / "run2")["blocks"]] == ["passed", "skipped", "passed"]


def test_a_resume_from_an_older_record_says_what_it_could_not_compare(tmp_path: Path, run_harness) -> None:
    # a record of version 5 (0.2.x's is 4) says neither which #test-result a block matched nor what it loaded
    guide = _guide(tmp_path, GREETING, HELLO, CHECK)
    run1 = _failed_run(tmp_path, run_harness)
    record = _record(run1)
    record["version"] = 5
    for block in record["blocks"]:
        del block["result_sha256"], block["loaded_sha256"]
    (run1 / "results.json").write_text(json.dumps(record), encoding="utf-8")
    (tmp_path / "flag").write_text("ok\n", encoding="utf-8")

    done = run_harness("guide.md", "--resume", "run1", "--output-dir", "run2")

    assert done.returncode == 0, done.stdout + done.stderr
    line = _line_of(guide, '#test id="hello"')
    assert (
        f"warning: hello (line {line}) is kept as it passed in {run1}, whose record (an older guide-guard's) does"
        " not say which #test-result it matched: if that changed since, start at it with --from hello"
    ) in done.stderr
    assert "greeting (line" not in done.stderr  # a setup that loads nothing has nothing to compare
