"""The NPU job on a real runner (docs/ci.md, "The run job on a real runner"): its rules, each shown to catch
the job as it was written before it, and its steps' real scripts run as the runner starts them: the outcome
as job outputs, the record job, cancellation, the deadline, the login environment, the hand-back, a resume.
"""

from __future__ import annotations

import fnmatch
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from outside import unavailable
from workflows import (
    ACTION,
    EXPRESSION,
    GUIDE_GUARD_CHECKOUT,
    GUIDE_RUN,
    JOB_SCRIPT,
    ROOT,
    WORKFLOWS,
    Workflow,
    action_as_workflow,
    fill_references,
    guide_jobs,
    harness_deadline_s,
    harness_step_index,
    job_commands,
    local_action,
    parse_workflow,
    read_github_output,
    run_step_script,
    run_the_guide_path,
    run_the_run_step,
    runs_the_harness_itself,
    stand_in_python,
    step_argv,
    step_env,
    step_shell,
    steps_after_the_harness,
    steps_using,
    stop_step,
    wait_for,
)

# ---------------------------------------------------------------------------------------------------------
# The NPU job on a real runner (docs/runners.md): each rule applies to every self-hosted job that runs a guide,
# and is shown to fail on a job written the way guide-run.yml's was before these rules.

OUTCOME_OUTPUTS = {"verdict", "exit_status", "counts", "failing"}


def storage_violations(workflow: Workflow) -> list[str]:
    """Point 1: on a guide job nothing waits on, or fails on, GitHub's storage; the outcome leaves as job outputs."""
    problems = []
    for job_id in guide_jobs(workflow):
        job = workflow.jobs[job_id]
        for step in job["steps"]:
            action = str(step.get("uses", "")).split("@")[0]
            reaches_storage = action.startswith(
                ("actions/upload-artifact", "actions/cache", "actions/download-artifact")
            )
            if reaches_storage and (step.get("continue-on-error") is not True or not step.get("timeout-minutes")):
                problems.append(
                    f"{workflow.name} {job_id}: {action} may fail or stall there; give it continue-on-error and timeout-minutes"
                )
        harness = job["steps"][harness_step_index(job)]
        read = {
            found[1]
            for value in (job.get("outputs") or {}).values()
            if (found := re.search(rf"steps\.{re.escape(str(harness.get('id')))}\.outputs\.(\w+)", str(value)))
        }
        if not read >= OUTCOME_OUTPUTS:
            problems.append(
                f"{workflow.name} {job_id}: job outputs {sorted(read)} miss {sorted(OUTCOME_OUTPUTS - read)} of the harness's step"
            )
    return problems


def cancel_violations(workflow: Workflow) -> list[str]:
    """Point 2a: a cancelled guide job signals the harness in the container and waits, before the upload."""
    problems = []
    for job_id in guide_jobs(workflow):
        steps = workflow.jobs[job_id]["steps"]
        harness = harness_step_index(workflow.jobs[job_id])
        stops = [
            i
            for i, s in enumerate(steps)
            if s.get("if") == "cancelled()"
            and re.search(r"guide-guard-job\"? stop --output-dir", str(s.get("run", "")))
        ]
        uploads = [i for i, s in enumerate(steps) if str(s.get("uses", "")).startswith("actions/upload-artifact@")]
        if not stops or not harness < stops[0] < min(uploads, default=len(steps)):
            problems.append(
                f"{workflow.name} {job_id}: no `if: cancelled()` step that stops the harness before the upload"
            )
        elif not steps[stops[0]].get("timeout-minutes"):
            problems.append(f"{workflow.name} {job_id}: the stop step needs a timeout-minutes")
    return problems


# A reader's login environment with the job's PATH kept (ci/shell/login-profile.bash): a shell that reads no
# profile itself (`bash -l` would reset PATH before the script could keep it), and the file sourced first.
LOGIN_SHELL = "bash --noprofile --norc -e {0}"
LOGIN_PROFILE = 'source "$GITHUB_ACTION_PATH/ci/shell/login-profile.bash"'


def login_shell_violations(workflow: Workflow, action: Workflow = ACTION) -> list[str]:
    """Point 3: the harness runs in a reader's login environment, so the blocks see the image's /etc/profile
    environment, and the job's PATH (setup-python's, GITHUB_PATH's, the image's ENV) stays in front.

    Every step of a guide job that installs or calls the harness runs in the composite action (ACTION, for a
    step that uses `./`), whose run steps source ci/shell/login-profile.bash before anything else, in a
    shell that reads no profile of its own.
    """
    problems = []
    for job_id in guide_jobs(workflow):
        for step in workflow.jobs[job_id]["steps"]:
            uses_action = local_action(step) is not None
            # the action's steps: every one that installs or calls the harness
            inner = [(action, "action", s) for _, _, s in action.steps()] if uses_action else [(workflow, job_id, step)]
            for where, where_job, candidate in inner:
                script = str(candidate.get("run", ""))
                if not runs_the_harness_itself(candidate):
                    continue
                name = f"{where.name} {where_job} {candidate.get('name')!r}"
                if where is workflow:
                    problems.append(f"{name}: runs the harness itself, outside the action (action.yml)")
                    continue
                shell = step_shell(where, where_job, candidate)
                if shell != LOGIN_SHELL:
                    problems.append(f"{name}: shell {shell!r}, not `{LOGIN_SHELL}`")
                first_line = next((line.strip() for line in script.splitlines() if line.strip()), "")
                holds_job_secrets = "GUIDE_GUARD_JOB_SECRETS" in (candidate.get("env") or {})
                if holds_job_secrets and LOGIN_PROFILE in script:
                    # the image's profiles are its code: they never run beside every secret of the job
                    problems.append(f"{name}: reads the image's profiles with the job's secrets in its environment")
                elif not holds_job_secrets and first_line != LOGIN_PROFILE:
                    problems.append(f"{name}: its first line is {first_line!r}, not `{LOGIN_PROFILE}`")
    return list(dict.fromkeys(problems))  # the action is used twice (install, then run): its steps said once


