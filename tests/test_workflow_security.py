"""The workflows' security: zizmor and actionlint over every workflow, the composite action and docs/ci.md's
workflows, each shown to catch what the rules it replaced caught, and the rules they cannot express (no pull
request reaches a self-hosted runner, minimal permissions, the same pin everywhere with its version).
"""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

import pytest
import yaml
from workflows import (
    ACTION,
    ACTIONLINT_SCHEMA_GAP,
    GUIDE_RUN,
    ROOT,
    STEP_FILES,
    TRUSTED_TRIGGERS,
    WORKFLOWS,
    ZIZMOR_INPUTS,
    ZIZMOR_OPTIONS,
    Workflow,
    action_as_workflow,
    action_refs,
    actionlint_findings,
    documented_caller,
    documented_workflow,
    parse_workflow,
    permission_violations,
    pinning_violations,
    run_actionlint,
    run_zizmor,
    self_hosted_jobs,
    untrusted_trigger_violations,
)


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


def test_every_workflow_declares_minimal_permissions() -> None:
    problems = [p for w in WORKFLOWS.values() for p in permission_violations(w)]
    assert not problems, "\n".join(problems)


def test_third_party_actions_name_their_version_in_a_comment_beside_the_pin() -> None:
    # the pin itself, a full commit SHA, is zizmor's (unpinned-uses): test_zizmor_catches_what_the_rules_it_replaced_caught
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
# actionlint finds the untrusted value (zizmor: every value, test_zizmor_catches_what_the_rules_it_replaced_caught)
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
      - uses: actions/setup-python@a309ff8b426b58ec0e2a45f0f869d46889d02405
      - {uses: actions/cache@27d5ce7f107fe9357f9df03efb73ab90386fccae}
"""


def test_the_rules_catch_workflows_that_break_them() -> None:
    reusable = parse_workflow(SELF_HOSTED_BY_EXPRESSION, "npu.yml")
    workflows = {"npu.yml": reusable}
    assert untrusted_trigger_violations(parse_workflow(UNTRUSTED_PR), workflows)
    assert untrusted_trigger_violations(parse_workflow(CALLS_SELF_HOSTED), workflows)
    assert self_hosted_jobs(reusable, workflows) == ["run"]
    assert len(permission_violations(parse_workflow(WRITE_PERMISSIONS))) == 2
    assert permission_violations(parse_workflow(NO_PERMISSIONS))
    unpinned = pinning_violations(parse_workflow(UNPINNED))
    assert len(unpinned) == 2, unpinned
    assert "actions/setup-python@a309ff8b426b58ec0e2a45f0f869d46889d02405: name the version" in unpinned[0]
    assert "`uses: actions/cache@27d5ce7f107fe9357f9df03efb73ab90386fccae` not written on a line" in unpinned[1]


def test_the_key_on_is_read_as_github_reads_it() -> None:
    # PyYAML's YAML 1.1 would make `on` the boolean True (and `yes`/`off` booleans too)
    workflow = parse_workflow("on: {push: {branches: [main]}}\njobs: {}\nenv: {A: yes, B: off, C: true}")
    assert workflow.triggers == {"push"}
    assert workflow.doc["env"] == {"A": "yes", "B": "off", "C": True}


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
# zizmor: pinning, permissions, dangerous triggers, template injection, secrets


def test_every_workflow_the_action_and_dependabot_pass_zizmor() -> None:
    """The repository's files as .ci/run checks them; what is kept on purpose is ignored in .github/zizmor.yml."""
    done, findings = run_zizmor(ROOT)
    assert not findings, "\n".join(map(str, findings)) + "\n" + done.stderr
    assert done.returncode == 0, done.stdout + done.stderr
    # .ci/run runs the same command, so CI fails on a finding even where the suite is not run
    command = " ".join((".venv/bin/zizmor", *ZIZMOR_OPTIONS, *ZIZMOR_INPUTS))
    assert command in (ROOT / ".ci" / "run").read_text(encoding="utf-8")


# docs/ci.md's workflows are short on purpose: a name for each job, a concurrency group and a comment on each
# permission (zizmor's pedantic code smells) would make them longer than what they show. Every other audit holds.
DOCS_ZIZMOR_CONFIG = """\
rules:
  anonymous-definition: {disable: true}
  concurrency-limits: {disable: true}
  undocumented-permissions: {disable: true}
"""


