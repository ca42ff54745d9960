"""The upstream monitor against loopback stand-ins for the GitHub API and the Hugging Face Hub."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from web_stub import WebStub, running_stub

from ci.monitor import main

REPO = "example/project"
MODEL = "org/tiny-model"
SHA_A = "a" * 40
SHA_B = "b" * 40
MODEL_SHA_1 = "1" * 40
MODEL_SHA_2 = "2" * 40

GUIDE = """\
---
ci:
  upstream:
    repo: example/project
    model: org/tiny-model
---

# Guide

<!--
```shell #test-setup store="upstream_ref"
echo "${UPSTREAM_REF:?}"
```
-->

```shell #test id="install" load="upstream_ref>>ref"
echo "installing <ref>"
```

```shell #test-result id="install"
installing ...
```
"""


@pytest.fixture
def stub() -> Iterator[WebStub]:
    with running_stub() as server:
        yield server


@pytest.fixture
def env(stub: WebStub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """Point every client at the stub; no token, no cached Hub credentials, short timeouts."""
    values = {
        "GITHUB_API_URL": stub.url,
        "HF_ENDPOINT": stub.url,
        "GUIDE_GUARD_HTTP_TIMEOUT": "0.5",
        "GITHUB_OUTPUT": str(tmp_path / "github_output"),
        "HF_HOME": str(tmp_path / "hf-home"),
        "HF_HUB_DISABLE_TELEMETRY": "1",
    }
    for name, value in values.items():
        monkeypatch.setenv(name, value)
    for name in (
        "GITHUB_TOKEN",
        "HF_TOKEN",
        "HF_HUB_OFFLINE",
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "http_proxy",
        "https_proxy",
    ):
        monkeypatch.delenv(name, raising=False)
    return values


@pytest.fixture
def guide(tmp_path: Path) -> Path:
    path = tmp_path / "guide.md"
    path.write_text(GUIDE, encoding="utf-8")
    return path


def publish(stub: WebStub, tag: str = "v0.4.0", sha: str = SHA_A, model_sha: str = MODEL_SHA_1) -> None:
    stub.set(f"/repos/{REPO}/releases/latest", {"tag_name": tag, "target_commitish": "main"})
    stub.set(f"/repos/{REPO}/commits/{tag}", {"sha": sha})
    stub.set(f"/api/models/{MODEL}", {"id": MODEL, "sha": model_sha, "private": False})


def check(guide: Path, state: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[dict[str, Any], str]:
    """Run the monitor; return its decision and its stderr."""
    status = main([str(guide), "--state", str(state), *extra])
    captured = capsys.readouterr()
    assert status == 0, captured.err
    return json.loads(captured.out), captured.err


@pytest.fixture
def state(stub: WebStub, env: dict[str, str], guide: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    """The state file of a first check of the guide, made with release v0.4.0 (SHA_A) and MODEL_SHA_1 published."""
    publish(stub)
    path = tmp_path / "state.json"
    check(guide, path, capsys)
    return path


def record(guide: Path, state: Path, capsys: pytest.CaptureFixture[str], result: str, ref: str) -> dict[str, Any]:
    """Record a run's RESULT on REF as the workflow does after the run; return what the monitor printed."""
    assert main([str(guide), "--state", str(state), "--record-result", result, "--ref", ref]) == 0
    return json.loads(capsys.readouterr().out)


def outputs(env: dict[str, str]) -> dict[str, str]:
    lines = Path(env["GITHUB_OUTPUT"]).read_text(encoding="utf-8").splitlines()
    found: dict[str, str] = {}
    for line in lines:
        name, _, value = line.partition("=")
        found[name] = value  # the last decision's value wins, as in Actions
    return found


def statuses(decision: dict[str, Any]) -> dict[str, str]:
    return {name: signal["status"] for name, signal in decision["signals"].items()}


