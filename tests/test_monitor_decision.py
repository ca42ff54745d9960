"""The monitor's pure decision, table by table: what it saw and what it remembers -> whether a run is needed."""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

import pytest

from ci.maintain.monitor import STATE_VERSION, Observations, Release, decide, record_result

REPO = "example/project"
MODEL = "org/tiny-model"
SHA_A, SHA_B = "a" * 40, "b" * 40
MODEL_1, MODEL_2 = "1" * 40, "2" * 40
GUIDE_X, GUIDE_Y = "x" * 64, "y" * 64
NOW = "2026-01-02T03:04:05+00:00"

SEEN = Observations(
    guide="docs/guide.md",
    guide_sha256=GUIDE_X,
    repo=REPO,
    release=Release(ref="v1.0", commit_sha=SHA_A, source="release"),
    release_error=None,
    model=MODEL,
    model_sha=MODEL_1,
    model_error=None,
)


def seen(**changes: Any) -> Observations:
    return dataclasses.replace(SEEN, **changes)


def remembered(**changes: Any) -> dict[str, Any]:
    """The state after a check that saw SEEN, with CHANGES on top."""
    state = {
        "version": STATE_VERSION,
        "guide": SEEN.guide,
        "guide_sha256": GUIDE_X,
        "upstream": {"repo": REPO, "ref": "v1.0", "commit_sha": SHA_A, "source": "release"},
        "model": {"id": MODEL, "sha": MODEL_1},
    }
    return state | changes


FAILED_ONCE = {"last_result": {"result": "failed", "ref": "v1.0"}, "failures_in_a_row": 1, "retries_in_a_row": 0}

DECISIONS: list[tuple[str, dict[str, Any], Observations, int, bool, dict[str, str], str]] = [
    # (case, state, seen, max_retries, need_to_test, signal statuses, words of the reason)
    (
        "first check",
        {},
        SEEN,
        2,
        True,
        {"release": "fired", "branch": "skipped", "guide": "fired", "model": "fired", "retry": "quiet"},
        f"no earlier record of {REPO}: its latest release is v1.0 (also: guide, model)",
    ),
    (
        "nothing changed",
        remembered(),
        SEEN,
        2,
        False,
        {"release": "quiet", "branch": "skipped", "guide": "quiet", "model": "quiet", "retry": "quiet"},
        "nothing changed since the last check",
    ),
    (
        "new release",
        remembered(),
        seen(release=Release(ref="v1.1", commit_sha=SHA_B, source="release")),
        2,
        True,
        {"release": "fired", "branch": "skipped", "guide": "quiet", "model": "quiet", "retry": "quiet"},
        f"new upstream release v1.1 of {REPO} (was v1.0)",
    ),
    (
        "a moved tag",
        remembered(),
        seen(release=Release(ref="v1.0", commit_sha=SHA_B, source="tag")),
        2,
        True,
        {"release": "fired", "branch": "skipped", "guide": "quiet", "model": "quiet", "retry": "quiet"},
        f"v1.0 of {REPO} now points at {SHA_B[:12]} (was {SHA_A[:12]})",
    ),
    (
        "the guide changed",
        remembered(),
        seen(guide_sha256=GUIDE_Y),
        2,
        True,
        {"release": "quiet", "branch": "skipped", "guide": "fired", "model": "quiet", "retry": "quiet"},
        f"the guide changed (sha256 {GUIDE_X[:12]} -> {GUIDE_Y[:12]})",
    ),
    (
        "new model revision",
        remembered(),
        seen(model_sha=MODEL_2),
        2,
        True,
        {"release": "quiet", "branch": "skipped", "guide": "quiet", "model": "fired", "retry": "quiet"},
        f"{MODEL} has a new revision {MODEL_2[:12]} (was {MODEL_1[:12]})",
    ),
    (
        "release lookup failed",
        remembered(),
        seen(release=None, release_error="rate limited"),
        2,
        False,
        {"release": "unknown", "branch": "skipped", "guide": "quiet", "model": "quiet", "retry": "quiet"},
        "nothing changed since the last check (unknown: release)",
    ),
    (
        "a failed run is retried",
        remembered(**FAILED_ONCE),
        SEEN,
        2,
        True,
        {"release": "quiet", "branch": "skipped", "guide": "quiet", "model": "quiet", "retry": "fired"},
        "the previous run failed (on v1.0): retry 1 of 2",
    ),
    (
        "retries spent",
        remembered(**FAILED_ONCE | {"failures_in_a_row": 3, "retries_in_a_row": 2}),
        SEEN,
        2,
        False,
        {"release": "quiet", "branch": "skipped", "guide": "quiet", "model": "quiet", "retry": "quiet"},
        "nothing changed since the last check",
    ),
    (
        "no retries allowed",
        remembered(**FAILED_ONCE),
        SEEN,
        0,
        False,
        {"release": "quiet", "branch": "skipped", "guide": "quiet", "model": "quiet", "retry": "quiet"},
        "nothing changed since the last check",
    ),
    (
        "no upstream named",
        {},
        seen(repo=None, release=None, model=None, model_sha=None),
        2,
        True,
        {"release": "skipped", "branch": "skipped", "guide": "fired", "model": "skipped", "retry": "quiet"},
        "no earlier record of the guide's content",
    ),
]