def hub_cache_violations(workflow: Workflow) -> list[str]:
    """Point 4: HF_HOME is a fixed path a mount can serve; HF_ENDPOINT is never set empty."""
    problems = []
    for job_id in guide_jobs(workflow):
        hf_home = str((workflow.jobs[job_id].get("env") or {}).get("HF_HOME", ""))
        if not hf_home.startswith("/") or hf_home.startswith("/github/") or "$" in hf_home:
            problems.append(f"{workflow.name} {job_id}: HF_HOME {hf_home!r}; set a fixed path outside /github/home")
    envs = [workflow.doc.get("env") or {}] + [job.get("env") or {} for job in workflow.jobs.values()]
    envs += [step.get("env") or {} for _, _, step in workflow.steps()]
    for env in envs:
        if "${{" in str(env.get("HF_ENDPOINT", "")):
            problems.append(
                f"{workflow.name}: HF_ENDPOINT set from an expression is empty when unset; export it only if set"
            )
    return problems


def ptrace_violations(workflow: Workflow) -> list[str]:
    """Point 5: py-spy's stack dumps need ptrace in the container."""
    problems = []
    for job_id in guide_jobs(workflow):
        container = workflow.jobs[job_id].get("container")
        options = str(container.get("options", "")) if isinstance(container, dict) else ""
        if container and "--cap-add SYS_PTRACE" not in EXPRESSION.sub("", options):
            problems.append(f"{workflow.name} {job_id}: container options {options!r} lack --cap-add SYS_PTRACE")
    return problems


def cleanup_violations(workflow: Workflow) -> list[str]:
    """Point 6: a container job ends by handing what root wrote back to the runner's user."""
    problems = []
    for job_id in guide_jobs(workflow):
        job = workflow.jobs[job_id]
        if not job.get("container"):
            continue
        last = job["steps"][-1]
        script = str(last.get("run", ""))
        # guide-guard-job hand-back: by default the workspace, RUNNER_TEMP and HOME (ci/github/job.py)
        if last.get("if") != "always()" or not re.search(r"guide-guard-job\"? hand-back", script):
            problems.append(
                f"{workflow.name} {job_id}: the last step must always hand the workspace, temp and home back"
            )
    return problems


NEEDS_OUTPUT = re.compile(r"\$\{\{\s*needs\.([\w-]+)\.outputs\.([\w-]+)\s*\}\}")


def rerun_violations(workflow: Workflow) -> list[str]:
    """Point 10b: a cache entry a job must find was named by the job that saved it, whatever the attempt.

    "Re-run failed jobs" runs the failed jobs and those after them in a new attempt; the jobs that passed
    keep their outputs but do not run again, so a key the restoring job builds itself (from its own
    github.run_attempt) names an entry nobody saved. The key must be one job output of a job it needs, one
    whose value is, as written, the key of a cache step of that job.
    """
    problems = []
    for job_id, job in workflow.jobs.items():
        for step in job.get("steps") or []:
            if not (
                str(step.get("uses", "")).startswith("actions/cache")
                and (step.get("with") or {}).get("fail-on-cache-miss")
            ):
                continue
            key = str(step["with"]["key"])
            found = NEEDS_OUTPUT.fullmatch(key.strip())
            if found is None:
                problems.append(f"{workflow.name} {job_id}: restores {key!r}, built by itself, from its own attempt")
                continue
            saver, output = found[1], found[2]
            passed_on = str((workflow.jobs.get(saver, {}).get("outputs") or {}).get(output))
            saved = {
                str(s["with"]["key"])
                for s in workflow.jobs.get(saver, {}).get("steps") or []
                if str(s.get("uses", "")).startswith("actions/cache")
            }
            if passed_on not in saved:
                problems.append(
                    f"{workflow.name} {job_id}: restores {key!r}, which no job it needs passed on as the key it saved"
                )
    return problems


RUNNER_RULES = (
    storage_violations,
    cancel_violations,
    login_shell_violations,
    hub_cache_violations,
    ptrace_violations,
    cleanup_violations,
    rerun_violations,
)


@pytest.mark.parametrize("rule", RUNNER_RULES, ids=lambda rule: rule.__name__)
def test_the_npu_job_follows_the_runner_rules(rule: Any) -> None:
    assert guide_jobs(WORKFLOWS[GUIDE_RUN]) == ["run"], "the rules would check nothing"
    problems = [p for w in WORKFLOWS.values() for p in rule(w)]
    assert not problems, "\n".join(problems)


# guide-run.yml's jobs as they were before these rules: each rule finds what it is about
BEFORE_THE_RUNNER_RULES = """
on: {workflow_call: {inputs: {labels: {type: string}}}}
permissions: {contents: read}
env: {REPORT_DIR: report}
jobs:
  decide:
    runs-on: ubuntu-latest
    outputs: {ref: "${{ steps.monitor.outputs.ref }}"}
    steps:
      - id: monitor
        run: python -m ci.monitor g.md --state s.json
      - uses: actions/cache/save@27d5ce7f107fe9357f9df03efb73ab90386fccae # v5.0.5
        with: {path: s.json, key: "state-${{ github.run_id }}-${{ github.run_attempt }}"}
  run:
    needs: decide
    runs-on: ${{ fromJSON(inputs.labels) }}
    container: {image: "img:1", options: "${{ inputs.options }}"}
    env: {HF_ENDPOINT: "${{ vars.HF_ENDPOINT }}"}
    steps:
      - uses: actions/checkout@de0fac2e4500dabe0009e67214ff5f5447ce83dd # v6.0.2
      - name: Run the guide
        run: /opt/h/bin/python -m ci.run g.md --output-dir "$REPORT_DIR/outputs"
      - if: always()
        uses: actions/upload-artifact@043fb46d1a93c77aae656e7c1c64a875d1fc6a0a # v7.0.1
        with: {name: report, path: report}
  record:
    needs: [decide, run]
    runs-on: ubuntu-latest
    steps:
      - uses: actions/cache/restore@27d5ce7f107fe9357f9df03efb73ab90386fccae # v5.0.5
        with: {path: s.json, key: "state-${{ github.run_id }}-${{ github.run_attempt }}", fail-on-cache-miss: true}
"""


