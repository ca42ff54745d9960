"""Releases: `guide-guard-release check` (python -m ci.github.release), the release workflow, and the docs' pins.

The check runs in-process on small checkouts written in tmp_path; once as a command on this repository, which
must be releasable at the version ci/__init__.py holds (its CHANGELOG.md section, its docs' pins).
"""

from __future__ import annotations

import copy
import os
import shlex
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml
from workflows import WORKFLOWS, Workflow, parse_workflow, permission_violations, pinning_violations

import ci
from ci.github.release import build_parser, changelog_sections, main, pinned_versions

ROOT = Path(__file__).resolve().parents[1]
RELEASE = "release.yml"

CHANGELOG = """\
# Changelog

## [Unreleased]

## [0.2.0] - 2026-12-04

### Added

- Releases.

## [0.1.5] - 2026-11-01

- Earlier.

[0.2.0]: https://example.invalid/releases/tag/v0.2.0
"""
CI_MD = """\
# CI

```yaml
      - uses: OWNER/guide-guard@COMMIT_SHA # v0.2.0
    uses: OWNER/guide-guard/.github/workflows/guide-run.yml@COMMIT_SHA # v0.2.0
```
"""


def write_checkout(
    root: Path, *, version: str = "0.2.0", changelog: str | None = CHANGELOG, ci_md: str = CI_MD
) -> Path:
    (root / "ci").mkdir(parents=True)
    (root / "ci" / "__init__.py").write_text(f'"""The package."""\n\n__all__ = []\n\n__version__ = "{version}"\n')
    if changelog is not None:
        (root / "CHANGELOG.md").write_text(changelog, encoding="utf-8")
    (root / "docs").mkdir()
    (root / "docs" / "ci.md").write_text(ci_md, encoding="utf-8")
    (root / "README.md").write_text("# guide-guard\n\n`uses: OWNER/guide-guard@COMMIT_SHA` (action.yml)\n")
    (root / "action.yml").write_text("#   - uses: OWNER/guide-guard@<commit sha> # vX.Y.Z\nname: guide-guard\n")
    return root


def check(capsys: pytest.CaptureFixture[str], root: Path, tag: str) -> tuple[int, str, list[str]]:
    status = main(["check", "--tag", tag, "--root", str(root)])
    captured = capsys.readouterr()
    return status, captured.out, [line for line in captured.err.splitlines() if line.startswith("[ERROR] ")]


def step_outputs(path: Path) -> dict[str, str]:
    """$GITHUB_OUTPUT's entries as the runner reads them: `name=value`, or `name<<DELIMITER` lines DELIMITER."""
    found: dict[str, str] = {}
    lines = iter(path.read_text(encoding="utf-8").split("\n"))
    for line in lines:
        if "<<" in line:
            name, delimiter = line.split("<<", 1)
            found[name] = "\n".join(iter(lambda: next(lines), delimiter))
        elif line:
            name, _, found[name] = line.partition("=")
    return found


# ---------------------------------------------------------------------------------------------------------
# The check


def test_a_releasable_checkout_passes_and_hands_the_workflow_its_notes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    outputs = tmp_path / "github_output"
    outputs.write_text("earlier=kept\n")
    monkeypatch.setenv("GITHUB_OUTPUT", str(outputs))
    status, out, errors = check(capsys, write_checkout(tmp_path / "repo"), "v0.2.0")
    assert (status, errors) == (0, [])
    assert out == (
        "v0.2.0 can be released: ci/__init__.py says 0.2.0, CHANGELOG.md:5 is its section (2026-12-04),"
        " 2 lines of the docs pin it\n"
    )
    # the section's own text, up to the next release's heading: the release's notes
    assert step_outputs(outputs) == {
        "earlier": "kept",
        "tag": "v0.2.0",
        "version": "0.2.0",
        "notes": "### Added\n\n- Releases.",
    }