def test_the_documented_workflows_pass_zizmor(tmp_path: Path) -> None:
    """docs/ci.md's workflows of another repository, their COMMIT_SHA made a commit."""
    workflows = tmp_path / ".github" / "workflows"
    workflows.mkdir(parents=True)
    (tmp_path / ".github" / "zizmor.yml").write_text(DOCS_ZIZMOR_CONFIG, encoding="utf-8")
    (workflows / "docs-example.yml").write_text(documented_workflow().replace("COMMIT_SHA", "0" * 40))
    (workflows / "docs-caller.yml").write_text(documented_caller().replace("COMMIT_SHA", "0" * 40))
    done, findings = run_zizmor(tmp_path, ".github/workflows/")
    assert not findings, "\n".join(map(str, findings)) + "\n" + done.stderr
    assert done.returncode == 0 and "docs-caller.yml" in done.stderr, done.stderr


# The rules zizmor took over, each planted in a copy of the repository's files: (file, text, planted instead,
# the audit that must find it). One line becomes another, so .github/zizmor.yml's ignores stay on their lines.
CHECKOUT = "actions/checkout@de0fac2e4500dabe0009e67214ff5f5447ce83dd # v6.0.2"
PLANTED = {
    # it runs with the base repository's token and secrets on a fork's event
    "pull_request_target": ("ci.yml", "  pull_request:\n", "  pull_request_target:\n", "dangerous-triggers"),
    # `${{ }}` is pasted into a script before the shell reads it: every value goes through env:
    "an event field pasted into a script": (
        "action-demo.yml",
        'echo "verdict: $VERDICT;',
        'echo "verdict: ${{ github.event.pull_request.title }};',
        "template-injection",
    ),
    "an input pasted into the action's script": (
        "action.yml",
        '"$HARNESS_VENV/bin/guide-guard" "$GUIDE" --list',
        '"$HARNESS_VENV/bin/guide-guard" "${{ inputs.guide }}" --list',
        "template-injection",
    ),
    # stricter than an attacker needs (pedantic): no review has to decide which values are safe
    "a value no attacker sets pasted into a script": (
        "ci.yml",
        "run: sudo sysctl -w kernel.yama.ptrace_scope=0",
        "run: echo ${{ github.sha }} && sudo sysctl -w kernel.yama.ptrace_scope=0",
        "template-injection",
    ),
    "a matrix value pasted into a script": (
        "ci.yml",
        "run: bash .ci/run",
        "run: bash .ci/run ${{ matrix.python }}",
        "template-injection",
    ),
    "an action at a tag": ("ci.yml", CHECKOUT, "actions/checkout@v6.0.2 # v6.0.2", "unpinned-uses"),
    "an action at a short commit": ("ci.yml", CHECKOUT, "actions/checkout@de0fac2 # v6.0.2", "unpinned-uses"),
    "the action's own action at a tag": (
        "action-demo.yml",
        "actions/setup-python@a309ff8b426b58ec0e2a45f0f869d46889d02405 # v6.2.0",
        "actions/setup-python@v6 # v6.2.0",
        "unpinned-uses",
    ),
    "another repository's workflow at a tag": (
        "guides.yml",
        "uses: ./.github/workflows/guide-run.yml",
        "uses: octo/guide-guard/.github/workflows/guide-run.yml@v1",
        "unpinned-uses",
    ),
    "a docker action at a tag": (
        "ci.yml",
        "run: sudo sysctl -w kernel.yama.ptrace_scope=0",
        "uses: docker://alpine:3.20",
        "unpinned-images",
    ),
}


def copy_of_the_repository(tmp_path: Path) -> Path:
    """The files zizmor checks, and its configuration, where a test may change them."""
    for name in (*ZIZMOR_INPUTS, ".github/zizmor.yml"):
        source, copy = ROOT / name, tmp_path / name
        if source.is_dir():
            shutil.copytree(source, copy)
        else:
            copy.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, copy)
    return tmp_path


@pytest.mark.parametrize("case", PLANTED)
def test_zizmor_catches_what_the_rules_it_replaced_caught(case: str, tmp_path: Path) -> None:
    name, text, planted, audit = PLANTED[case]
    copy = copy_of_the_repository(tmp_path)
    path = copy / ("action.yml" if name == "action.yml" else f".github/workflows/{name}")
    original = path.read_text(encoding="utf-8")
    assert text in original, f"{name} no longer holds {text!r}: plant the violation elsewhere"
    path.write_text(original.replace(text, planted, 1), encoding="utf-8")
    done, findings = run_zizmor(copy)
    assert {(finding.file, finding.audit) for finding in findings} == {(name, audit)}, done.stdout + done.stderr
    assert done.returncode != 0


# ---------------------------------------------------------------------------------------------------------
# Dependabot


def test_dependabot_keeps_the_pinned_actions_current() -> None:
    config = yaml.safe_load((ROOT / ".github" / "dependabot.yml").read_text(encoding="utf-8"))
    assert config["version"] == 2
    [actions] = [update for update in config["updates"] if update["package-ecosystem"] == "github-actions"]
    assert actions["directory"] == "/" and actions["schedule"]["interval"] == "weekly"
