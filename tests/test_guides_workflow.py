"""The registry's workflows: guides.yml's matrix, guide-run.yml's status job, the board job, and the composite
action (action.yml) as another repository uses it. The rules every workflow follows (security, pinning,
zizmor, actionlint, the runner rules) are in test_workflow_security.py and test_workflow_run_job.py and cover these
files too; what these workflows do
end to end, run by a real Actions engine, is in tests/act.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from workflows import (
    ACTION,
    EXPRESSION,
    GUIDE_GUARD_CHECKOUT,
    GUIDE_RUN,
    WORKFLOWS,
    Workflow,
    WorkflowLoader,
    action_step,
    documented_caller,
    documented_workflow,
    harness_calls,
    local_action,
    parse_workflow,
    permission_violations,
    pinning_violations,
    possible_values,
    read_github_output,
    run_step_script,
    stand_in_python,
    step_env,
    steps_using,
    untrusted_trigger_violations,
)

from ci.github.registry import BLOCK_HEADROOM_MINUTES, DEADLINE_MARGIN_MINUTES, GROUPS, MATRIX_KEYS, load_registry
from ci.github.registry.status import read_statuses

ROOT = Path(__file__).resolve().parents[1]
GUIDES = WORKFLOWS["guides.yml"]


def step_named(workflow: Workflow, job_id: str, prefix: str) -> dict[str, Any]:
    [step] = [s for j, name, s in workflow.steps() if j == job_id and name.startswith(prefix)]
    return step


def python_on_path(directory: Path) -> dict[str, str]:
    """An environment whose `python` is this test's interpreter (as setup-python's is the job's), with the
    harness's console scripts beside it (`pip install .` puts them on the job's PATH)."""
    bin_dir = directory / "bin"
    bin_dir.mkdir()
    (bin_dir / "python").write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    (bin_dir / "python").chmod(0o755)
    for script in ("guide-guard-registry", "guide-guard-monitor"):
        (bin_dir / script).symlink_to(Path(sys.executable).parent / script)
    return {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}


# ---------------------------------------------------------------------------------------------------------
# guides.yml: the registry's matrix drives the runs


def test_the_matrix_job_consumes_exactly_the_registrys_keys() -> None:
    job = GUIDES.jobs["run"]
    read = set(re.findall(r"(?<![\w.])matrix\.([\w-]+)", json.dumps({k: v for k, v in job.items() if k != "strategy"})))
    assert read == set(MATRIX_KEYS), (
        f"read but not written: {read - set(MATRIX_KEYS)}; unread: {set(MATRIX_KEYS) - read}"
    )
    assert job["strategy"] == {"fail-fast": False, "matrix": "${{ fromJSON(needs.matrix.outputs.matrix) }}"}
    assert job["uses"] == f"./.github/workflows/{GUIDE_RUN}"
    # one concurrency group per guide, never cancelling a run that started
    assert job["concurrency"] == {"group": "guide-${{ matrix.name }}", "cancel-in-progress": False}
    # an empty group would be an empty matrix, which GitHub refuses: the job is skipped instead
    assert job["if"] == "needs.matrix.outputs.count != '0'"


def test_each_cron_runs_its_group_and_a_dispatch_its_choice() -> None:
    step = step_named(GUIDES, "matrix", "The matrix of the group")
    nightly, weekly = [entry["cron"] for entry in GUIDES.doc["on"]["schedule"]]
    assert nightly != weekly and sorted(GROUPS) == ["nightly", "weekly"]
    # GitHub evaluates it: a dispatch's choice, else the weekly cron's group, else (the other cron) nightly
    assert step["env"]["GROUP"] == (
        f"${{{{ inputs.group || (github.event.schedule == '{weekly}' && 'weekly') || 'nightly' }}}}"
    )
    assert set(possible_values(step["env"]["GROUP"])) == set(GROUPS)
    dispatch = GUIDES.doc["on"]["workflow_dispatch"]["inputs"]
    assert dispatch["group"]["options"] == list(GROUPS)
    calls = [call for call in harness_calls(GUIDES) if call.module == "ci.registry" and call.job == "matrix"]
    assert sorted(call.argv for call in calls) == [
        ("guides.yaml", "--matrix", "--entry", "$ENTRY"),
        ("guides.yaml", "--matrix", "--group", "$GROUP"),
    ]


# A named entry's matrix is tests/act's: test_guides_workflow.py dispatches the demo entry, which alone runs.
@pytest.mark.parametrize("group", ["nightly", "weekly"])
def test_the_matrix_step_emits_the_registrys_matrix(group: str, tmp_path: Path) -> None:
    """The step's real script, run in the checkout: the output the run job's strategy reads is the matrix."""
    step = step_named(GUIDES, "matrix", "The matrix of the group")
    outputs = tmp_path / "github_output"
    env = python_on_path(tmp_path) | {"ENTRY": "", "GROUP": group, "GITHUB_OUTPUT": str(outputs)}
    done = run_step_script(step, tmp_path, env, shell_job="matrix", workflow=GUIDES, cwd=ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    written = read_github_output(outputs.read_text(encoding="utf-8"))
    expected = load_registry(ROOT / "guides.yaml").matrix(group)
    assert json.loads(written["matrix"]) == expected
    assert written["count"] == str(len(expected["include"]))
    assert GUIDES.jobs["matrix"]["outputs"] == {
        "matrix": "${{ steps.registry.outputs.matrix }}",
        "count": "${{ steps.registry.outputs.count }}",
    }


def test_a_resume_without_an_entry_name_stops_before_any_guide_runs(tmp_path: Path) -> None:
    """resume-run-id continues one entry's run: dispatched without `name`, the matrix job fails, saying so, and no
    entry runs (each would try the resume, and those that passed there refuse it)."""
    step = step_named(GUIDES, "matrix", "The matrix of the group")
    assert step["env"]["RESUME_RUN_ID"] == "${{ inputs.resume-run-id }}"
    outputs = tmp_path / "github_output"
    env = python_on_path(tmp_path) | {"GROUP": "nightly", "GITHUB_OUTPUT": str(outputs), "RESUME_RUN_ID": "4242"}
    refused = run_step_script(step, tmp_path, env | {"ENTRY": ""}, shell_job="matrix", workflow=GUIDES, cwd=ROOT)
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "::error title=resume-run-id without name::" in refused.stdout and "give its name too" in refused.stdout
    assert not outputs.exists()
    entry = load_registry(ROOT / "guides.yaml").matrix("nightly")["include"][0]["name"]
    named = run_step_script(step, tmp_path, env | {"ENTRY": entry}, shell_job="matrix", workflow=GUIDES, cwd=ROOT)
    assert named.returncode == 0, named.stdout + named.stderr
    assert [
        e["name"] for e in json.loads(read_github_output(outputs.read_text(encoding="utf-8"))["matrix"])["include"]
    ] == [entry]


def test_the_registry_knows_guide_runs_margin_and_the_job_limit_rule() -> None:
    assert WORKFLOWS[GUIDE_RUN].doc["env"]["DEADLINE_MARGIN_MINUTES"] == DEADLINE_MARGIN_MINUTES
    # test_workflow_wiring.py's rule: the deadline leaves the longest block 30 minutes of the rest of the guide
    assert BLOCK_HEADROOM_MINUTES == 30


# ---------------------------------------------------------------------------------------------------------
# guide-run.yml's status job and guides.yml's board job

# case: (the status step's env: as GitHub gives it from the decide and run jobs, the verdict written). A passing
# and a failing run are tests/act's (test_guides_workflow.py: the status file passed, and failed, to the board).
STATUS_CASES = {
    "no reason tonight": (
        {"RUN_RESULT": "skipped", "DECIDE_RESULT": "success", "NEED_TO_TEST": "false", "VERDICT_ATTEMPT": ""},
        "not_run",
    ),
    "a failed decision": ({"RUN_RESULT": "skipped", "DECIDE_RESULT": "failure", "VERDICT_ATTEMPT": ""}, "no_verdict"),
    "a cancelled run": ({"RUN_RESULT": "cancelled", "VERDICT_ATTEMPT": ""}, "no_verdict"),
    # after "re-run failed jobs": attempt 2 failed before its harness wrote a verdict, attempt 1's shows through
    "a re-run showing its previous attempt's verdict": (
        {"RUN_RESULT": "failure", "VERDICT": "passed", "RUN_ATTEMPT": "2"},
        "no_verdict",
    ),
}


@pytest.mark.parametrize("case", STATUS_CASES)
def test_the_status_job_writes_the_file_the_board_reads(case: str, tmp_path: Path) -> None:
    """The status step's real script (jq), its env: given as GitHub would; the board reads what it wrote."""
    if shutil.which("jq") is None:
        pytest.skip("jq is not installed (GitHub's runners have it)")
    workflow = WORKFLOWS[GUIDE_RUN]
    step = step_named(workflow, "status", "Write the guide's status")
    values, verdict = STATUS_CASES[case]
    values = {
        "NAME": "demo",
        "GUIDE": "docs/examples/demo.md",
        "DECIDE_RESULT": "skipped",
        "NEED_TO_TEST": "",
        "VERDICT": "",
        "RUN_ATTEMPT": "1",
        "VERDICT_ATTEMPT": "1",
        "COUNTS": '{"passed":5}',
        "DURATION": "12.5",
        "REF": "main",
        "RUN_URL": "https://github.com/o/r/actions/runs/42",
    } | values
    env = {"PATH": os.environ["PATH"], **step_env(workflow, "status", step, values)}
    done = run_step_script(step, tmp_path, env, shell_job="status")
    assert done.returncode == 0, done.stdout + done.stderr
    [status] = read_statuses([tmp_path / "guide-status"], {})
    assert (status.name, status.guide, status.verdict) == ("demo", "docs/examples/demo.md", verdict)
    assert (status.ref, status.duration_s, dict(status.counts)) == ("main", 12.5, {"passed": 5})
    assert status.run_url == "https://github.com/o/r/actions/runs/42" and status.date is not None
    assert (tmp_path / "guide-status" / "demo.json").is_file()
    [upload] = steps_using(workflow, "status", "actions/upload-artifact")
    assert upload["with"]["path"] == "guide-status" and upload["with"]["overwrite"] is True
    assert upload["with"]["name"] == "guide-status-${{ inputs.report-name }}"