def test_first_check_tests_the_latest_release_and_writes_outputs(
    stub: WebStub, env: dict[str, str], guide: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    publish(stub)
    state = tmp_path / "state.json"
    decision, _ = check(guide, state, capsys, "--output", str(tmp_path / "decision.json"))
    assert decision["need_to_test"] is True
    assert decision["ref"] == "v0.4.0"
    assert decision["commit_sha"] == SHA_A
    assert "example/project" in decision["reason"] and "v0.4.0" in decision["reason"]
    assert statuses(decision) == {
        "release": "fired",
        "branch": "skipped",
        "guide": "fired",
        "model": "fired",
        "retry": "quiet",
    }
    assert outputs(env) == {
        "need_to_test": "true",
        "ref": "v0.4.0",
        "sha": SHA_A,
        "reason": decision["reason"],
    }
    assert json.loads((tmp_path / "decision.json").read_text()) == decision
    saved = json.loads(state.read_text())
    assert saved["upstream"]["ref"] == "v0.4.0"
    assert saved["model"] == {"id": MODEL, "sha": MODEL_SHA_1}
    assert len(saved["guide_sha256"]) == 64
    # huggingface_hub asked the Hub's model API, at HF_ENDPOINT
    assert f"/api/models/{MODEL}" in stub.paths()


def test_nothing_changed_means_no_run(
    stub: WebStub, env: dict[str, str], guide: Path, state: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    decision, _ = check(guide, state, capsys)
    assert decision["need_to_test"] is False
    assert decision["reason"] == "nothing changed since the last check"
    assert statuses(decision) == {
        "release": "quiet",
        "branch": "skipped",
        "guide": "quiet",
        "model": "quiet",
        "retry": "quiet",
    }
    assert decision["ref"] == "v0.4.0"
    assert outputs(env)["need_to_test"] == "false"


def test_signals_fire_in_order_of_importance(
    stub: WebStub, guide: Path, state: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    publish(stub, model_sha=MODEL_SHA_2)
    decision, _ = check(guide, state, capsys)
    assert statuses(decision)["model"] == "fired"
    assert decision["reason"] == f"{MODEL} has a new revision {MODEL_SHA_2[:12]} (was {MODEL_SHA_1[:12]})"

    guide.write_text(GUIDE.replace("installing", "setting up"), encoding="utf-8")
    decision, _ = check(guide, state, capsys)
    assert statuses(decision)["guide"] == "fired"
    assert decision["reason"].startswith("the guide changed")

    guide.write_text(GUIDE, encoding="utf-8")
    publish(stub, tag="v0.5.0", sha=SHA_B, model_sha=MODEL_SHA_2)
    decision, _ = check(guide, state, capsys)
    assert decision["need_to_test"] is True
    assert decision["ref"] == "v0.5.0" and decision["commit_sha"] == SHA_B
    assert decision["reason"] == "new upstream release v0.5.0 of example/project (was v0.4.0) (also: guide)"


def test_a_moved_tag_is_a_new_release(
    stub: WebStub, guide: Path, state: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    publish(stub, sha=SHA_B)
    decision, _ = check(guide, state, capsys)
    assert statuses(decision)["release"] == "fired"
    assert "now points at bbbbbbbbbbbb" in decision["reason"]


def test_failed_run_is_retried_at_most_n_times(
    stub: WebStub, guide: Path, state: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for attempt in (1, 2):
        record(guide, state, capsys, "failed", "v0.4.0")
        decision, _ = check(guide, state, capsys, "--max-retries", "2")
        assert decision["need_to_test"] is True, attempt
        assert decision["reason"] == f"the previous run failed (on v0.4.0): retry {attempt} of 2"
    record(guide, state, capsys, "failed", "v0.4.0")
    decision, _ = check(guide, state, capsys, "--max-retries", "2")
    assert decision["need_to_test"] is False
    assert "failed 3 times in a row" in decision["signals"]["retry"]["detail"]

    # a new release gives the next failure streak its own retries
    publish(stub, tag="v0.5.0", sha=SHA_B)
    decision, _ = check(guide, state, capsys, "--max-retries", "2")
    assert statuses(decision)["release"] == "fired"
    record(guide, state, capsys, "failed", "v0.5.0")
    decision, _ = check(guide, state, capsys, "--max-retries", "2")
    assert decision["reason"] == "the previous run failed (on v0.5.0): retry 1 of 2"

    assert record(guide, state, capsys, "passed", "v0.5.0") == {
        "result": "passed",
        "ref": "v0.5.0",
        "recorded_at": json.loads(state.read_text())["last_result"]["recorded_at"],
        "failures_in_a_row": 0,
    }
    decision, _ = check(guide, state, capsys, "--max-retries", "2")
    assert decision["need_to_test"] is False


def test_no_release_falls_back_to_the_newest_tag(
    stub: WebStub, env: dict[str, str], guide: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    stub.set(
        f"/repos/{REPO}/tags",
        [
            {"name": "v0.9.0", "commit": {"sha": SHA_A}},
            {"name": "v0.10.0", "commit": {"sha": SHA_B}},
            {"name": "nightly", "commit": {"sha": "c" * 40}},
        ],
    )
    stub.set(f"/api/models/{MODEL}", {"id": MODEL, "sha": MODEL_SHA_1})
    decision, _ = check(guide, tmp_path / "state.json", capsys)
    assert decision["ref"] == "v0.10.0"
    assert decision["commit_sha"] == SHA_B
    assert decision["signals"]["release"]["current"]["source"] == "tag"
    assert f"/repos/{REPO}/releases/latest" in stub.paths()


def test_token_is_sent_as_bearer(
    stub: WebStub,
    env: dict[str, str],
    guide: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("GITHUB_TOKEN", "ghs_example_token")
    publish(stub)
    check(guide, tmp_path / "state.json", capsys)
    github = [headers for path, headers in stub.requests if path.startswith("/repos/")]
    assert github and all(h.get("Authorization") == "Bearer ghs_example_token" for h in github)


def test_rate_limit_leaves_the_release_unknown_and_keeps_the_last_ref(
    stub: WebStub, guide: Path, state: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    reset = int(time.time()) + 600
    stub.set(
        f"/repos/{REPO}/releases/latest",
        {"message": "API rate limit exceeded"},
        status=403,
        headers={"X-RateLimit-Limit": "60", "X-RateLimit-Remaining": "0", "X-RateLimit-Reset": str(reset)},
    )
    decision, err = check(guide, state, capsys)
    release = decision["signals"]["release"]
    assert release["status"] == "unknown"
    assert "rate limit exceeded (403; 60 requests per hour until" in release["detail"]
    assert "warning: the release signal is unknown" in err
    assert decision["need_to_test"] is False
    assert decision["reason"] == "nothing changed since the last check (unknown: release)"
    assert decision["ref"] == "v0.4.0"  # the last known ref
    assert json.loads(state.read_text())["upstream"]["ref"] == "v0.4.0"


def test_secondary_rate_limit_and_hub_429(
    stub: WebStub, env: dict[str, str], guide: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    stub.set(f"/repos/{REPO}/releases/latest", {"message": "slow down"}, status=429, headers={"Retry-After": "60"})
    stub.set(f"/api/models/{MODEL}", {"error": "rate limited"}, status=429, headers={"Retry-After": "30"})
    decision, _ = check(guide, tmp_path / "state.json", capsys)
    assert decision["signals"]["release"]["detail"] == "GitHub API rate limit hit (429): retry after 60 s"
    assert decision["signals"]["model"]["status"] == "unknown"
    assert (
        "429" in decision["signals"]["model"]["detail"] and "retry after 30 s" in decision["signals"]["model"]["detail"]
    )
    assert decision["reason"] == "no earlier record of the guide's content"


def test_a_short_rate_limit_is_waited_for_once(
    stub: WebStub, env: dict[str, str], guide: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    publish(stub)
    for path in (f"/repos/{REPO}/releases/latest", f"/api/models/{MODEL}"):
        lifted = stub.routes[path]
        stub.set(path, {"message": "slow down"}, status=429, headers={"Retry-After": "1"}, then=lifted)
    decision, err = check(guide, tmp_path / "state.json", capsys)
    assert decision["signals"]["release"]["status"] == "fired", decision["signals"]["release"]
    assert decision["signals"]["model"]["status"] == "fired", decision["signals"]["model"]
    assert decision["ref"] == "v0.4.0"
    assert stub.paths().count(f"/repos/{REPO}/releases/latest") == 2
    assert "warning" not in err

    # still limited when asked again: reported, not waited for a third time
    stub.set(f"/repos/{REPO}/releases/latest", {"message": "slow down"}, status=429, headers={"Retry-After": "0"})
    decision, _ = check(guide, tmp_path / "state.json", capsys)
    assert decision["signals"]["release"]["detail"] == "GitHub API rate limit hit (429): retry after 0 s (asked twice)"


def test_not_found_everywhere(
    stub: WebStub, env: dict[str, str], guide: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    stub.set(
        f"/api/models/{MODEL}",
        {"error": "Repository not found"},
        status=404,
        headers={"X-Error-Code": "RepoNotFound"},
    )
    decision, _ = check(guide, tmp_path / "state.json", capsys)
    assert decision["signals"]["release"]["detail"].startswith(f"{REPO} not found on GitHub (404")
    assert decision["signals"]["model"]["detail"].startswith(f"{MODEL} not found on the Hub")
    assert decision["ref"] is None


def test_timeouts_are_reported_not_raised(
    stub: WebStub, env: dict[str, str], guide: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    stub.set(f"/repos/{REPO}/releases/latest", hang=True)
    stub.set(f"/api/models/{MODEL}", hang=True)
    started = time.monotonic()
    decision, err = check(guide, tmp_path / "state.json", capsys)
    assert time.monotonic() - started < 10
    assert "GitHub API did not answer within 0.5 s" in decision["signals"]["release"]["detail"]
    assert "did not answer within 0.5 s" in decision["signals"]["model"]["detail"]
    assert err.count("is unknown, so it counts as not fired") == 2


@pytest.mark.parametrize(
    ("release_body", "expected"),
    [
        ("<html>oops</html>", "malformed answer from GitHub API"),
        ({"name": "no tag here"}, "no tag_name"),
        (["not", "an", "object"], "no tag_name"),
    ],
)
def test_malformed_answers(
    stub: WebStub,
    env: dict[str, str],
    guide: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    release_body: Any,
    expected: str,
) -> None:
    stub.set(f"/repos/{REPO}/releases/latest", release_body)
    stub.set(f"/api/models/{MODEL}", "{not json")
    decision, _ = check(guide, tmp_path / "state.json", capsys)
    assert decision["signals"]["release"]["status"] == "unknown"
    assert expected in decision["signals"]["release"]["detail"]
    assert decision["signals"]["model"]["status"] == "unknown"
    assert "malformed answer from the Hub" in decision["signals"]["model"]["detail"]


def test_hub_answer_without_sha(
    stub: WebStub, env: dict[str, str], guide: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    publish(stub)
    stub.set(f"/api/models/{MODEL}", {"id": MODEL})
    decision, _ = check(guide, tmp_path / "state.json", capsys)
    assert decision["signals"]["model"]["detail"].endswith("no sha")


def test_unreachable_services_and_a_missing_commit(
    env: dict[str, str],
    guide: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with running_stub() as closed:
        url = closed.url  # nothing listens there once the stub has stopped
    monkeypatch.setenv("GITHUB_API_URL", url)
    monkeypatch.setenv("HF_ENDPOINT", url)
    decision, _ = check(guide, tmp_path / "state.json", capsys)
    assert "cannot reach GitHub API" in decision["signals"]["release"]["detail"]
    assert "Connection refused" in decision["signals"]["release"]["detail"]
    assert "cannot reach the Hub" in decision["signals"]["model"]["detail"]


def test_release_whose_commit_lookup_fails_still_gives_the_ref(
    stub: WebStub, env: dict[str, str], guide: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    publish(stub)
    stub.set(f"/repos/{REPO}/commits/v0.4.0", {"message": "Server Error"}, status=502)
    decision, _ = check(guide, tmp_path / "state.json", capsys)
    assert decision["ref"] == "v0.4.0" and decision["commit_sha"] is None
    assert "its commit is unknown: GitHub API answered 502" in decision["signals"]["release"]["detail"]


def test_model_revision_from_front_matter(
    stub: WebStub, env: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    guide = tmp_path / "guide.md"
    guide.write_text(GUIDE.replace("    model: org/tiny-model", "    model: org/tiny-model\n    model_revision: v1"))
    publish(stub)
    stub.set(f"/api/models/{MODEL}/revision/v1", {"id": MODEL, "sha": MODEL_SHA_2})
    decision, _ = check(guide, tmp_path / "state.json", capsys)
    assert decision["signals"]["model"]["current"]["sha"] == MODEL_SHA_2
    assert f"/api/models/{MODEL}/revision/v1" in stub.paths()


def test_guide_without_upstream_only_watches_its_content(
    env: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    guide = tmp_path / "plain.md"
    guide.write_text("# Plain\n\n```shell #test-setup\ntrue\n```\n", encoding="utf-8")
    decision, _ = check(guide, tmp_path / "state.json", capsys)
    assert statuses(decision) == {
        "release": "skipped",
        "branch": "skipped",
        "guide": "fired",
        "model": "skipped",
        "retry": "quiet",
    }
    assert decision["ref"] is None
    assert outputs(env)["ref"] == ""


def test_the_branch_signal_follows_the_head_commit_of_a_branch(
    stub: WebStub, env: dict[str, str], guide: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--branch watches the head commit instead of the releases; the decided ref is that commit."""
    publish(stub)
    stub.set(f"/repos/{REPO}/commits/main", {"sha": SHA_A})
    state = tmp_path / "state.json"
    decision, _ = check(guide, state, capsys, "--branch", "main")
    assert statuses(decision)["release"] == "skipped" and statuses(decision)["branch"] == "fired"
    assert (decision["ref"], decision["commit_sha"]) == (SHA_A, SHA_A)
    assert f"/repos/{REPO}/releases/latest" not in stub.paths(), "releases are not watched with --branch"
    decision, _ = check(guide, state, capsys, "--branch", "main")
    assert statuses(decision)["branch"] == "quiet" and decision["need_to_test"] is False
    stub.set(f"/repos/{REPO}/commits/main", {"sha": SHA_B})
    decision, _ = check(guide, state, capsys, "--branch", "main")
    assert decision["need_to_test"] is True and decision["ref"] == SHA_B
    assert decision["reason"] == f"new commit {SHA_B[:12]} on main of {REPO} (was {SHA_A[:12]})"
    # a branch the repository does not have: unknown, with why, and the last commit recorded is the ref
    decision, err = check(guide, state, capsys, "--branch", "gone")
    assert statuses(decision)["branch"] == "unknown" and "no branch gone of example/project" in err


def test_the_command_line_says_what_to_watch(
    stub: WebStub, env: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The registry's upstream settings: --repo and --model override the front matter, --signals chooses."""
    plain = tmp_path / "plain.md"
    plain.write_text("# Plain\n\n```shell #test-setup\ntrue\n```\n", encoding="utf-8")
    publish(stub)
    state = tmp_path / "state.json"
    decision, _ = check(plain, state, capsys, "--repo", REPO, "--model", MODEL, "--signals", "release,guide")
    assert statuses(decision) == {
        "release": "fired",
        "branch": "skipped",
        "guide": "fired",
        "model": "skipped",
        "retry": "quiet",
    }
    assert decision["ref"] == "v0.4.0" and "not among the signals" in decision["signals"]["model"]["detail"]
    assert f"/api/models/{MODEL}" not in stub.paths(), "a signal not asked for is not looked up"
    for bad, said in (
        (["--signals", "release,nightly"], "--signals: unknown nightly"),
        (["--signals", "release,branch", "--branch", "main"], "either the latest release (release) or a branch"),
        (["--signals", "branch"], "--signals branch needs --branch NAME"),
    ):
        assert main([str(plain), "--state", str(state), *bad]) == 2
        assert said in capsys.readouterr().err


def test_bad_state_and_bad_usage(
    env: dict[str, str], guide: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = tmp_path / "state.json"
    state.write_text("{broken", encoding="utf-8")
    assert main([str(guide), "--state", str(state)]) == 2
    assert "is not valid JSON" in capsys.readouterr().err
    assert main([str(guide), "--state", str(tmp_path / "other.json"), "--record-result", "failed"]) == 2
    assert "--record-result needs --ref" in capsys.readouterr().err
    assert not (tmp_path / "other.json").exists()
    broken_guide = tmp_path / "broken.md"
    broken_guide.write_text("```shell #test\necho\n```\n", encoding="utf-8")
    assert main([str(broken_guide), "--state", str(tmp_path / "s.json")]) == 2
    assert "#test needs an id" in capsys.readouterr().err


class _QuietFiles(SimpleHTTPRequestHandler):
    """Serves files without logging requests to stderr, which the test reads for the monitor's own words."""

    def log_message(self, format: str, *args: Any) -> None:
        pass


def test_a_token_in_the_guide_url_is_not_shown(
    env: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    site = tmp_path / "site"
    site.mkdir()
    (site / "broken.md").write_text("```shell #test\necho\n```\n", encoding="utf-8")
    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(_QuietFiles, directory=str(site)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    token = "tok_monitor_s3cret"
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        assert main([f"{url}/broken.md?token={token}", "--state", str(tmp_path / "s.json")]) == 2
        broken = capsys.readouterr().err
        assert main([f"{url}/missing.md?token={token}", "--state", str(tmp_path / "s.json")]) == 2
        missing = capsys.readouterr().err
    finally:
        server.shutdown()
    assert "#test needs an id" in broken and "cannot fetch the guide" in missing
    assert token not in broken + missing and "token=***" in broken


def test_command_line_end_to_end(stub: WebStub, env: dict[str, str], guide: Path, tmp_path: Path) -> None:
    """`python -m ci.monitor` as a workflow calls it, with the real requests and huggingface_hub clients."""
    publish(stub)
    state = tmp_path / "state.json"
    done = subprocess.run(
        [sys.executable, "-m", "ci.monitor", str(guide), "--state", str(state)],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=60,
        cwd=Path(__file__).resolve().parents[1],
    )
    assert done.returncode == 0, done.stderr
    decision = json.loads(done.stdout)
    assert decision["need_to_test"] is True and decision["ref"] == "v0.4.0"
    assert "a run is needed (ref v0.4.0)" in done.stderr
    assert outputs(env)["ref"] == "v0.4.0"


def test_a_run_without_an_upstream_ref_is_recorded(env: dict[str, str], tmp_path: Path) -> None:
    """The registry's demo entry watches no upstream, so the workflow's record job passes `--ref ""`."""
    state = tmp_path / "state.json"

    def monitor(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "ci.monitor", "docs/examples/demo.md", "--state", str(state), *args],
            env={**os.environ, **env},
            capture_output=True,
            text=True,
            timeout=60,
            cwd=Path(__file__).resolve().parents[1],
        )

    def decision() -> dict[str, Any]:
        done = monitor()
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    first = decision()
    assert first["need_to_test"] is True and first["ref"] is None
    recorded = monitor("--record-result", "passed", "--ref", "")
    assert recorded.returncode == 0, recorded.stderr
    assert json.loads(recorded.stdout) == {
        "result": "passed",
        "ref": None,
        "recorded_at": json.loads(state.read_text())["last_result"]["recorded_at"],
        "failures_in_a_row": 0,
    }
    second = decision()
    assert second["need_to_test"] is False
    assert second["reason"] == "nothing changed since the last check"
    assert second["signals"]["retry"]["detail"] == "the previous run passed"

    # a failed run without a ref is retried like any other
    recorded = monitor("--record-result", "failed", "--ref", "")
    assert recorded.returncode == 0, recorded.stderr
    third = decision()
    assert third["need_to_test"] is True
    assert third["reason"] == "the previous run failed: retry 1 of 2"


def test_the_ref_the_guide_is_written_for_is_compared_with_the_latest_release(
    stub: WebStub, env: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    publish(stub, tag="v0.4.0")
    guide = tmp_path / "guide.md"
    written_for = '    written_for: "main with PR #825"\n'
    guide.write_text(GUIDE.replace("    model: org/tiny-model\n", "    model: org/tiny-model\n" + written_for))
    state = tmp_path / "state.json"

    decision, stderr = check(guide, state, capsys)
    drift = "the guide is written for main with PR #825; upstream's latest release is v0.4.0"
    assert decision["upstream_drift"] == drift
    assert decision["signals"]["release"]["written_for"] == "main with PR #825"
    assert decision["reason"].endswith(f"; {drift} (also: guide, model)")
    note = (
        f"note: {guide}: {drift}; a run against v0.4.0 tests an upstream the guide's expected outputs were not "
        "written for (ci.upstream.written_for)\n"
    )
    assert stderr.endswith(note)
    # on every check, not only when a new release fires the signal
    decision, stderr = check(guide, state, capsys)
    assert decision["need_to_test"] is False and decision["reason"] == "nothing changed since the last check"
    assert decision["signals"]["release"]["detail"] == f"v0.4.0 is still the latest release; {drift}"
    assert stderr.endswith(note)
    # once the guide is written for the latest release, nothing is noted
    guide.write_text(
        GUIDE.replace("    model: org/tiny-model\n", "    model: org/tiny-model\n    written_for: v0.4.0\n")
    )
    decision, stderr = check(guide, state, capsys)
    assert decision["upstream_drift"] is None and "note:" not in stderr