def test_the_runner_rules_catch_the_job_as_it_was() -> None:
    before = parse_workflow(BEFORE_THE_RUNNER_RULES, "before.yml")
    assert guide_jobs(before) == ["run"]
    found = {rule.__name__: rule(before) for rule in RUNNER_RULES}
    assert {name for name, problems in found.items() if not problems} == set(), found
    assert "upload-artifact may fail or stall" in found["storage_violations"][0]
    assert "miss ['counts', 'exit_status', 'failing', 'verdict']" in found["storage_violations"][1]
    assert "runs the harness itself, outside the action" in found["login_shell_violations"][0]
    # the action as it was before ci/shell/login-profile.bash: `bash -el`, whose Debian /etc/profile reset
    # PATH (setup-python's Python lost), and no profile sourced by the script
    login_action = re.sub(
        rf"^\s*{re.escape(LOGIN_PROFILE)}\n", "", ACTION.text.replace(LOGIN_SHELL, "bash -el {0}"), flags=re.M
    )
    as_it_was = login_shell_violations(WORKFLOWS[GUIDE_RUN], action_as_workflow(login_action))
    assert len(as_it_was) == 7, as_it_was  # 4 shells, 3 first lines: the secrets step reads no profile anyway
    # the action as it was before the secrets step stopped reading the image's profiles beside the job's secrets
    secrets_step = '        "$HARNESS_VENV/bin/guide-guard-secrets"'
    reading = ACTION.text.replace(secrets_step, f"        {LOGIN_PROFILE}\n{secrets_step}")
    assert login_shell_violations(WORKFLOWS[GUIDE_RUN], action_as_workflow(reading)) == [
        "action.yml action \"Hand the named secrets to the guide's run\": reads the image's profiles with the job's"
        " secrets in its environment"
    ]
    assert "shell 'bash -el {0}', not `bash --noprofile --norc -e {0}`" in as_it_was[0]
    assert "its first line is 'set -euo pipefail', not `source" in as_it_was[1]
    assert [p.split(": ", 1)[1].split(";")[0] for p in found["hub_cache_violations"]] == [
        "HF_HOME ''",
        "HF_ENDPOINT set from an expression is empty when unset",
    ]
    assert "built by itself, from its own attempt" in found["rerun_violations"][0]
    # taking the key from a job output that is not the key the job saved is caught too
    elsewhere = BEFORE_THE_RUNNER_RULES.replace(
        'key: "state-${{ github.run_id }}-${{ github.run_attempt }}", fail',
        'key: "${{ needs.decide.outputs.ref }}", fail',
    )
    [problem] = rerun_violations(parse_workflow(elsewhere, "before.yml"))
    assert "which no job it needs passed on as the key it saved" in problem


# ---------------------------------------------------------------------------------------------------------
# 1. The verdict reaches `record` as job outputs


@settings(max_examples=300, deadline=None)
@given(st.text(st.characters(blacklist_categories=("Cs",)), max_size=80))
def test_a_step_output_reads_back_whatever_its_value_holds(value: str) -> None:
    from ci.report.github import output_entry

    text = output_entry("first", value) + output_entry("second", "after")
    assert read_github_output(text) == {"first": value, "second": "after"}


def test_a_value_cannot_end_its_own_entry() -> None:
    from ci.report.github import output_entry

    tricky = "a\nGUIDE_GUARD_EOF_0\nverdict=passed"
    assert read_github_output(output_entry("failing", tricky) + "verdict=failed\n") == {
        "failing": tricky,
        "verdict": "failed",
    }


OUTCOME_GUIDE = """
```shell #test id="fine"
echo fine
```

```shell #test-result id="fine"
fine
```

```shell #test-setup id="broken"
exit 3
```

```shell #test id="never"
echo never
```

```shell #test-result id="never"
never
```
"""