def test_the_status_job_runs_whatever_happened_on_a_github_hosted_runner() -> None:
    job = WORKFLOWS[GUIDE_RUN].jobs["status"]
    assert job["needs"] == ["decide", "run"] and job["if"] == "${{ always() }}"
    assert job["runs-on"] == "ubuntu-latest"


def test_the_board_job_renders_this_runs_statuses_over_the_previous_board() -> None:
    job = GUIDES.jobs["board"]
    assert job["needs"] == ["matrix", "run"] and job["runs-on"] == "ubuntu-latest"
    # also after a failed or cancelled run, whenever the registry was read
    assert job["if"] == "${{ always() && needs.matrix.result == 'success' }}"
    [download] = steps_using(GUIDES, "board", "actions/download-artifact")
    status_upload = steps_using(WORKFLOWS[GUIDE_RUN], "status", "actions/upload-artifact")[0]["with"]["name"]
    assert download["with"]["pattern"] == status_upload.split("${{")[0] + "*"
    assert download["with"]["merge-multiple"] is True
    [board] = [call for call in harness_calls(GUIDES) if call.job == "board"]
    args = __import__("ci.registry", fromlist=["build_parser"]).build_parser().parse_args(list(board.argv))
    assert [str(path) for path in args.board] == [download["with"]["path"]]
    assert str(args.previous) == str(args.output) == "$BOARD_DIR"
    board_dir = "${{ env.BOARD_DIR }}"
    [restore] = steps_using(GUIDES, "board", "actions/cache/restore")
    [save] = steps_using(GUIDES, "board", "actions/cache/save")
    [publish] = steps_using(GUIDES, "board", "actions/upload-artifact")
    assert restore["with"]["path"] == save["with"]["path"] == publish["with"]["path"] == board_dir
    assert save["with"]["key"].startswith(restore["with"]["restore-keys"])
    [write] = [s for j, _, s in GUIDES.steps() if j == "board" and "guide-guard-registry" in str(s.get("run", ""))]
    assert write["shell"] == "bash" and 'tee -a "$GITHUB_STEP_SUMMARY"' in write["run"], "pipefail, and the summary"