@pytest.mark.parametrize(
    ("tag", "files", "expected"),
    [
        pytest.param(
            "v0.3.0",
            {},
            [
                'ci/__init__.py:5: __version__ is "0.2.0", and the tag v0.3.0 says 0.3.0: set `__version__ = "0.3.0"`'
                " in the release commit (or release v0.2.0)",
                "CHANGELOG.md: no section for 0.3.0: add `## [0.3.0] - YYYY-MM-DD` (the release's day) above the"
                " earlier releases, with what changed (the entries under [Unreleased] move there)",
                "docs/ci.md:4: tells readers to pin v0.2.0, and the release is v0.3.0: write `# v0.3.0` there",
                "docs/ci.md:5: tells readers to pin v0.2.0, and the release is v0.3.0: write `# v0.3.0` there",
            ],
            id="tag-names-another-version",
        ),
        pytest.param(
            "v0.2.0",
            {"version": "0.1.0"},
            [
                'ci/__init__.py:5: __version__ is "0.1.0", and the tag v0.2.0 says 0.2.0: set `__version__ = "0.2.0"`'
                " in the release commit (or release v0.1.0)"
            ],
            id="version-not-bumped",
        ),
        pytest.param(
            "v0.2.0",
            {"changelog": CHANGELOG.replace("## [0.2.0] - 2026-12-04\n\n### Added\n\n- Releases.\n\n", "")},
            [
                "CHANGELOG.md: no section for 0.2.0: add `## [0.2.0] - YYYY-MM-DD` (the release's day) above the"
                " earlier releases, with what changed (the entries under [Unreleased] move there)"
            ],
            id="no-changelog-section",
        ),
        pytest.param(
            "v0.2.0",
            {"changelog": CHANGELOG.replace("## [0.2.0] - 2026-12-04", "## [0.2.0]")},
            [
                "CHANGELOG.md:5: the section of 0.2.0 has no date (none): write `## [0.2.0] - YYYY-MM-DD`,"
                " the release's day"
            ],
            id="section-without-date",
        ),
        pytest.param(
            "v0.2.0",
            {"changelog": CHANGELOG.replace("### Added\n\n- Releases.\n", "")},
            ["CHANGELOG.md:5: the section of 0.2.0 is empty: say what changed"],
            id="empty-section",
        ),
        pytest.param(
            "v0.2.0",
            {"changelog": CHANGELOG.replace("## [Unreleased]\n", "## [Unreleased]\n\n### Fixed\n\n- Not yet out.\n")},
            [
                "CHANGELOG.md:3: [Unreleased] holds entries: the changes they name would ship in 0.2.0 without being"
                " in its notes; move them into the section of 0.2.0 (the release commit does), leaving"
                " `## [Unreleased]` empty"
            ],
            id="entries-under-unreleased",
        ),
        pytest.param(
            "v0.2.0",
            {"changelog": None},
            ["CHANGELOG.md: no such file: write one, with a section `## [0.2.0] - YYYY-MM-DD` saying what changed"],
            id="no-changelog",
        ),
        pytest.param(
            "v0.2.0",
            {"ci_md": CI_MD.replace("# v0.2.0", "# v0.1.0", 1)},
            ["docs/ci.md:4: tells readers to pin v0.1.0, and the release is v0.2.0: write `# v0.2.0` there"],
            id="docs-pin-an-older-release",
        ),
    ],
)
def test_what_keeps_a_release_back_is_said_at_its_line_with_the_fix(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tag: str,
    files: dict[str, Any],
    expected: list[str],
) -> None:
    outputs = tmp_path / "github_output"
    monkeypatch.setenv("GITHUB_OUTPUT", str(outputs))
    status, out, errors = check(capsys, write_checkout(tmp_path / "repo", **files), tag)
    assert status == 2 and out == ""
    assert errors == [
        *[f"[ERROR] {line}" for line in expected],
        f"[ERROR] {tag} cannot be released: {len(expected)} problem{'s' if len(expected) > 1 else ''} to fix first",
    ]
    assert not outputs.exists(), "a refused release gave the workflow a tag to make"


@pytest.mark.parametrize("tag", ["0.2.0", "v0.2", "v0.2.0-rc.1", "v02.0.0", "release-0.2.0"])
def test_a_tag_that_is_not_v_and_a_version_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], tag: str
) -> None:
    status = main(["check", "--tag", tag, "--root", str(write_checkout(tmp_path))])
    err = capsys.readouterr().err
    assert status == 2 and err.startswith("usage: ")
    assert f"[ERROR] --tag {tag!r} is not a release tag: write v and the version as ci/__init__.py holds it" in err