def test_the_harness_writes_the_outcome_the_record_job_reads(guide_runner, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    outputs = tmp_path / "github_output"
    outputs.write_text("earlier=kept\n")  # the file holds the step's other outputs: append, never replace
    run = guide_runner(OUTCOME_GUIDE, env={"GITHUB_ACTIONS": "true", "GITHUB_OUTPUT": str(outputs)})
    assert run.returncode == 1, run.stdout + run.stderr
    written = read_github_output(outputs.read_text(encoding="utf-8"))
    duration = written.pop("duration_s")
    assert written == {
        "earlier": "kept",
        "verdict": "failed",
        "exit_status": "1",
        "counts": '{"passed":1,"failed":1,"not_run":1}',
        "failing": "broken",
    }
    assert json.loads(written["counts"]) == {
        status: sum(1 for b in run.blocks if b["status"] == status) for status in ("passed", "failed", "not_run")
    }
    # the seconds the guide took, as results.json has them (to the tenth)
    assert float(duration) == pytest.approx(run.record["guides"][0]["duration_s"], abs=0.06)
    # every job output the workflow reads from the action's step is an output of the action, and each of
    # those is one the harness writes, under the same name
    job = WORKFLOWS[GUIDE_RUN].jobs["run"]
    harness_id = job["steps"][harness_step_index(job)]["id"]
    read = re.findall(rf"steps\.{harness_id}\.outputs\.(\w+)", str(job["outputs"]))
    action_outputs = ACTION.doc["action"]["outputs"]
    assert read and set(read) <= set(action_outputs)
    # the harness's outcome, and the install step's venv (for the job's own commands)
    outcome = {name: spec for name, spec in action_outputs.items() if name != "venv"}
    assert action_outputs["venv"]["value"] == "${{ steps.install.outputs.venv }}"
    [inner_id] = {m for spec in outcome.values() for m in re.findall(r"steps\.(\w+)\.outputs", spec["value"])}
    assert {name: spec["value"] for name, spec in outcome.items()} == {
        name: f"${{{{ steps.{inner_id}.outputs.{name} }}}}" for name in outcome
    }
    assert set(outcome) == set(written) - {"earlier"} | {"duration_s"}


# ci.run with ExitCode turned into text as Python 3.10 turns an IntEnum (`ExitCode.FAILED`, not `1`): 3.11 made
# str() and format() of an IntEnum its number, so without this only a 3.10 interpreter would show the difference.
# Run with -m from the test's directory; every report must still write the number.
ENUM_TEXT_AS_IN_PYTHON_310 = """\
import enum
import runpy

from ci.cli import ExitCode

ExitCode.__str__ = enum.Enum.__str__
ExitCode.__format__ = enum.Enum.__format__
runpy.run_module("ci.run", run_name="__main__", alter_sys=True)
"""


def test_every_report_writes_the_exit_status_as_a_number(run_harness, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "enum_text_as_in_python_310.py").write_text(ENUM_TEXT_AS_IN_PYTHON_310, encoding="utf-8")
    (tmp_path / "guide.md").write_text(OUTCOME_GUIDE, encoding="utf-8")
    outputs, summary = tmp_path / "github_output", tmp_path / "summary.md"
    done = run_harness(
        *("guide.md", "--output-dir", "out", "--junit", "junit.xml"),
        module="enum_text_as_in_python_310",
        env={"GITHUB_ACTIONS": "true", "GITHUB_OUTPUT": str(outputs), "GITHUB_STEP_SUMMARY": str(summary)},
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert read_github_output(outputs.read_text(encoding="utf-8"))["exit_status"] == "1"
    record = json.loads((tmp_path / "out" / "results.json").read_text(encoding="utf-8"))
    assert record["exit_status"] == 1
    texts = {
        "the log": done.stdout + done.stderr,
        "$GITHUB_OUTPUT": outputs.read_text(encoding="utf-8"),
        "$GITHUB_STEP_SUMMARY": summary.read_text(encoding="utf-8"),
        "results.json": (tmp_path / "out" / "results.json").read_text(encoding="utf-8"),
        "the JUnit report": (tmp_path / "junit.xml").read_text(encoding="utf-8"),
    }
    assert not {name: text for name, text in texts.items() if "ExitCode" in text}


def test_several_failing_blocks_are_listed_one_per_line(guide_runner, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    outputs = tmp_path / "github_output"
    guide = OUTCOME_GUIDE.replace('id="never"', 'id="mismatched"').replace("\nnever\n```", "\nsomething else\n```")
    run = guide_runner(guide, "--keep-going", env={"GITHUB_ACTIONS": "true", "GITHUB_OUTPUT": str(outputs)})
    assert run.returncode == 1
    written = read_github_output(outputs.read_text(encoding="utf-8"))
    assert written["failing"].splitlines() == ["broken", "mismatched"]
    assert written["verdict"] == "failed" and json.loads(written["counts"]) == {"passed": 1, "failed": 1, "mismatch": 1}


def test_nothing_is_written_outside_github_actions(guide_runner, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    outputs = tmp_path / "github_output"
    run = guide_runner(OUTCOME_GUIDE, env={"GITHUB_OUTPUT": str(outputs)})
    assert run.returncode == 1 and not outputs.exists()


def test_the_record_job_records_a_pass_only_for_a_run_job_that_passed() -> None:
    """A run job that failed, or was cancelled (before the harness started, or killed before it finished),
    or passed on no verdict, or showed its previous attempt's verdict after stopping early in a re-run, is
    recorded as failed: passed needs both the job's success and the harness's verdict passed."""
    [record_step] = [s for j, name, s in WORKFLOWS[GUIDE_RUN].steps() if j == "record" and name == "Record"]
    # GitHub evaluates it (`a && b && 'passed'` is 'passed' only when both hold; `|| 'failed'` otherwise)
    assert record_step["env"]["RESULT"] == (
        "${{ needs.run.result == 'success' && needs.run.outputs.verdict == 'passed' && 'passed' || 'failed' }}"
    )


# What the record job prints and records after the run job's attempts, as the record step's env: gets it from
# the run job's result and outputs. As the runner does (actions/runner#2598), a job output that is empty in an
# attempt keeps the previous attempt's value; `attempt` is the attempt that ran the job, `verdict-attempt` the
# attempt whose harness wrote a verdict; RESULT is what the step's expression gives (passed only for a run
# job that succeeded with the verdict passed). The record job runs again with every attempt of the run job.
FAILED_RUN = {
    "RUN_RESULT": "failure",
    "VERDICT": "failed",
    "COUNTS": '{"passed":1,"failed":1}',
    "FAILING": "broken",
    "RUN_ATTEMPT": "1",
    "VERDICT_ATTEMPT": "1",
    "RESULT": "failed",
}
RECORD_PRINT_CASES = {
    # also what a re-run of `record` alone sees: the run job's outputs and result stay those of its attempt
    "a failed run": (FAILED_RUN, "harness verdict: failed;"),
    # attempt 2 failed before the harness wrote anything: attempt 1's outcome shows through
    "a re-run that failed before the harness wrote anything (actions/runner#2598)": (
        FAILED_RUN | {"RUN_ATTEMPT": "2"},
        "harness verdict: none (the run job ended 'failure' without one)",
    ),
    # the harness of attempt 2 passed; its empty `failing` kept attempt 1's list
    "a re-run that passed after a failed attempt": (
        FAILED_RUN
        | {
            "RUN_RESULT": "success",
            "VERDICT": "passed",
            "COUNTS": '{"passed":2}',
            "RUN_ATTEMPT": "2",
            "VERDICT_ATTEMPT": "2",
            "RESULT": "passed",
        },
        "harness verdict: passed;",
    ),
    # attempt 2 never started the job: every output is attempt 1's
    "a re-run cancelled before its job started": (
        FAILED_RUN | {"RUN_RESULT": "cancelled"},
        "harness verdict: none (the run job ended 'cancelled' without one)",
    ),
    # the harness, stopped by the stop step, wrote its outputs after the runner had read them (docs/runners.md)
    "a cancelled run": (
        {"RUN_RESULT": "cancelled", "VERDICT": "", "COUNTS": "", "FAILING": "", "RUN_ATTEMPT": "1"}
        | {"VERDICT_ATTEMPT": "", "RESULT": "failed"},
        "harness verdict: none (the run job ended 'cancelled'",
    ),
}


@pytest.mark.parametrize("case", RECORD_PRINT_CASES)
def test_the_record_job_prints_only_the_latest_attempts_outcome(case: str, tmp_path: Path) -> None:
    """The record step's real script, its env: given as the run job's attempts leave it; a stand-in
    `guide-guard-monitor` notes what the monitor is asked to record."""
    values, printed = RECORD_PRINT_CASES[case]
    workflow = WORKFLOWS[GUIDE_RUN]
    [step] = [s for j, name, s in workflow.steps() if j == "record" and name == "Record"]
    stand_in = tmp_path / "bin" / "guide-guard-monitor"
    stand_in.parent.mkdir()
    stand_in.write_text('#!/bin/sh\nprintf \'%s\\n\' "$@" > "$0.args"\n')
    stand_in.chmod(0o755)
    values = {"GUIDE": "docs/g.md", "REF": "v1"} | values
    env = {"PATH": f"{stand_in.parent}{os.pathsep}{os.environ['PATH']}", **step_env(workflow, "record", step, values)}
    done = run_step_script(step, tmp_path, env, shell_job="record")
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith(printed), done.stdout
    # the failing blocks are printed only beside the verdict that found them
    assert ("failing blocks:\nbroken" in done.stdout) == printed.startswith("harness verdict: failed"), done.stdout
    monitor_args = Path(f"{stand_in}.args").read_text().splitlines()
    assert monitor_args[monitor_args.index("--record-result") + 1] == values["RESULT"]
    assert monitor_args[monitor_args.index("--ref") + 1] == "v1"


def test_the_upload_can_neither_stall_the_job_nor_turn_it_red() -> None:
    workflow = WORKFLOWS[GUIDE_RUN]
    [upload] = steps_using(workflow, "run", "actions/upload-artifact")
    assert upload["continue-on-error"] is True and 0 < upload["timeout-minutes"] <= 5
    # a failed or timed-out upload leaves a warning
    [warn] = [s for s in workflow.jobs["run"]["steps"] if f"steps.{upload['id']}.outcome" in str(s.get("if", ""))]
    assert "::warning" in warn["run"]
    # A failed upload's outcome is `failure`; one that stalls after the job was cancelled is stopped at its
    # time limit and marked `cancelled` by the runner, and must warn as well: anything but success or skipped
    outcome = f"steps.{upload['id']}.outcome"
    assert warn["if"] == f"always() && {outcome} != 'success' && {outcome} != 'skipped'"
    # and nothing after the run job reads the artifact
    assert not [s for j, _, s in workflow.steps() if j != "run" and "download-artifact" in str(s.get("uses", ""))]


# ---------------------------------------------------------------------------------------------------------
# 2. Cancellation and the job's time limit inside a container


@pytest.mark.parametrize("job_minutes", ["300", "90.5", "16", "15", "15.9", "3", "0"])
def test_a_job_limit_that_leaves_the_harness_no_time_is_refused_by_name(job_minutes: str, tmp_path: Path) -> None:
    """`timeout-minutes` is a number input: a fraction is dropped (the deadline only moves earlier), and a
    limit no longer than the margin is refused before the harness starts, with the minimum, never passed
    on as `--deadline 0m` or a negative one."""
    margin = WORKFLOWS[GUIDE_RUN].doc["env"]["DEADLINE_MARGIN_MINUTES"]
    done, args = run_the_run_step(job_minutes, tmp_path)
    left_minutes = math.floor(float(job_minutes)) - margin
    if left_minutes > 0:
        assert done.returncode == 0 and args is not None, done.stdout + done.stderr
        assert args[args.index("--deadline") + 1] == f"{left_minutes}m"
    else:
        assert (done.returncode, args) == (2, None), done.stdout + done.stderr
        assert (
            f"::error title=timeout-minutes too small::the input timeout-minutes is '{job_minutes}';"
            f" give at least {margin + 1} (minutes)"
        ) in done.stdout, done.stdout
    docs = (ROOT / "docs" / "runners.md").read_text(encoding="utf-8")
    assert f"`timeout-minutes` must be at least {margin + 1}" in docs
    described = WORKFLOWS[GUIDE_RUN].doc["on"]["workflow_call"]["inputs"]["timeout-minutes"]["description"]
    assert f"at least {margin + 1}, as the harness's deadline is {margin} minutes below it" in described


def test_the_deadline_is_the_documented_margin_below_the_job_limit() -> None:
    workflow = WORKFLOWS[GUIDE_RUN]
    margin = workflow.doc["env"]["DEADLINE_MARGIN_MINUTES"]
    assert harness_deadline_s(workflow, 300) == 60 * (300 - margin)
    assert f"`DEADLINE_MARGIN_MINUTES`, {margin} minutes" in (ROOT / "docs" / "runners.md").read_text(encoding="utf-8")
    # every step after the harness has a limit of its own, so the margin can be checked against them
    assert all(step.get("timeout-minutes") for step in steps_after_the_harness(workflow, "run"))


def test_a_cancelled_job_stops_the_harness_and_waits_for_its_reports(
    tmp_path: Path, harness_env: dict[str, str]
) -> None:
    """As in the container: the harness started by an earlier step, the stop step run on its own afterwards."""
    report_dir = str(WORKFLOWS[GUIDE_RUN].doc["env"]["REPORT_DIR"])
    (tmp_path / "guide.md").write_text(
        '```shell #test-setup id="long"\ntouch block-started\nsleep 600\n```\n', encoding="utf-8"
    )
    harness = subprocess.Popen(
        [sys.executable, "-m", "ci.run", "guide.md", "--output-dir", f"{report_dir}/outputs"],
        cwd=tmp_path,
        env=harness_env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for(tmp_path / "block-started", harness, "the block started")
        wait_for(tmp_path / report_dir / "outputs" / "harness.pid", harness, "the harness wrote its pid file")
        stopped = run_step_script(stop_step(), tmp_path, {**harness_env, **job_commands(report_dir)})
        # the step returned only after the harness had exited (a zombie until this test collects it)
        assert stopped.returncode == 0, stopped.stdout + stopped.stderr
        assert f"the harness (pid {harness.pid}) stopped" in stopped.stdout
        assert harness.poll() == 143
    finally:
        if harness.poll() is None:  # the test failed: stop the harness as a user would, so it ends its block
            harness.terminate()
            try:
                harness.wait(timeout=60)
            except subprocess.TimeoutExpired:
                harness.kill()
        harness.wait(timeout=60)
    record = json.loads((tmp_path / report_dir / "outputs" / "results.json").read_text(encoding="utf-8"))
    assert record["exit_status"] == 143 and [b["id"] for b in record["blocks"]] == ["long"]


# Holds a Python process in its start-up, before it imports the module it was asked to run: a harness that
# has not yet written its pid file (its interpreter, its imports or the guide's parsing still under way).
STARTING_FOREVER = """
import os, pathlib, time
pathlib.Path(os.environ["GUIDE_GUARD_TEST_STARTING"]).touch()
time.sleep(600)
"""


def test_the_stop_step_finds_a_harness_that_has_not_written_its_pid_file(
    tmp_path: Path, harness_env: dict[str, str]
) -> None:
    """The real command line (the console script, as the action starts it), held in its start-up by a
    sitecustomize; another run's harness (another --output-dir, one that only starts with this job's) is left alone."""
    report_dir = str(WORKFLOWS[GUIDE_RUN].doc["env"]["REPORT_DIR"])
    (tmp_path / "guide.md").write_text("```shell #test-setup\necho never\n```\n", encoding="utf-8")
    held = tmp_path / "held"
    held.mkdir()
    (held / "sitecustomize.py").write_text(STARTING_FOREVER, encoding="utf-8")
    # another job's workspace on the same host: the same relative --output-dir, started from elsewhere
    elsewhere = tmp_path / "another-workspace"
    elsewhere.mkdir()
    (elsewhere / "guide.md").write_text("```shell #test-setup\necho never\n```\n", encoding="utf-8")
    harnesses = {}
    module, script = [sys.executable, "-m", "ci.run"], [str(JOB_SCRIPT.parent / "guide-guard")]
    for name, command, output_dir, workspace in (  # the other job's first: a lower pid, met first in /proc
        ("another-job", script, f"{report_dir}/outputs", elsewhere),
        ("ours", script, f"{report_dir}/outputs", tmp_path),  # as the action starts it: its console script
        ("another", module, f"{report_dir}/outputs-of-another", tmp_path),
    ):
        env = {**harness_env, "PYTHONPATH": str(held), "GUIDE_GUARD_TEST_STARTING": str(tmp_path / name)}
        harnesses[name] = subprocess.Popen(
            [*command, "guide.md", "--output-dir", output_dir],
            cwd=workspace,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    try:
        for name, harness in harnesses.items():
            wait_for(tmp_path / name, harness, "it was held in its start-up")
        stopped = run_step_script(stop_step(), tmp_path, {**harness_env, **job_commands(report_dir)})
        assert stopped.returncode == 0, stopped.stdout + stopped.stderr
        ours = harnesses["ours"].pid
        assert f"found the harness (pid {ours}) by its command line" in stopped.stdout, stopped.stdout
        assert f"the harness (pid {ours}) stopped without writing {report_dir}/outputs/results.json" in stopped.stdout
        assert harnesses["ours"].wait(timeout=60) == -signal.SIGTERM
        assert harnesses["another"].poll() is None, "the stop step signalled another run's harness"
        assert harnesses["another-job"].poll() is None, "the stop step signalled another job's harness"
    finally:
        for harness in harnesses.values():
            if harness.poll() is None:
                harness.kill()
            harness.wait(timeout=60)


def test_the_stop_step_leaves_alone_a_process_that_took_a_stale_pid(
    tmp_path: Path, harness_env: dict[str, str]
) -> None:
    # a harness killed outright leaves its pid file; the pid may be another process's by the time it is read
    other = subprocess.Popen(["sleep", "600"], env=harness_env, stdin=subprocess.DEVNULL)
    try:
        pid_file = tmp_path / "report" / "outputs" / "harness.pid"
        pid_file.parent.mkdir(parents=True)
        pid_file.write_text(f"{other.pid}\n")
        stopped = run_step_script(stop_step(), tmp_path, {**harness_env, **job_commands("report")})
        assert stopped.returncode == 0, stopped.stderr
        assert f"the harness (pid {other.pid}) is no longer running" in stopped.stdout
        assert other.poll() is None, "the stop step signalled a process that is not the harness"
        # no pid file at all (the harness never started, or ended and removed it): nothing to do
        pid_file.unlink()
        assert (
            "no harness is running"
            in run_step_script(stop_step(), tmp_path, {**harness_env, **job_commands("report")}).stdout
        )
    finally:
        other.kill()
        other.wait(timeout=60)


# ---------------------------------------------------------------------------------------------------------
# 3 and 4. The blocks see the image's login environment and the workflow's Hub settings


PROFILE_GUIDE = """
```shell #test id="profile"
echo "${GUIDE_GUARD_FROM_PROFILE:-not set}"
guide-guard-job-tool
```

```shell #test-result id="profile"
exported by the profile
the job's tool
```
"""


@pytest.mark.parametrize("shell,passes", [("action", True), ("bash -e {0}", False)])
def test_a_variable_exported_by_a_profile_script_reaches_the_blocks(
    shell: str, passes: bool, tmp_path: Path, harness_env: dict[str, str]
) -> None:
    """The harness step's own shell and first line (it sources ci/shell/login-profile.bash), with a HOME whose
    ~/.bash_profile exports what CANN's set_env.sh would and sets PATH afresh, as Debian's /etc/profile does:
    the blocks get the variable, and the job's PATH still finds the job's tool. GitHub's default
    `bash -e {0}` without that line (the control) reads no profile."""
    [run_step] = [s for _, name, s in ACTION.steps() if name == "Run the guide"]
    home = tmp_path / "home"
    home.mkdir()
    (home / ".bash_profile").write_text(
        "export GUIDE_GUARD_FROM_PROFILE='exported by the profile'\nPATH=/usr/bin:/bin\n", encoding="utf-8"
    )
    job_bin = tmp_path / "job-bin"  # what setup-python or GITHUB_PATH put first on the job's PATH
    job_bin.mkdir()
    (job_bin / "guide-guard-job-tool").write_text('#!/bin/sh\necho "the job\'s tool"\n', encoding="utf-8")
    (job_bin / "guide-guard-job-tool").chmod(0o755)
    (tmp_path / "guide.md").write_text(PROFILE_GUIDE.lstrip(), encoding="utf-8")
    script = tmp_path / "step.sh"
    harness = '"$HARNESS_PYTHON" -m ci.run guide.md --output-dir out\n'
    if shell == "action":
        first_line = str(run_step["run"]).splitlines()[0]
        assert first_line == LOGIN_PROFILE
        script.write_text(f"{first_line}\n{harness}", encoding="utf-8")
        argv = step_argv(step_shell(ACTION, "action", run_step), script)
    else:
        script.write_text(harness, encoding="utf-8")
        argv = step_argv(shell, script)
    env = {k: v for k, v in harness_env.items() if k != "GUIDE_GUARD_FROM_PROFILE"}
    env |= {"HOME": str(home), "HARNESS_PYTHON": sys.executable, "GITHUB_ACTION_PATH": str(ROOT)}
    env["PATH"] = f"{job_bin}{os.pathsep}{env['PATH']}"
    done = subprocess.run(
        argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL
    )
    status = json.loads((tmp_path / "out" / "results.json").read_text())["blocks"][0]["status"]
    assert (done.returncode, status) == ((0, "passed") if passes else (1, "mismatch")), done.stdout + done.stderr


STEP_GUIDE = """
```shell #test-setup store="seen"
echo "profile=${GUIDE_GUARD_FROM_PROFILE:-unset} hf_home=$HF_HOME endpoint=${HF_ENDPOINT-unset} ref=$UPSTREAM_REF"
```

```shell #test-setup id="broken"
exit 3
```
"""


@pytest.mark.parametrize("mirror", ["http://hub-mirror.invalid", ""])
def test_the_run_step_as_the_runner_starts_it(mirror: str, tmp_path: Path, harness_env: dict[str, str]) -> None:
    """The prepare step and the action's run step, their real scripts in their shells: the blocks get HF_HOME,
    the mirror only when one is set, the upstream ref, and the outcome lands in $GITHUB_OUTPUT; the reports
    land where the upload looks, and the blocks run in the fresh directory, not in the checkout."""
    run_job = WORKFLOWS[GUIDE_RUN].jobs["run"]
    home = tmp_path / "github-home"
    home.mkdir()
    (home / ".bash_profile").write_text("export GUIDE_GUARD_FROM_PROFILE=yes\n")
    (tmp_path / "guide.md").write_text(STEP_GUIDE.lstrip(), encoding="utf-8")
    (tmp_path / "runner-temp").mkdir()
    given = {
        "inputs.guide": "guide.md",
        "inputs.timeout-minutes": "300",
        "vars.HF_ENDPOINT": mirror,
        "steps.install.outputs.venv": sys.prefix,  # this test's environment stands in for the harness's venv
    }
    env = {
        **{k: v for k, v in harness_env.items() if not k.startswith(("HF_", "GUIDE_GUARD_FROM"))},
        "HOME": str(home),
        "RUNNER_TEMP": str(tmp_path / "runner-temp"),
        "GITHUB_ACTIONS": "true",
    }
    # the ref the monitor picked (needs.decide.outputs.ref), which wins over the input
    path = run_the_guide_path(tmp_path, given, env, upstream_ref="v0.2.0")
    assert path.run is not None, path.prepare.stdout + path.prepare.stderr
    assert path.run.returncode == 1, path.run.stdout + path.run.stderr
    report_dir = tmp_path / WORKFLOWS[GUIDE_RUN].doc["env"]["REPORT_DIR"]
    record = json.loads((report_dir / "outputs" / "results.json").read_text(encoding="utf-8"))
    seen = record["blocks"][0]["captured"]["seen"].strip()
    endpoint = mirror or "unset"
    assert seen == f"profile=yes hf_home={run_job['env']['HF_HOME']} endpoint={endpoint} ref=v0.2.0"
    assert (report_dir / "junit.xml").is_file()
    assert (path.outputs["verdict"], path.outputs["failing"]) == ("failed", "broken")
    assert path.inputs["workdir"] == str(tmp_path / "runner-temp" / "guide-workdir")
    assert (tmp_path / "runner-temp" / "guide-workdir").is_dir()


def test_a_hub_mirror_with_a_line_break_is_refused(tmp_path: Path) -> None:
    """$GITHUB_ENV takes one variable a line: a mirror holding a line break could set another (LD_PRELOAD=...)."""
    (tmp_path / "temp").mkdir()
    given = {"inputs.guide": "g.md", "inputs.timeout-minutes": "300", "vars.HF_ENDPOINT": "http://m\nLD_PRELOAD=x"}
    given["steps.install.outputs.venv"] = sys.prefix
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "RUNNER_TEMP": str(tmp_path / "temp")}
    env["GITHUB_ACTIONS"] = "true"
    path = run_the_guide_path(tmp_path, given, env)
    assert path.run is None and path.prepare.returncode == 2
    assert "::error title=HF_ENDPOINT::" in path.prepare.stdout


def test_the_hub_cache_path_is_the_one_the_documented_options_mount() -> None:
    hf_home = WORKFLOWS[GUIDE_RUN].jobs["run"]["env"]["HF_HOME"]
    docs = (ROOT / "docs" / "runners.md").read_text(encoding="utf-8")
    assert f":{hf_home}" in docs, f"docs/runners.md mounts no host directory at {hf_home}"
    assert "`HF_ENDPOINT`" in docs and "vars.HF_ENDPOINT" in WORKFLOWS[GUIDE_RUN].text


def test_the_documented_container_options_give_ptrace_and_shared_memory() -> None:
    docs = (ROOT / "docs" / "runners.md").read_text(encoding="utf-8")
    assert "--cap-add SYS_PTRACE" in docs and "--shm-size" in docs
    assert WORKFLOWS[GUIDE_RUN].jobs["run"]["container"]["options"].startswith("--cap-add SYS_PTRACE ")


# ---------------------------------------------------------------------------------------------------------
# 6. What root wrote is handed back to the runner's user


@pytest.mark.parametrize("installed", [True, False], ids=["guide-guard-job", "harness never installed"])
def test_the_last_step_hands_roots_files_back_to_the_runners_user(installed: bool, tmp_path: Path) -> None:
    """A container job's directories as the runner lays them out, the container's root having written into them;
    the step runs guide-guard-job, or, when the install failed, the same code from guide-guard's checkout."""
    if os.geteuid() != 0:
        unavailable("root is needed to own files as the container's root does", "run this test as root")
    runner_user = (4242, 4343)
    work = tmp_path / "_work"
    workspace = work / "repo" / "repo"
    temp = work / "_temp"
    home = temp / "_github_home"  # mounted at /github/home in the container
    for directory in (work, work / "repo", workspace, temp, home):
        directory.mkdir(parents=True, exist_ok=True)
        os.chown(directory, *runner_user)
    written = [
        workspace / "guide-guard-report" / "outputs" / "results.json",
        temp / "_runner_file_commands" / "set_output",
        home / ".cache" / "pip" / "wheel",
        temp / "guide-workdir" / "SpecForge" / "setup.py",
    ]
    for path in written:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("root's\n")
    outside = tmp_path / "system-file"
    outside.write_text("must stay root's\n")
    (workspace / "link-out").symlink_to(outside)
    checkout = workspace / GUIDE_GUARD_CHECKOUT / "ci" / "github"
    checkout.mkdir(parents=True)
    shutil.copy2(ROOT / "ci" / "github" / "handback.py", checkout)
    cleanup = WORKFLOWS[GUIDE_RUN].jobs["run"]["steps"][-1]
    env = {"PATH": os.environ["PATH"], "GITHUB_WORKSPACE": str(workspace), "RUNNER_TEMP": str(temp), "HOME": str(home)}
    venv = job_commands("guide-guard-report") if installed else {"HARNESS_VENV": ""}
    done = run_step_script(cleanup, tmp_path, env | venv)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"belong to {runner_user[0]}:{runner_user[1]} again" in done.stdout
    assert not (temp / "guide-workdir").exists(), "the guide's clones and builds are gone"
    for root in (workspace, temp, home):
        for path in [root, *root.rglob("*")]:
            stat = path.lstat()
            assert (stat.st_uid, stat.st_gid) == runner_user, f"{path} still belongs to {stat.st_uid}"
    assert outside.stat().st_uid == 0, "a symlink led the hand-back out of the job's directories"


@pytest.mark.parametrize("run_id", ["4242", ""])
def test_a_dispatched_resume_downloads_the_earlier_reports_and_passes_them_as_resume(
    run_id: str, tmp_path: Path
) -> None:
    """guides.yml's `resume-run-id` reaches guide-run.yml, whose run job downloads every attempt's report of the
    guide from that workflow run (actions: read) and gives the harness their directory as --resume (which takes
    the newest attempt's record); without it, the harness gets no --resume and nothing is downloaded."""
    from ci.maintain.artifacts import attempt_name

    dispatch = WORKFLOWS["guides.yml"].doc["on"]["workflow_dispatch"]["inputs"]
    assert dispatch["resume-run-id"]["default"] == ""
    caller = WORKFLOWS["guides.yml"].jobs["run"]
    assert caller["with"]["resume-run-id"] == "${{ inputs.resume-run-id }}"
    assert caller["permissions"] == {"contents": "read", "actions": "read"}
    run_job = WORKFLOWS[GUIDE_RUN].jobs["run"]
    assert run_job["permissions"] == {"contents": "read", "actions": "read"}
    [fetch] = steps_using(WORKFLOWS[GUIDE_RUN], "run", "actions/download-artifact")
    assert fetch["if"] == "steps.prepare.outputs.resume-dir != ''"
    assert fetch["with"]["run-id"] == "${{ inputs.resume-run-id }}"
    assert fetch["with"]["github-token"] == "${{ github.token }}"
    assert "merge-multiple" not in fetch["with"]  # one directory per attempt: the harness picks the newest
    pattern = fill_references(fetch["with"]["pattern"], {"inputs.report-name": "specforge-npu"})
    assert fnmatch.fnmatchcase(attempt_name("specforge-npu", 3), pattern)
    python = stand_in_python(tmp_path)
    (tmp_path / "temp").mkdir()
    given = {"inputs.guide": "guide.md", "inputs.timeout-minutes": "300", "inputs.resume-run-id": run_id}
    given["steps.install.outputs.venv"] = str(python.parent.parent)
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "RUNNER_TEMP": str(tmp_path / "temp")}
    path = run_the_guide_path(tmp_path, given, env)
    assert path.run is not None and path.run.returncode == 0, path.prepare.stdout + path.prepare.stderr
    args = Path(f"{python}.args").read_text(encoding="utf-8").splitlines()
    if run_id:
        downloaded = fill_references(fetch["with"]["path"], {"steps.prepare.outputs.resume-dir": path.inputs["resume"]})
        assert args[args.index("--resume") + 1] == downloaded == "guide-guard-resume"
    else:
        assert "--resume" not in args and path.inputs["resume"] == ""