@pytest.mark.parametrize(
    ("state", "observed", "max_retries", "need_to_test", "statuses", "reason"),
    [pytest.param(*row[1:], id=row[0]) for row in DECISIONS],
)
def test_decide(
    state: dict[str, Any],
    observed: Observations,
    max_retries: int,
    need_to_test: bool,
    statuses: dict[str, str],
    reason: str,
) -> None:
    before = copy.deepcopy(state)
    decision, new_state = decide(state, observed, max_retries=max_retries, now=NOW)
    assert decision["need_to_test"] is need_to_test
    assert {name: signal["status"] for name, signal in decision["signals"].items()} == statuses
    assert decision["reason"] == reason
    assert decision["checked_at"] == NOW
    assert state == before  # pure: the state it was given is left as it was
    assert new_state["version"] == STATE_VERSION
    assert new_state["guide_sha256"] == observed.guide_sha256
    assert new_state["last_decision"]["need_to_test"] is need_to_test


def test_the_ref_is_the_latest_release_else_the_one_remembered() -> None:
    decision, new_state = decide(remembered(), seen(release=None, release_error="down"), max_retries=2, now=NOW)
    assert (decision["ref"], decision["commit_sha"]) == ("v1.0", SHA_A)
    assert new_state["upstream"]["ref"] == "v1.0"
    decision, new_state = decide(remembered(), seen(release=Release("v2.0", None, "tag")), max_retries=2, now=NOW)
    assert (decision["ref"], decision["commit_sha"]) == ("v2.0", None)
    assert new_state["upstream"] == {"repo": REPO, "ref": "v2.0", "commit_sha": None, "source": "tag"}
    decision, _ = decide({}, seen(repo=None, release=None), max_retries=2, now=NOW)
    assert decision["ref"] is None


def test_a_watched_branch_gives_its_head_commit_as_the_ref() -> None:
    on_branch = seen(release=None, branch="main", branch_sha=SHA_B, watched=frozenset({"branch", "guide", "model"}))
    decision, new_state = decide(remembered(), on_branch, max_retries=2, now=NOW)
    assert (decision["ref"], decision["commit_sha"]) == (SHA_B, SHA_B)
    assert decision["signals"]["branch"]["status"] == "fired" and decision["signals"]["release"]["status"] == "skipped"
    assert new_state["branch"] == {"repo": REPO, "branch": "main", "sha": SHA_B}
    assert new_state["retries_in_a_row"] == 0  # a new commit gives a failure streak its own retries
    # the branch lookup failed: the commit recorded last time is still the one to test
    failed = dataclasses.replace(on_branch, branch_sha=None, branch_error="down")
    decision, _ = decide(new_state, failed, max_retries=2, now=NOW)
    assert decision["ref"] == SHA_B and decision["signals"]["branch"]["status"] == "unknown"


def test_deciding_twice_on_the_same_upstream_needs_no_second_run() -> None:
    _, state = decide({}, SEEN, max_retries=2, now=NOW)
    decision, _ = decide(state, SEEN, max_retries=2, now=NOW)
    assert decision["need_to_test"] is False