# ---------------------------------------------------------------------------------------------------------
# The composite action: the demo workflow, and another repository's


def action_inputs(given: dict[str, Any]) -> dict[str, str]:
    declared = ACTION.doc["action"]["inputs"]
    return {name: str(given.get(name, spec.get("default", ""))) for name, spec in declared.items()}


# The action's run step sets these two from expressions (`inputs.keep-going == 'true' && 'yes' || ''`,
# `inputs.mask-files != 'false' && 'yes' || ''`): a test gives their values, as they come out of its inputs.
DEFAULT_FLAGS = {"KEEP_GOING": "", "MASK_FILES": "yes", "STRICT": ""}


def run_action_step(
    name: str,
    inputs: dict[str, str],
    venv: str,
    workspace: Path,
    env: dict[str, str],
    flags: dict[str, str] | None = None,
) -> Any:
    """The action's step NAME, its real script in its shell, with INPUTS (the plain `${{ inputs.X }}`), VENV as
    the install step's output and FLAGS (the run step's KEEP_GOING, MASK_FILES and STRICT) given directly."""
    [step] = [s for _, step_name, s in ACTION.steps() if step_name == name]
    known = {f"inputs.{key}": value for key, value in inputs.items()} | {"steps.install.outputs.venv": venv}
    given = {key: value for key, value in (flags or DEFAULT_FLAGS).items() if key in step["env"]}
    # GITHUB_ACTION_PATH: the runner's path of the action, this checkout (its steps source ci/shell/ from it)
    script_env = {**env, **step_env(ACTION, "action", step, given, known), "GITHUB_ACTION_PATH": str(ROOT)}
    return run_step_script(step, workspace, script_env, shell_job="action", workflow=ACTION)


