"""guides.yml under act with registry entries that read their guides in the plain-fence dialect.

An upstream guide has no labels and no front matter: the entry's `dialect: fences` alone makes its ```shell
fences run, and its `timeout_rules` give their limits. One dispatch of the schedule group runs two such entries
(the demo moved out of the group): one whose expected text is in its output, one whose is not.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ElementTree
from collections.abc import Callable

from actrun import ActResult, ActRunner

GROUP = "weekly"
UPSTREAM_REF = "v9.8.7"  # the entries' upstream.ref: guide-run.yml's UPSTREAM_REF, put into `<UPSTREAM_REF>`
# act names a called workflow's jobs CALLER-JOB/CALLED-WORKFLOW/JOB; the matrix job's caller is the entry's name
GREEN, RED = "upstream-tool", "upstream-tool-red"
GREEN_GUIDE, RED_GUIDE = "docs/upstream/tool.md", "docs/upstream/tool-red.md"

# An upstream quick start as its project writes it: no label, no front matter.
GUIDE = """\
# Install the tool

Install the release under test:

```shell
echo "installing tool <UPSTREAM_REF>"
echo "tool version 4.5.6" >&2
```

```text
installing tool <UPSTREAM_REF>
tool version 4.5.x
```

## Build it

```shell
echo "cmake --build build -j 2: done"
```

## On a machine with the hardware