@pytest.mark.parametrize(
    ("fired_by", "retries_after"),
    [
        (seen(), 1),  # only the retry fired: one more retry spent
        (seen(guide_sha256=GUIDE_Y), 0),  # something changed: the new failure streak gets its own retries
        (seen(model_sha=MODEL_2), 0),
    ],
)
def test_retries_in_a_row(fired_by: Observations, retries_after: int) -> None:
    _, new_state = decide(remembered(**FAILED_ONCE), fired_by, max_retries=2, now=NOW)
    assert new_state["retries_in_a_row"] == retries_after


RESULTS: list[tuple[str, dict[str, Any], str, int, int]] = [
    # (case, state, result, failures_in_a_row after, retries_in_a_row after)
    ("first run passed", {}, "passed", 0, 0),
    ("first run failed", {}, "failed", 1, 0),
    ("another failure", {"failures_in_a_row": 2, "retries_in_a_row": 1}, "failed", 3, 1),
    ("a pass ends the streak", {"failures_in_a_row": 2, "retries_in_a_row": 2}, "passed", 0, 0),
]


@pytest.mark.parametrize(
    ("state", "result", "failures", "retries"), [pytest.param(*row[1:], id=row[0]) for row in RESULTS]
)
def test_record_result(state: dict[str, Any], result: str, failures: int, retries: int) -> None:
    before = copy.deepcopy(state)
    new_state = record_result(state, result, "v1.0", now=NOW)
    assert new_state["last_result"] == {"result": result, "ref": "v1.0", "recorded_at": NOW}
    assert (new_state["failures_in_a_row"], new_state.get("retries_in_a_row", 0)) == (failures, retries)
    assert new_state["version"] == STATE_VERSION
    assert state == before


def test_the_release_signal_compares_the_latest_release_with_the_ref_the_guide_is_written_for() -> None:
    # written for an older release: said in the release signal's detail, the reason and upstream_drift
    decision, _ = decide(remembered(), seen(written_for="v0.9"), max_retries=2, now=NOW)
    release = decision["signals"]["release"]
    assert release["status"] == "quiet"  # the comparison never fires a run by itself
    assert release["detail"] == (
        "v1.0 is still the latest release; the guide is written for v0.9; upstream's latest release is v1.0"
    )
    assert release["written_for"] == "v0.9"
    assert decision["upstream_drift"] == "the guide is written for v0.9; upstream's latest release is v1.0"
    assert decision["reason"] == "nothing changed since the last check"
    # a new release carries the comparison into the reason
    newer = seen(written_for="v0.9", release=Release(ref="v1.1", commit_sha=SHA_B, source="release"))
    decision, _ = decide(remembered(), newer, max_retries=2, now=NOW)
    assert decision["reason"] == (
        f"new upstream release v1.1 of {REPO} (was v1.0); the guide is written for v0.9; upstream's latest release is v1.1"
    )
    # written for the latest release: no drift
    decision, _ = decide(remembered(), seen(written_for="v1.0"), max_retries=2, now=NOW)
    assert decision["signals"]["release"]["detail"].endswith("; the guide is written for v1.0, this release")
    assert decision["upstream_drift"] is None
    # nothing to compare with: the release is unknown, or the guide names nothing
    unknown = seen(written_for="v0.9", release=None, release_error="GitHub API down")
    decision, _ = decide(remembered(), unknown, max_retries=2, now=NOW)
    assert decision["signals"]["release"]["detail"] == "GitHub API down" and decision["upstream_drift"] is None
    decision, _ = decide(remembered(), SEEN, max_retries=2, now=NOW)
    assert "written_for" not in decision["signals"]["release"] and decision["upstream_drift"] is None


@pytest.mark.parametrize(
    ("max_retries", "failures", "detail"),
    [
        (2, 3, "the previous run failed 3 times in a row; all 2 retries are spent until something changes"),
        (1, 2, "the previous run failed 2 times in a row; its one retry is spent until something changes"),
        (
            0,
            1,
            "the previous run failed 1 time in a row; no retry is allowed (--max-retries 0) until something changes",
        ),
    ],
)
def test_the_retry_signal_counts_in_english(max_retries: int, failures: int, detail: str) -> None:
    state = remembered(**FAILED_ONCE | {"failures_in_a_row": failures, "retries_in_a_row": max_retries})
    decision, _ = decide(state, SEEN, max_retries=max_retries, now=NOW)
    assert decision["signals"]["retry"]["detail"] == detail