def test_the_action_passes_set_whole_and_each_line_of_args_as_one_word(tmp_path: Path) -> None:
    python = stand_in_python(tmp_path)
    inputs = action_inputs(
        {"guide": "g.md", "set": "model_dir=/data/my models\n\nfast=1", "args": "--timeout\n30m", "keep-going": "true"}
    )
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path)}
    flags = DEFAULT_FLAGS | {"KEEP_GOING": "yes"}  # keep-going true
    done = run_action_step("Run the guide", inputs, str(python.parent.parent), tmp_path, env, flags)
    assert done.returncode == 0, done.stdout + done.stderr
    noted = Path(f"{python}.args").read_text()  # each argument on a line of its own: `set`'s take three
    argv = noted.splitlines()
    assert argv[0] == "g.md"  # the venv's console script, not `python -m ci.run`
    # `set` whole, for ci.run to split (--set-lines), as the check step passes it too
    assert noted.endswith("\n--keep-going\n--set-lines\nmodel_dir=/data/my models\n\nfast=1\n--timeout\n30m\n")
    assert "--workdir" not in argv and "--deadline" not in argv  # given only when set
    assert "--mask-files" in argv  # by default: the output directory is meant for an artifact, which is not masked


LOADING_GUIDE = """\
```shell #test id="show" load="model_dir>>MODEL_DIR" load="note>>NOTE"
echo "<MODEL_DIR> <NOTE>"
```

```shell #test-result id="show"
/data/m two words
```
"""


STRICT = DEFAULT_FLAGS | {"STRICT": "yes"}  # strict: true