def test_outside_a_checkout_the_check_says_where_to_run_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status, _, errors = check(capsys, tmp_path, "v0.2.0")
    assert status == 2
    assert errors[0] == "[ERROR] ci/__init__.py: no such file: run the check at the root of a guide-guard checkout"


def _git(root: Path, *args: str) -> None:
    env = {"PATH": os.environ["PATH"], "HOME": str(root), "GIT_CONFIG_NOSYSTEM": "1"}
    identity = ["-c", "user.name=t", "-c", "user.email=t@example.invalid", "-c", "init.defaultBranch=main"]
    subprocess.run(["git", *identity, "-C", str(root), *args], check=True, capture_output=True, env=env)


def test_a_release_by_hand_refuses_a_tag_that_already_exists(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = write_checkout(tmp_path / "repo")
    _git(root, "init", "-q")
    _git(root, "add", ".")
    _git(root, "commit", "-q", "-m", "release 0.2.0")
    # no such tag yet: the release by hand may make it
    assert main(["check", "--tag", "v0.2.0", "--root", str(root), "--new-tag"]) == 0
    _git(root, "tag", "-a", "v0.2.0", "-m", "v0.2.0")  # annotated, as a maintainer's pushed tag would be
    capsys.readouterr()
    status = main(["check", "--tag", "v0.2.0", "--root", str(root), "--new-tag", "true"])
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("[ERROR] ")]
    assert status == 2
    assert errors[0].startswith("[ERROR] the tag v0.2.0 already exists (on commit ")
    assert "re-run the release that its push started, or release the next version" in errors[0]
    # the pushed tag's own run checks it without --new-tag (the workflow passes false)
    assert main(["check", "--tag", "v0.2.0", "--root", str(root), "--new-tag", "false"]) == 0


def test_new_tag_outside_a_git_checkout_says_it_cannot_look(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = write_checkout(tmp_path / "repo")
    status = main(["check", "--tag", "v0.2.0", "--root", str(root), "--new-tag"])
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("[ERROR] ")]
    assert status == 2
    assert errors[0].startswith(f"[ERROR] --new-tag: cannot look for the tag v0.2.0 in {root}: ")
    assert errors[0].endswith("(run it in a git checkout)")


def test_the_pins_a_reader_copies_are_found_and_a_placeholder_is_none() -> None:
    text = textwrap.dedent("""\
        - uses: OWNER/guide-guard@0123456789abcdef0123456789abcdef01234567 # v1.2.3
          uses: OWNER/guide-guard/.github/workflows/guide-run.yml@COMMIT_SHA  #v0.10.0
        #   - uses: OWNER/guide-guard@<commit sha> # vX.Y.Z
        `uses: OWNER/guide-guard@COMMIT_SHA` (no version)
        - uses: actions/checkout@de0fac2e4500dabe0009e67214ff5f5447ce83dd # v6.0.2
        - uses: OWNER/guide-guard@COMMIT_SHA # v0.2.0.1
    """)
    assert [(pin.line, pin.version) for pin in pinned_versions("f.md", text)] == [(1, "1.2.3"), (2, "0.10.0")]


def test_changelog_sections_end_at_the_next_heading_or_the_link_references() -> None:
    sections = changelog_sections(CHANGELOG)
    assert [(s.version, s.date, s.line) for s in sections] == [
        ("Unreleased", "", 3),
        ("0.2.0", "2026-12-04", 5),
        ("0.1.5", "2026-11-01", 11),
    ]
    assert (sections[0].body, sections[2].body) == ("", "- Earlier.")


