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
from collections.abc import Callable, Iterator
from pathlib import Path

import container_act
import engine
import pytest
from actrun import ActRunner
from outside import unavailable

REPO = Path(__file__).resolve().parents[2]
CAP_SYS_PTRACE = 19  # bit of CapEff, linux/capability.h
CANCEL_TIMEOUT_S = 60.0


@pytest.fixture(scope="module")
def container_engine() -> Iterator[engine.Engine]:
    """podman's Docker API with the job image, for these tests; stopped after them (the image is kept)."""
    # One engine per state directory, started and stopped here: a second xdist worker would stop it under the
    # first one's tests (and act names a job's container after the workflow and job alone, so two runs of one
    # workflow at once collide).
    # pytest.ini's `--dist loadfile` keeps this module on one worker
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


# ---------------------------------------------------------------------------------------------------------
# guide-run.yml's NPU job path: the registry entry's runner label and container image, under act on the engine

RUN_JOB = "demo/guide run/docs/examples/demo.md"
RUNNER_UID = 1000  # the runner's own user, who owns the directory above the workspace


def npu_entry(runner: ActRunner, container_engine: engine.Engine) -> None:
    """The demo entry of the workspace's registry as the specforge entry is: a self-hosted label and an image.

    Its container options are this machine's runner setup: the wheelhouse (pip in the container cannot reach
    the index), and the folder above the workspace (which holds the stand-ins' store too) mounted in, as
    GitHub's runner mounts its whole work folder into a job container; act binds only the workspace.
    """
    registry = runner.workspace / "guides.yaml"
    text = registry.read_text(encoding="utf-8")
    work = runner.workspace.parent
    options = f"{container_engine.container_options} --volume {work}:{work}"
    entry = (
        "  - name: demo\n"
        "    guide: docs/examples/demo.md\n"
        "    runner: [linux-aarch64-a2-4]\n"
        f"    image: {container_engine.image}\n"
        f"    container_options: {options}\n"
    )
    start = text.index("  - name: demo")
    end = text.index("schedule: weekly", start)
    registry.write_text(text[:start] + entry + "    " + text[end:], encoding="utf-8")
    runner.variables["GUIDE_GUARD_PIP_INDEX_URL"] = container_engine.index_url
    # the runner made the workspace's parent as its own user before the container started (guide-run.yml's
    # hand-back step gives what root wrote back to that user)
    os.chown(runner.workspace.parent, RUNNER_UID, RUNNER_UID)


def owners(directory: Path) -> set[int]:
    return {path.lstat().st_uid for path in directory.rglob("*")}


def test_the_npu_job_runs_the_guide_in_its_image_and_hands_its_files_back(
    container_engine: engine.Engine, act: Callable[..., ActRunner]
) -> None:
    runner = act(inputs={"name": "demo"}, docker_host=container_engine.docker_host, mirror=False)
    npu_entry(runner, container_engine)
    result = runner.run()

    assert result.job(RUN_JOB) == "success", result.log_file
    outputs = result.outputs(RUN_JOB, "guide")
    assert (outputs["verdict"], outputs["exit_status"]) == ("passed", "0")
    report = result.artifact("demo-attempt-1")
    # the blocks ran in the image: its Python, as root, with HOME /github/home
    image_python = (report / "outputs" / "blocks" / "003-check-python.stdout.txt").read_text()
    assert image_python == f"Python {container_engine_python(container_engine)}\n"
    # SYS_PTRACE is in the container's options: the harness can take stack dumps, and says no warning
    assert "ptrace" not in result.output_text(RUN_JOB).lower()
    assert json.loads((result.artifact("guide-status-demo") / "demo.json").read_text())["verdict"] == "passed"
    # what root wrote in the workspace (the reports, the harness's venv is elsewhere) is the runner's again
    assert (runner.workspace / "guide-guard-report" / "outputs" / "results.json").is_file()
    assert owners(runner.workspace / "guide-guard-report") == {RUNNER_UID}
    assert not containers(container_engine)


def test_a_cancelled_npu_job_is_stopped_by_its_stop_step_and_keeps_its_reports(
    container_engine: engine.Engine, act: Callable[..., ActRunner]
) -> None:
    runner = act(inputs={"name": "demo"}, docker_host=container_engine.docker_host, mirror=False)
    npu_entry(runner, container_engine)
    guide = runner.workspace / "docs" / "examples" / "demo.md"
    text = guide.read_text(encoding="utf-8")
    marker = "## Start a server in the background\n"
    # a command line no other test uses: the check below looks at every process of the host
    wait_block = '```shell #test id="wait"\nsleep 317\n```\n\n```shell #test-result id="wait"\n```\n\n'
    fence_line = text[: text.index(marker)].count("\n") + 1
    guide.write_text(text.replace(marker, wait_block + marker), encoding="utf-8")

    run = runner.start()
    run.wait_for(f"at docs/examples/demo.md:{fence_line}")
    run.interrupt()
    result = run.wait()

    steps = result.step_results(RUN_JOB)
    assert steps["Stop the harness (the run was cancelled)"] == "success", steps
    assert "stopped; its reports are in guide-guard-report" in result.output_text(RUN_JOB)
    record = json.loads((result.artifact("demo-attempt-1") / "outputs" / "results.json").read_text())
    # `docker exec` passed act's cancel on to nobody: the stop step's SIGTERM is what ended the harness
    assert record["guides"][0]["interrupted_by_signal"] == signal.SIGTERM
    wait = next(block for block in record["blocks"] if block["id"] == "wait")
    assert wait["status"] == "error" and wait["message"].startswith("interrupted by SIGTERM")
    assert owners(runner.workspace / "guide-guard-report") == {RUNNER_UID}
    assert not containers(container_engine)
    assert not host_processes_named("sleep 317")


def container_engine_python(container_engine: engine.Engine) -> str:
    """The X.Y.Z of the image's python3, asked of the image itself."""
    command = ["podman", "run", "--rm", container_engine.image, "python3", "-c"]
    asked = [*command, "import platform; print(platform.python_version())"]
    found = subprocess.run(asked, env=container_engine.podman_env, check=True, capture_output=True, text=True)
    return found.stdout.strip()