def test_the_check_step_takes_the_set_values_the_run_step_does(tmp_path: Path) -> None:
    """A guide that loads a value of `set` passes the check, and both steps hand the harness the same values."""
    (tmp_path / "guide.md").write_text(LOADING_GUIDE, encoding="utf-8")
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "RUNNER_TEMP": str(tmp_path)}
    values = "model_dir=/data/m\n\nnote=two words\n"
    given = {"guide": "guide.md", "strict": "true", "set": values}
    harness_venv = Path(sys.executable).parent.parent  # this checkout's harness, installed (pip install -e .)
    checked = run_action_step("Check the guide", action_inputs(given), str(harness_venv), tmp_path, env, STRICT)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "show" in checked.stdout
    # without them the check refuses the guide, as the run would
    refused = run_action_step(
        "Check the guide", action_inputs(given | {"set": ""}), str(harness_venv), tmp_path, env, STRICT
    )
    assert refused.returncode == 2 and "load of 'model_dir', which no earlier block stores" in refused.stderr
    # the run step gives the harness the same values, and the real run passes with them
    stand_in = tmp_path / "stand-in" / "bin" / "guide-guard"
    stand_in.parent.mkdir(parents=True)
    stand_in.write_text('#!/bin/sh\nprintf \'%s\\0\' "$@" > "$0.args"\n', encoding="utf-8")  # NUL after each
    stand_in.chmod(0o755)
    for step in ("Check the guide", "Run the guide"):
        done = run_action_step(step, action_inputs(given), str(stand_in.parent.parent), tmp_path, env, STRICT)
        assert done.returncode == 0, done.stdout + done.stderr
        argv = Path(f"{stand_in}.args").read_text(encoding="utf-8").split("\0")
        assert argv[argv.index("--set-lines") + 1] == values, (step, argv)
    ran = run_action_step(
        "Run the guide",
        action_inputs(given | {"output-dir": str(tmp_path / "out")}),
        str(harness_venv),
        tmp_path,
        env,
        STRICT,
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr


# A caller's repository with a top-level `ci/` package of its own, as many have: under `python -m ci.run` from
# the workspace it would be imported instead of the harness.
CALLERS_CI_RUN = "raise SystemExit('the caller\\'s own ci/run.py ran instead of the harness')\n"


def test_a_callers_own_ci_package_does_not_shadow_the_harness(tmp_path: Path) -> None:
    """The action's check and run steps, their real scripts, in a workspace holding a `ci/` package whose
    run.py would stop anything that imports it; the harness is this environment's, as the action's venv."""
    (tmp_path / "ci").mkdir()
    (tmp_path / "ci" / "__init__.py").write_text("")
    (tmp_path / "ci" / "run.py").write_text(CALLERS_CI_RUN)
    (tmp_path / "g.md").write_text(
        '```shell #test id="hello"\necho hello\n```\n\n```shell #test-result id="hello"\nhello\n```\n'
    )
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "RUNNER_TEMP": str(tmp_path)}
    env |= {"GITHUB_ACTIONS": "true", "GITHUB_OUTPUT": str(tmp_path / "github-output")}
    # what the action ran before: the workspace's ci/ comes first on sys.path
    shadowed = subprocess.run(
        [sys.executable, "-m", "ci.run", "g.md", "--list"], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert "the caller's own ci/run.py ran" in shadowed.stderr
    inputs = action_inputs({"guide": "g.md"})
    checked = run_action_step("Check the guide", inputs, sys.prefix, tmp_path, env)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "hello" in checked.stdout
    ran = run_action_step("Run the guide", inputs, sys.prefix, tmp_path, env)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert read_github_output((tmp_path / "github-output").read_text())["verdict"] == "passed"


def test_the_actions_check_lists_the_limits_the_rules_give(tmp_path: Path) -> None:
    """The check step's listing, in the job log before any block runs, shows each block's limit as the run
    applies it: a plain-fence guide's limits come from the timeout-rules input, one rule a line."""
    (tmp_path / "g.md").write_text("```shell\ncmake --build build\n```\n\n```shell\nmake install\n```\n")
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "RUNNER_TEMP": str(tmp_path)}
    inputs = action_inputs({"guide": "g.md", "dialect": "fences", "timeout-rules": "cmake --build=20m\nmake=90s\n"})
    checked = run_action_step("Check the guide", inputs, sys.prefix, tmp_path, env)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    limits = [line.split("timeout=")[1] for line in checked.stdout.splitlines() if "timeout=" in line]
    assert limits == ["1200s", "90s"], checked.stdout


@pytest.mark.parametrize(
    "install,venv,expected", [("no", "installed", 0), ("no", "empty", 2), ("maybe", "installed", 2)]
)
def test_the_action_runs_a_harness_installed_by_an_earlier_step_only_when_there_is_one(
    install: str, venv: str, expected: int, tmp_path: Path
) -> None:
    """`install: no` (guide-run.yml's second use of the action) takes the venv an `install: only` step made,
    installing nothing; a venv without the harness, or another value of `install`, stops the job by name."""
    (tmp_path / "empty").mkdir()
    given = sys.prefix if venv == "installed" else str(tmp_path / "empty")
    outputs = tmp_path / "github-output"
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(tmp_path),
        "RUNNER_TEMP": str(tmp_path),
        "GITHUB_OUTPUT": str(outputs),
    }
    inputs = action_inputs({"guide": "g.md", "install": install, "venv": given})
    done = run_action_step("Install the harness into its own virtual environment", inputs, "", tmp_path, env)
    assert done.returncode == expected, done.stdout + done.stderr
    if expected == 0:
        assert read_github_output(outputs.read_text()) == {"venv": sys.prefix}
    else:
        assert done.stdout.startswith("::error title=install"), done.stdout