```shell skip
echo "this needs an NPU"
```
"""
INSTALL_LINE, BUILD_LINE, SKIP_LINE = 5, 17, 23  # the ```shell fences
VERSION_LINE = 12  # `tool version 4.5.x`, the second line of the ```text fence (line 10)
# a ```text fence whose second line the output does not hold (`4.5.x` stands for any version: its words differ)
RED_TEXT = GUIDE.replace("tool version 4.5.x", "tool release 4.5.x")

# limits by command kind, the first whose text the command holds wins. The skipped fence matches none: its limit,
# the dialect's default of 3 h, asks nothing of the job's 90 minutes (the registry's check), as it never runs.
RULES = '[{contains: "cmake --build", timeout: 20m}, {contains: "tool version", timeout: 90s}]'
DEFAULT_LIMIT_S = 10800.0  # a plain dialect's block that no rule matches (ci.guide.plan.DEFAULT_TIMEOUT_S)


def entry(name: str, guide: str) -> str:
    return (
        f"  - name: {name}\n    guide: {guide}\n    schedule: {GROUP}\n    timeout_minutes: 90\n"
        f"    dialect: fences\n    timeout_rules: {RULES}\n    upstream: {{ref: {UPSTREAM_REF}}}\n"
    )


# a matrix of several rows: act numbers each row's jobs (CALLER-JOB-N/CALLED-WORKFLOW/JOB), in the registry's order
GREEN_JOB, RED_JOB = f"{GREEN}-1/guide run/{GREEN_GUIDE}", f"{RED}-2/guide run/{RED_GUIDE}"


def as_github_reads_a_skipped_decision(runner: ActRunner) -> None:
    """guide-run.yml as GitHub evaluates it on a dispatch, where its `decide` job is skipped.

    GitHub gives a skipped job's outputs as empty, so `needs.decide.outputs.ref || inputs.upstream-ref` is the
    entry's ref; act gives them as their unevaluated expressions (nektos/act#2467), here
    `${{ steps.monitor.outputs.ref }}`, which wins the `||` and is evaluated empty again in the composite action.
    So the workspace's copy leaves out what GitHub reads as empty (tests/test_workflow_wiring.py pins the original).
    """
    workflow = runner.workspace / ".github" / "workflows" / "guide-run.yml"
    text = workflow.read_text(encoding="utf-8")
    skipped = "needs.decide.outputs.ref || "
    assert "UPSTREAM_REF: ${{ needs.decide.outputs.ref || inputs.upstream-ref }}" in text
    workflow.write_text(text.replace(skipped, ""), encoding="utf-8")


def test_registry_entries_in_the_fence_dialect_run_through_guides_yml(act: Callable[..., ActRunner]) -> None:
    runner = act(inputs={"group": GROUP})
    for path, text in ((GREEN_GUIDE, GUIDE), (RED_GUIDE, RED_TEXT)):
        (runner.workspace / path).parent.mkdir(parents=True, exist_ok=True)
        (runner.workspace / path).write_text(text, encoding="utf-8")
    registry = runner.workspace / "guides.yaml"
    text = registry.read_text(encoding="utf-8")
    assert "    schedule: weekly\n" in text
    # the demo leaves the group: the dispatch runs these two entries alone
    text = text.replace("    schedule: weekly\n", "    schedule: nightly\n")
    registry.write_text(text + "\n" + entry(GREEN, GREEN_GUIDE) + "\n" + entry(RED, RED_GUIDE), encoding="utf-8")
    as_github_reads_a_skipped_decision(runner)
    result = runner.run()

    jobs = result.jobs()
    assert jobs.get("guides/read the registry") == "success", (jobs, result.log_file)
    assert_green(result)
    assert_red(result)


def assert_green(result: ActResult) -> None:
    job = GREEN_JOB
    assert result.job(job) == "success", result.log_file
    outputs = result.outputs(job, "guide")
    assert (outputs["verdict"], outputs["exit_status"]) == ("passed", "0")
    assert json.loads(outputs["counts"]) == {"passed": 2, "skipped": 1}
    # the job log: the check's listing, before any block runs, with the limits the rules give
    listed = [
        line.split()[-1] for line in result.output_text(job).splitlines() if f"{GREEN_GUIDE}:{BUILD_LINE} " in line
    ]
    assert listed[0] == "timeout=1200s", listed
    # a folded group per fence that runs, named by the guide's own line; the skipped one said so
    assert [record["arg"] for record in result.commands(job, "group")] == [
        f'[1/3] #test in "Install the tool" at {GREEN_GUIDE}:{INSTALL_LINE}',
        f'[2/3] #test-setup in "Build it" at {GREEN_GUIDE}:{BUILD_LINE}',
    ]
    [skipped] = [line for line in result.output_text(job).splitlines() if line.startswith("[3/3] #3: ")]
    assert "SKIPPED" in skipped and skipped.endswith(": ```shell skip"), skipped
    # the step summary's recap: a row per fence, with its status and line
    summary = next(text for text in result.summaries(job) if f"{GREEN_GUIDE}: passed" in text)
    rows = [
        [cell.strip() for cell in row.strip("|").split("|")]
        for row in summary.splitlines()
        if row.startswith(("| 1 |", "| 2 |", "| 3 |"))
    ]
    assert [(row[2], row[7]) for row in rows] == [
        ("passed", str(INSTALL_LINE)),
        ("passed", str(BUILD_LINE)),
        ("skipped", str(SKIP_LINE)),
    ]

    report = result.artifact(f"{GREEN}-attempt-1")
    record = json.loads((report / "outputs" / "results.json").read_text(encoding="utf-8"))
    assert record["exit_status"] == 0
    blocks = [(b["line"], b["label"], b["status"], b["timeout_s"], b["message"]) for b in record["blocks"]]
    assert blocks == [
        # the first rule's text is not in it, the second's is: 90 s
        (INSTALL_LINE, "#test", "passed", 90.0, "output matched"),
        (BUILD_LINE, "#test-setup", "passed", 1200.0, "exit 0"),
        (SKIP_LINE, "#test-setup", "skipped", DEFAULT_LIMIT_S, "```shell skip"),
    ]
    # <UPSTREAM_REF> became the entry's ref in the command and in the text searched for
    install = record["blocks"][0]
    assert install["expected"] == f"installing tool {UPSTREAM_REF}\ntool version 4.5.x"
    # the block's one output, stdout and stderr merged, named by the record
    assert install["streams_merged"] is True and install["stderr_path"] is None
    output = report / "outputs" / install["stdout_path"]
    assert output.name == "001-1.output.txt"
    assert output.read_text(encoding="utf-8") == f"installing tool {UPSTREAM_REF}\ntool version 4.5.6\n"

    status = json.loads((result.artifact(f"guide-status-{GREEN}") / f"{GREEN}.json").read_text(encoding="utf-8"))
    assert (status["verdict"], status["ref"]) == ("passed", UPSTREAM_REF)

    cases = ElementTree.parse(report / "junit.xml").getroot().iter("testcase")
    shown = [(case.get("file"), case.get("line"), [child.tag for child in case]) for case in cases]
    assert shown == [
        (GREEN_GUIDE, str(INSTALL_LINE), ["system-out"]),
        (GREEN_GUIDE, str(BUILD_LINE), ["system-out"]),
        (GREEN_GUIDE, str(SKIP_LINE), ["skipped"]),
    ]


def assert_red(result: ActResult) -> None:
    job = RED_JOB
    assert result.job(job) == "failure", result.log_file
    outputs = result.outputs(job, "guide")
    assert (outputs["verdict"], outputs["exit_status"]) == ("failed", "1")
    # the annotation on the pull request's or run's page: the ```text fence's line the output departs at
    errors = [record["kvPairs"] for record in result.commands(job, "error") if record.get("kvPairs")]
    assert errors, result.log_file
    assert {"file": RED_GUIDE, "line": str(VERSION_LINE)}.items() <= errors[0].items(), errors
    assert any(f"{RED_GUIDE}: failed" in summary for summary in result.summaries(job))
    record = json.loads((result.artifact(f"{RED}-attempt-1") / "outputs" / "results.json").read_text())
    assert [(b["line"], b["status"]) for b in record["blocks"]] == [
        (INSTALL_LINE, "mismatch"),
        (BUILD_LINE, "not_run"),
        (SKIP_LINE, "not_run"),
    ]
    status = json.loads((result.artifact(f"guide-status-{RED}") / f"{RED}.json").read_text())
    assert status["verdict"] == "failed"