def test_between_releases_the_entries_under_unreleased_wait_for_the_next_release(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    moved_on = CHANGELOG.replace("## [Unreleased]\n", "## [Unreleased]\n\n### Fixed\n\n- Not yet out.\n")
    root = write_checkout(tmp_path / "repo", changelog=moved_on)
    status = main(["check", "--tag", "v0.2.0", "--root", str(root), "--between-releases"])
    assert (status, capsys.readouterr().out.split(":")[0]) == (0, "v0.2.0 can be released")
    # the release's own checks still hold in that mode
    (root / "docs" / "ci.md").write_text(CI_MD.replace("# v0.2.0", "# v0.1.0", 1), encoding="utf-8")
    assert main(["check", "--tag", "v0.2.0", "--root", str(root), "--between-releases"]) == 2
    assert "docs/ci.md:4: tells readers to pin v0.1.0" in capsys.readouterr().err


# ---------------------------------------------------------------------------------------------------------
# This repository


def test_this_repository_is_releasable_at_its_version_and_its_docs_pin_that_release() -> None:
    """The README's and the docs' `OWNER/guide-guard@SHA # vX.Y.Z` name a version CHANGELOG.md has: the one
    ci/__init__.py holds, whose section is the newest release's. Between releases, as the repository is most
    days, entries wait under [Unreleased]."""
    done = subprocess.run(
        [sys.executable, "-m", "ci.github.release", "check", "--tag", f"v{ci.__version__}", "--between-releases"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"v{ci.__version__} can be released: "), done.stdout
    # the check is not blind: docs/ci.md's workflow of another repository pins a release
    docs = (ROOT / "docs" / "ci.md").read_text(encoding="utf-8")
    assert {pin.version for pin in pinned_versions("docs/ci.md", docs)} == {ci.__version__}
    released = [s for s in changelog_sections((ROOT / "CHANGELOG.md").read_text(encoding="utf-8")) if s.date]
    assert released[0].version == ci.__version__, "the newest release's section comes first"


# ---------------------------------------------------------------------------------------------------------
# The release workflow


def release_job_violations(workflow: Workflow) -> list[str]:
    """What would let the write token of the release job be used other than to release a checked tag:
    - only a maintainer starts the workflow: a pushed tag, or workflow_dispatch;
    - the release job runs after a job that runs `guide-guard-release check` with a read-only token;
    - it checks nothing out and uses no action: no code of the repository or of others runs with the token."""
    problems = []
    on = workflow.doc["on"]
    push = on.get("push") if isinstance(on, dict) else None
    if workflow.triggers - {"push", "workflow_dispatch"} or ("push" in workflow.triggers and not _only_tags(push)):
        problems.append(f"{workflow.name}: started by {on}; only a pushed tag or workflow_dispatch may release")
    release = workflow.jobs.get("release", {})
    needs = release.get("needs", [])
    checks = [
        job_id
        for job_id in ([needs] if isinstance(needs, str) else needs)
        if any("guide-guard-release check" in str(step.get("run", "")) for step in workflow.jobs[job_id]["steps"])
        and _read_only(workflow.jobs[job_id])
    ]
    if not checks:
        problems.append(f"{workflow.name}: the release job does not need a read-only job that runs the check")
    problems += [
        f"{workflow.name}: the release job's step {step.get('name', step['uses'])!r} uses {step['uses']}"
        for step in release.get("steps", [])
        if "uses" in step
    ]
    return problems


def _only_tags(push: object) -> bool:
    """Whether PUSH, the `on: push` filter, starts the workflow on pushed tags only."""
    return isinstance(push, dict) and set(push) == {"tags"}


def _read_only(job: dict[str, Any]) -> bool:
    permissions = job.get("permissions", {})  # none of its own: the workflow's, which must be read-only
    return isinstance(permissions, dict) and all(level in ("read", "none") for level in permissions.values())


def release_workflow() -> Workflow:
    assert RELEASE in WORKFLOWS, f".github/workflows/{RELEASE} is missing"
    return WORKFLOWS[RELEASE]


def test_the_release_workflow_checks_the_tag_before_the_one_job_that_may_write() -> None:
    workflow = release_workflow()
    assert release_job_violations(workflow) == []
    assert pinning_violations(workflow) == []
    # the tag checked is the pushed one, or v and the version given by hand
    [check_step] = [s for s in workflow.jobs["check"]["steps"] if s.get("id") == "check"]
    assert check_step["env"]["TAG"] == (
        "${{ github.event_name == 'push' && github.ref_name || format('v{0}', inputs.version) }}"
    )
    # by hand, the tag must be new (the release job makes it at the commit checked), and the checkout has the tags
    assert check_step["env"]["NEW_TAG"] == "${{ github.event_name == 'workflow_dispatch' && 'true' || 'false' }}"
    [checkout] = [s for s in workflow.jobs["check"]["steps"] if str(s.get("uses", "")).startswith("actions/checkout@")]
    assert checkout["with"]["fetch-tags"] is True
    command = shlex.split(check_step["run"])
    assert command[0] == "guide-guard-release"
    for event_value in ("true", "false"):  # what the expression yields
        words = [w.replace("$TAG", f"v{ci.__version__}").replace("$NEW_TAG", event_value) for w in command[1:]]
        args = build_parser().parse_args(words)
        assert (args.command, args.tag, args.new_tag) == ("check", f"v{ci.__version__}", event_value)
    # the release is made of what the check passed on: its tag, and its CHANGELOG.md section as the notes
    check_job, release = workflow.jobs["check"], workflow.jobs["release"]
    assert check_job["outputs"] == {
        "tag": "${{ steps.check.outputs.tag }}",
        "notes": "${{ steps.check.outputs.notes }}",
    }
    [make] = release["steps"]
    assert make["env"]["TAG"] == "${{ needs.check.outputs.tag }}"
    assert make["env"]["NOTES"] == "${{ needs.check.outputs.notes }}"
    assert 'gh release create "$TAG" --target "$GITHUB_SHA"' in make["run"] and "--notes-file -" in make["run"]
    assert workflow.doc["on"]["workflow_dispatch"]["inputs"]["version"]["required"] is True
    # by hand from main alone (the release job needs the check, so it is skipped with it), a pushed tag always
    assert check_job["if"] == "github.event_name == 'push' || github.ref == 'refs/heads/main'"
    assert release["needs"] == "check" or "check" in release["needs"]


def test_the_write_scope_is_allowed_to_the_release_job_alone() -> None:
    workflow = release_workflow()
    assert workflow.jobs["release"]["permissions"] == {"contents": "write"}
    assert permission_violations(workflow) == []
    doc = yaml.safe_dump({**workflow.doc}, sort_keys=False)

    def changed(edit: Any, name: str = RELEASE) -> Workflow:
        copied = copy.deepcopy(workflow.doc)
        edit(copied)
        return Workflow(name, doc, copied)

    # the same scope in the check job, another scope in the release job, the job of another workflow
    assert permission_violations(changed(lambda d: d["jobs"]["check"].update(permissions={"contents": "write"})))
    assert permission_violations(changed(lambda d: d["jobs"]["release"]["permissions"].update(packages="write")))
    assert permission_violations(changed(lambda d: None, "ci.yml")) == [
        "ci.yml: job release permission contents: write"
    ]
    assert permission_violations(changed(lambda d: d.update(permissions={"contents": "write"})))


def test_the_release_rules_catch_a_job_that_would_write_otherwise() -> None:
    workflow = release_workflow()

    def changed(edit: Any) -> list[str]:
        copied = copy.deepcopy(workflow.doc)
        edit(copied)
        return release_job_violations(Workflow(RELEASE, workflow.text, copied))

    checkout = {"uses": "actions/checkout@de0fac2e4500dabe0009e67214ff5f5447ce83dd"}
    assert changed(lambda d: d["jobs"]["release"]["steps"].insert(0, checkout)) == [
        f"{RELEASE}: the release job's step {checkout['uses']!r} uses {checkout['uses']}"
    ]
    assert changed(lambda d: d["jobs"]["release"].pop("needs"))
    assert changed(lambda d: d["jobs"]["check"].update(permissions={"contents": "write"}))
    assert changed(lambda d: d["on"]["push"].update(branches=["main"]))
    assert changed(lambda d: d["on"].update(pull_request=None))
    # a workflow written with the rules broken, read as GitHub reads it
    broken = parse_workflow("on: [push]\npermissions: {contents: read}\njobs:\n  release: {runs-on: x, steps: []}\n")
    assert len(release_job_violations(broken)) == 2