def test_the_action_masks_the_kept_files_unless_told_not_to(tmp_path: Path) -> None:
    python = stand_in_python(tmp_path)
    inputs = action_inputs({"guide": "g.md", "mask-files": "false"})
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path)}
    flags = DEFAULT_FLAGS | {"MASK_FILES": ""}  # mask-files false
    done = run_action_step("Run the guide", inputs, str(python.parent.parent), tmp_path, env, flags)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "--mask-files" not in Path(f"{python}.args").read_text().splitlines()


def test_the_guide_workflow_masks_the_files_it_uploads() -> None:
    given = action_step(WORKFLOWS[GUIDE_RUN].jobs["run"])["with"]
    assert str(given["mask-files"]).lower() == "true"
    assert steps_using(WORKFLOWS[GUIDE_RUN], "run", "actions/upload-artifact")  # what the masking is for


CALLER_LINES = 15  # issue 27: a whole nightly of another repository's guide on its own Ascend runner


def test_the_documented_caller_runs_its_guide_through_guide_run_with_what_it_declares() -> None:
    """docs/ci.md's nightly of another repository: a call of guide-run.yml at a pinned commit, on a self-hosted
    runner, in the guide's image; the inputs and secrets it gives are ones guide-run.yml declares, and its token
    grants what guide-run.yml's jobs ask for (a called workflow gets no more than its caller gives)."""
    text = documented_caller()
    assert len(text.splitlines()) <= CALLER_LINES, text
    caller = parse_workflow(text.replace("COMMIT_SHA", "0" * 40), "docs-caller.yml")
    [job] = caller.jobs.values()
    assert job["uses"] == f"OWNER/guide-guard/.github/workflows/{GUIDE_RUN}@{'0' * 40}"
    called = WORKFLOWS[GUIDE_RUN].doc["on"]["workflow_call"]
    given, secrets = job["with"], job.get("secrets") or {}
    assert set(given) <= set(called["inputs"]), set(given) - set(called["inputs"])
    assert {name for name, spec in called["inputs"].items() if spec.get("required")} <= set(given)
    assert set(secrets) <= set(called["secrets"]) and secrets != "inherit"
    assert not self_hosted_labels_are_github_hosted(json.loads(given["runner-labels"]))
    assert given["image"] and "container-options" in given
    # the job limit leaves the harness time (guide-run.yml refuses less than the margin and a minute)
    assert int(given["timeout-minutes"]) > DEADLINE_MARGIN_MINUTES
    # the token's scopes: every one a job of guide-run.yml asks for, at most read
    asked = {scope for j in WORKFLOWS[GUIDE_RUN].jobs.values() for scope in (j.get("permissions") or {})}
    assert asked <= set(caller.doc["permissions"]), asked - set(caller.doc["permissions"])
    # the rules every workflow here follows: started by maintainers only, the version beside the pin, read-only
    # (pinned to a commit, no pasted expression: zizmor, test_workflow_security.py's documented workflows)
    assert caller.triggers <= {"schedule", "workflow_dispatch"}
    assert pinning_violations(caller) == [] and permission_violations(caller) == []
    assert untrusted_trigger_violations(caller, WORKFLOWS) == []


def self_hosted_labels_are_github_hosted(labels: list[str]) -> bool:
    return all(re.fullmatch(r"(ubuntu|windows|macos)-[\w.-]+", label) for label in labels)


def test_guide_run_checks_out_guide_guard_at_its_own_commit_wherever_it_is_called_from() -> None:
    """Every job of guide-run.yml that installs or uses guide-guard takes it from `.guide-guard`, checked out
    from the called workflow's own repository and commit (the job context's workflow_repository and
    workflow_sha), after the caller's checkout (which empties the workspace) and before its first use."""
    workflow = WORKFLOWS[GUIDE_RUN]
    users = []
    for job_id, job in workflow.jobs.items():
        steps = job.get("steps") or []
        uses = [
            i
            for i, step in enumerate(steps)
            if GUIDE_GUARD_CHECKOUT in str(step.get("uses", "")) + str(step.get("run", ""))
        ]
        if not uses:
            assert "pip install" not in str(steps), f"{job_id}: installs something else than guide-guard"
            continue
        users.append(job_id)
        checkouts = [i for i, step in enumerate(steps) if str(step.get("uses", "")).startswith("actions/checkout@")]
        assert len(checkouts) == 2, f"{job_id}: the caller's repository, then guide-guard"
        caller_checkout, own = (steps[i].get("with") or {} for i in checkouts)
        assert "repository" not in caller_checkout and "path" not in caller_checkout
        assert own == {
            "repository": "${{ job.workflow_repository || inputs.guide-guard-repository }}",
            "ref": "${{ job.workflow_sha || inputs.guide-guard-ref }}",
            "path": GUIDE_GUARD_CHECKOUT,
            "persist-credentials": False,
        }
        assert checkouts[1] < min(uses), f"{job_id}: guide-guard is used before it is checked out"
        # where neither the job context nor the caller names guide-guard, the job stops before the checkout,
        # which would otherwise take the calling repository as guide-guard
        guard = steps[checkouts[1] - 1]
        assert guard["if"] == (
            "${{ !(job.workflow_sha || inputs.guide-guard-ref)"
            " || !(job.workflow_repository || inputs.guide-guard-repository) }}"
        )
        assert "::error " in guard["run"] and "exit 1" in guard["run"] and "guide-guard-ref" in guard["run"]
    # guides.yml, the one caller here, names guide-guard (itself, at its commit) for such a runner, and act
    [call] = [
        job for job in WORKFLOWS["guides.yml"].jobs.values() if job.get("uses") == f"./.github/workflows/{GUIDE_RUN}"
    ]
    assert call["with"]["guide-guard-repository"] == "${{ github.repository }}"
    assert call["with"]["guide-guard-ref"] == "${{ github.sha }}"
    assert set(users) == {"decide", "run", "record"}
    # the action's steps come from that checkout, and nothing runs from the caller's workspace as guide-guard
    assert {str(s["uses"]) for _, _, s in workflow.steps() if local_action(s)} == {f"./{GUIDE_GUARD_CHECKOUT}"}


def test_the_documented_workflow_of_another_repository_uses_the_action_whole() -> None:
    text = documented_workflow()
    doc = yaml.load(text, Loader=WorkflowLoader)
    # about ten lines, and one more since its checkout keeps no credentials (zizmor: artipacked)
    assert len(text.splitlines()) <= 14, "docs/ci.md promises a workflow of about ten lines"
    [job] = doc["jobs"].values()
    [step] = [s for s in job["steps"] if str(s.get("uses", "")) == "OWNER/guide-guard@COMMIT_SHA"]
    declared = ACTION.doc["action"]["inputs"]
    assert set(step["with"]) <= set(declared) and {"guide"} <= set(step["with"])
    # the reports it uploads are where the action leaves them by default
    [upload] = [s for s in job["steps"] if str(s.get("uses", "")).startswith("actions/upload-artifact@")]
    assert upload["with"]["path"] == str(Path(declared["output-dir"]["default"]).parent)
    assert upload["if"] == "always()"
    assert not [e for e in EXPRESSION.findall(text) if "secrets" in e]
    # with a real commit in place of COMMIT_SHA it follows the pinning rule (actionlint, zizmor: test_workflow_security.py)
    pinned = parse_workflow(text.replace("COMMIT_SHA", "0" * 40), "docs-example.yml")
    assert pinning_violations(pinned) == [] and permission_violations(pinned) == []


def test_every_way_in_reads_a_guide_as_the_label_contract_unless_told_otherwise() -> None:
    """A guide without labels runs nothing unless a plain dialect is asked for: ci.run's default, the registry
    entry's, the reusable workflow's input and the action's (empty: ci.run's) all say `labels`."""
    from ci.github.registry.model import Entry
    from ci.run import build_parser

    assert build_parser().parse_args(["guide.md"]).dialect == "labels"
    assert Entry.__dataclass_fields__["dialect"].default == "labels"
    assert WORKFLOWS[GUIDE_RUN].doc["on"]["workflow_call"]["inputs"]["dialect"]["default"] == "labels"
    declared = ACTION.doc["action"]["inputs"]["dialect"]
    assert declared["default"] == "" and "empty is labels" in declared["description"]
