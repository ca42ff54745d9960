"""The rehearsal of docs/specforge.md: green against its simulations, each broken stage caught by the right block."""

# Every test runs `python -m ci.rehearse` as a user would (real processes, real ports on 127.0.0.1), then
# checks results.json, the job log, and that no process of the run survives it: the `test_id` fixture looks
# for the test's marker in every process's environment, and `assert_nothing_left` checks the simulated
# processes the rehearsal registered (a zombie thread-group leader hides its environment, so the marker
# alone cannot find it).

from __future__ import annotations

import importlib.metadata
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from real_parts import require_real_parts

# The rehearsal binds the guide's own fixed ports: under pytest-xdist these tests share one worker.
pytestmark = pytest.mark.xdist_group("guide-ports")

REPO = Path(__file__).resolve().parents[1]
GUIDE = "docs/specforge.md"
BLOCK_IDS = [
    "check-py",
    "check-cann",
    "check-torch",
    "install-hf-hub",
    "build-mooncake",
    "verify-install",
    "upstream_ref",
    "specforge-install-source",
    "specforge-import",
    "specforge-help",
    "specforge-train-help",
    "smoke-download-model",
    "smoke-apply-patches",
    "smoke-start-mooncake",
    "smoke-start-sglang",
    "smoke-prepare-data",
    "smoke-train-launch",
    "smoke-train-monitor",
]


@dataclass
class Rehearsed:
    """A finished `python -m ci.rehearse` run and what it left in its output directory."""

    returncode: int
    stdout: str
    stderr: str
    output_dir: Path
    duration_s: float
    reused: Path | None = None  # --resume: the earlier rehearsal's sandbox, which this one ran in

    @property
    def sandbox(self) -> Path:
        return self.reused or self.output_dir / "sandbox"

    @property
    def record(self) -> dict[str, Any]:
        return json.loads((self.output_dir / "results.json").read_text(encoding="utf-8"))

    def statuses(self) -> dict[str, str]:
        return {b["id"] or b["store"]: b["status"] for b in self.record["blocks"]}

    def block(self, name: str) -> dict[str, Any]:
        (found,) = [b for b in self.record["blocks"] if name in (b["id"], b["store"])]
        return found

    def output(self, name: str, stream: str) -> str:
        path = self.block(name)[f"{stream}_path"]
        return (self.output_dir / path).read_text(encoding="utf-8") if path else ""

    def train_log(self) -> str:
        """The guide's /tmp/smoke-train.log: the sandbox's copy when the rehearsal had its own mount namespace."""
        own = self.sandbox / "guide-tmp" / "smoke-train.log"
        return (own if own.exists() else Path("/tmp/smoke-train.log")).read_text(encoding="utf-8")

    def calls(self) -> list[dict[str, Any]]:
        lines = (self.sandbox / "calls.jsonl").read_text(encoding="utf-8").splitlines()
        return [json.loads(line) for line in lines]

    def ended_at_teardown(self) -> str:
        return "\n".join(p["command"] for p in self.record["guides"][0]["processes_ended"])


def rehearse(
    run_harness: Callable[..., subprocess.CompletedProcess[str]],
    tmp_path: Path,
    *args: str,
    guide: str = GUIDE,
    resuming: Rehearsed | None = None,
    **variables: str,
) -> Rehearsed:
    """Run the rehearsal of the guide with --output-dir in tmp_path (with --resume of RESUMING's, if given);
    variables go into its environment."""
    output_dir = tmp_path / ("rehearsal" if resuming is None else "resumed")
    resume = () if resuming is None else ("--resume", str(resuming.output_dir))
    started = time.monotonic()
    done = run_harness(
        guide,
        "--output-dir",
        str(output_dir),
        *resume,
        *args,
        module="ci.rehearse",
        cwd=REPO,
        env=variables,
        timeout_s=240,
    )
    reused = None if resuming is None else resuming.sandbox
    return Rehearsed(done.returncode, done.stdout, done.stderr, output_dir, time.monotonic() - started, reused)


def _has_live_thread(pid: int) -> bool:
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return False
    states = []
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/stat", encoding="utf-8") as handle:
                states.append(handle.read().rsplit(")", 1)[1].split()[0])
        except OSError:
            continue
    return any(state not in ("Z", "X") for state in states)


def assert_nothing_left(run: Rehearsed, *, stand_ins_ran: bool = True) -> None:
    """No simulated process the run registered is still running, not even as a zombie leader's last thread.

    stand_ins_ran=False: the run may have started no long-lived stand-in (a --real run that stops at the
    master, which is the real binary: the rehearsal's sweep finds that one by its marker).
    """
    file = run.sandbox / "processes.txt"
    registered = file.read_text(encoding="utf-8").splitlines() if file.exists() or stand_ins_ran else []
    assert registered or not stand_ins_ran, "the simulations registered no process"
    for line in registered:
        pid_text, start_ticks, name = line.split(" ", 2)
        try:
            with open(f"/proc/{pid_text}/stat", encoding="utf-8") as handle:
                same = handle.read().rsplit(")", 1)[1].split()[19] == start_ticks
        except OSError:
            continue
        assert not (same and _has_live_thread(int(pid_text))), f"{name} (pid {pid_text}) survived the run"
    assert "outlived the run" not in run.stdout, run.stdout[-2000:]


def assert_in_log_and_file(run: Rehearsed, block: str, stream: str, *texts: str) -> None:
    """Each text is in the block's stdout/stderr file and in the job log the user reads."""
    content = run.output(block, stream)
    for text in texts:
        assert text in content, f"{text!r} not in {block}'s {stream}:\n{content}"
        assert text in run.stdout, f"{text!r} not in the job log:\n{run.stdout[-4000:]}"


def assert_stops_at(run: Rehearsed, failing: str, reason: str | re.Pattern[str], message: str = "exit 1") -> None:
    """The run stopped at FAILING, whose MESSAGE and REASON (the line where it said why; a pattern for one that
    holds a pid) the last lines repeat."""
    assert run.returncode == 1, run.stdout[-3000:] + run.stderr
    statuses = run.statuses()
    position = BLOCK_IDS.index(failing)
    assert [statuses[name] for name in BLOCK_IDS[:position]] == ["passed"] * position, statuses
    assert statuses[failing] == "failed", statuses
    assert run.block(failing)["message"] == message
    recorded = run.block(failing)["reason"]
    if isinstance(reason, re.Pattern):
        assert reason.fullmatch(recorded), recorded
        reason = recorded
    assert recorded == reason
    assert {statuses[name] for name in BLOCK_IDS[position + 1 :]} <= {"not_run"}, statuses
    assert re.search(rf"^\[ERROR\] \[\d+/18\] {failing}: FAILED in ", run.stdout, re.M), run.stdout[-3000:]
    # the last lines, under the simulation report, name the block again
    line = run.block(failing)["line"]
    assert run.stdout.splitlines()[-4:-1] == [
        "blocks that did not pass (1; ci.run's log above shows why):",
        f"  FAILED {failing} at {run.block(failing)['guide']}:{line}: {message}: {reason}",
        "=== rehearsal: FAILED (ci.run exit 1)",
    ]


def test_the_whole_guide_passes_against_the_simulations(tmp_path: Path, run_harness) -> None:
    run = rehearse(run_harness, tmp_path)

    assert run.returncode == 0, run.stdout[-4000:] + run.stderr
    assert list(run.statuses()) == BLOCK_IDS
    assert set(run.statuses().values()) == {"passed"}
    report = run.stdout[run.stdout.index("=== rehearsal of docs/specforge.md") :]
    for simulation in (
        "npu-smi, apt-get:",
        "uv:",
        "pkill:",
        "python:",
        "torch 2.10.0+cpu, torch_npu 2.10.0:",
        "sglang 0.5.18:",
        "mooncake-transfer-engine-npu 0.3.13.post1:",
        "accelerate:",
        "SpecForge:",
        "Qwen/Qwen3.5-4B:",
        "CANN 9.0.0, ATB:",
        "fake Hugging Face Hub: http://127.0.0.1:",
    ):
        assert f"\n  {simulation}" in report, simulation
    # What was written from the guide rather than read from the real package is said in the report.
    invented = report.split("\ninvented for the guide, not read from the real packages", 1)[1].split("\noverrides:")[0]
    assert "\n  sglang 0.5.18: what the spec-capture patch adds and checks" in invented
    assert "\n  mooncake-transfer-engine-npu 0.3.13.post1: it listens on 127.0.0.1 only, unless" in invented
    sandbox = str(run.sandbox)
    for override in (
        f"PATH={sandbox}/bin:",
        f"SPECFORGE_ASCEND_ROOT={sandbox}/ascend",
        f"GIT_CONFIG_GLOBAL={sandbox}/gitconfig",
        "UPSTREAM_REF=v0.0.0-rehearsal",
        f"HF_HOME={sandbox}/hf-home",
        "HF_ENDPOINT=http://127.0.0.1:",
        "SPECFORGE_TRAIN_LIVENESS_WAIT=3",
        f"--workdir {sandbox}/work",
    ):
        assert f"\n  {override}" in report, override
    # The guide's /tmp files: the sandbox's own where the machine allows private namespaces.
    if "\nisolation: private network namespace (loopback only) and mount namespace\n" in report:
        assert f"/tmp/smoke-train.log, /tmp/smoke-train.pid: bind mounts of {sandbox}/guide-tmp/" in report
    else:
        assert "/tmp/smoke-train.log, /tmp/smoke-train.pid" in report.split("not redirected: the guide's own ")[1]
    assert report.rstrip().endswith(f"outputs and sandbox kept in {run.output_dir}")

    # Every simulation says it is one, in its own output.
    assert "[simulation]" in run.output("check-torch", "stderr")
    assert "[simulation]" in run.output("install-hf-hub", "stderr")
    assert "[simulation]" in run.output("verify-install", "stderr")
    assert "[simulation]" in run.output("specforge-help", "stderr")
    assert run.output("specforge-install-source", "stdout") == "specforge, version 0.0.0+rehearsal\n"
    assert "[simulation] specforge train" in run.train_log()
    # Each fake recorded its calls; the real huggingface_hub client went to the fake Hub.
    tools = {call["tool"] for call in run.calls()}
    assert {"uv", "apt-get", "pkill", "mooncake_master", "sglang.launch_server", "specforge"} <= tools
    # Every install goes to the environment of the `python` the later blocks run, named by --python.
    uv_calls = [call["argv"] for call in run.calls() if call["tool"] == "uv"]
    python = ["--python", f"{sandbox}/bin/python"]
    assert ["pip", "install", *python, "--no-deps", "."] in uv_calls
    assert all(argv[2:4] == python for argv in uv_calls), uv_calls
    # The base spec-capture patch, then the Ascend companion patch; the capture server reached Mooncake at
    # its first capture, mounting its segment as the companion patch says.
    checkout = f"{sandbox}/sgl-workspace/sglang/python"
    assert run.output("smoke-apply-patches", "stderr") == (
        f"smoke: base patch in place: all 2 files it changes are patched in {checkout}\n"
        f"smoke: Ascend companion patch applied to {checkout}\n"
    )
    sglang_log = (run.output_dir / "collected" / "tmp" / "smoke-sglang.log").read_text(encoding="utf-8")
    ready = sglang_log.index("The server is fired up and ready to roll!")
    assert sglang_log.index("spec-capture: first capture: setting up the Mooncake store") > ready
    assert "mooncake store: mounted a 34359738368-byte segment, location=cpu, protocol=tcp\n" in sglang_log
    hub_log = (run.sandbox / "hub.log").read_text(encoding="utf-8")
    assert "GET /api/models/Qwen/Qwen3.5-4B/revision/main -> 200" in hub_log
    assert re.search(r"GET /Qwen/Qwen3.5-4B/resolve/[0-9a-f]{40}/model.safetensors -> 200", hub_log)
    assert run.block("smoke-download-model")["captured"]["model_path"].startswith(f"{sandbox}/hf-home/hub/")
    # The servers lived until the end of the guide, where the harness ended them. The master's command
    # line is the binary's, as with the real wheel, whose console script execs it.
    assert re.search(
        r"^/\S+/site-packages/mooncake/mooncake_master --enable_http_metadata_server=true --rpc_port=35551 ",
        run.ended_at_teardown(),
        re.M,
    ), run.ended_at_teardown()
    mooncake_log = run.output_dir / "collected" / "tmp" / "smoke-mooncake.log"
    assert "master_admin_service.cpp:310] Master admin server started on port 35903\n" in mooncake_log.read_text(
        encoding="utf-8"
    )
    assert "-m sglang.launch_server" in run.ended_at_teardown()
    # ci.collect kept the guide's /tmp logs; no ci.diagnostics ran (the fake npu-smi was never called).
    collected = {f["source"]: f for f in run.record["guides"][0]["collected"]["files"]}
    assert {"/tmp/build-mooncake-pip.log", "/tmp/smoke-sglang.log", "/tmp/smoke-train.log"} <= set(collected)
    kept = run.output_dir / collected["/tmp/smoke-train.log"]["copied_to"]
    assert kept == run.output_dir / "collected" / "tmp" / "smoke-train.log"
    assert kept.read_text(encoding="utf-8") == run.train_log()
    assert f"into {run.output_dir}/collected\n  /tmp/build-mooncake-pip.log (" in run.stdout
    assert "npu-smi" not in tools
    assert all(block["diagnostics"] == [] for block in run.record["blocks"])
    # Installs went into the sandbox, not into the harness's environment.
    for name in ("specforge", "mooncake-transfer-engine-npu"):
        with pytest.raises(importlib.metadata.PackageNotFoundError):
            importlib.metadata.version(name)
    assert_nothing_left(run)


def test_a_commit_ref_takes_the_guides_fetch_by_hash_path(tmp_path: Path, run_harness) -> None:
    run = rehearse(run_harness, tmp_path, "--ref", "commit", "--until", "specforge-install-source")

    assert run.returncode == 0, run.stdout[-4000:] + run.stderr
    ref = run.block("upstream_ref")["captured"]["upstream_ref"]
    assert re.fullmatch(r"[0-9a-f]{40}", ref)
    assert run.block("specforge-install-source")["status"] == "passed"
    assert f"* branch            {ref} -> FETCH_HEAD" in run.output("specforge-install-source", "stderr")


def test_without_namespaces_the_machine_is_shared_and_said_so(tmp_path: Path, run_harness) -> None:
    run = rehearse(run_harness, tmp_path, "--until", "check-cann", REHEARSAL_SHARED="1")

    assert run.returncode == 0, run.stdout[-4000:] + run.stderr
    assert run.statuses()["check-cann"] == "passed"
    assert "\nisolation: none (REHEARSAL_SHARED=1); the machine's loopback and /tmp are shared\n" in run.stdout
    own = "/tmp/build-mooncake-pip.log, /tmp/smoke-ascend-patch.log, /tmp/smoke-mooncake.log,"
    assert f"\n  not redirected: the guide's own {own}" in run.stdout


def test_a_temporary_rehearsal_keeps_every_path_it_printed(tmp_path: Path, run_harness) -> None:
    """Without --output-dir, a passing rehearsal's directory is under $TMPDIR/guide-guard/, and still there."""
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    done = run_harness(
        GUIDE, "--until", "check-py", module="ci.rehearse", cwd=REPO, env={"TMPDIR": str(temporary)}, timeout_s=240
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr
    (root,) = (temporary / "guide-guard").iterdir()
    assert root.name.startswith("rehearsal-")
    assert done.stdout.rstrip().endswith(
        f"rehearsal: outputs and sandbox kept in {root}"
        " (a temporary directory: kept while among the 10 newest, or changed within the hour)"
    )
    # every file or directory of the rehearsal the log names (the sandbox, the outputs, the Hub's log...)
    printed = set(re.findall(rf"{re.escape(str(root))}[^\s:,()]*", done.stdout))
    assert f"full block outputs: {root}" in done.stdout and len(printed) > 5, done.stdout
    # HF_HOME is named as the value the blocks get, made when a block first uses it (none up to check-py does)
    missing = [path for path in sorted(printed) if not os.path.lexists(path.rstrip("/"))]
    assert [Path(path).name for path in missing] in ([], ["hf-home"]), missing
    assert (root / "results.json").is_file() and (root / "sandbox" / "rehearsal-report.txt").is_file()


def test_an_unknown_failure_knob_is_a_usage_error(tmp_path: Path, run_harness) -> None:
    run = rehearse(run_harness, tmp_path, REHEARSAL_BREAK="mooncake-no-bnid")

    assert run.returncode == 2
    assert "REHEARSAL_BREAK='mooncake-no-bnid' is not a failure knob; known: mooncake-no-bind," in run.stderr
    assert not run.output_dir.exists()


def test_without_click_the_rehearsal_says_to_install_its_extra(tmp_path: Path, harness_env: dict[str, str]) -> None:
    """click is the rehearsal's (the stand-in SpecForge's CLI), not the harness's: without it, the rehearsal stops
    before it builds anything and names the extra that brings it."""
    output_dir = tmp_path / "rehearsal"
    hidden = "import sys; sys.modules['click'] = None; from ci.rehearse import main; sys.exit(main(sys.argv[1:]))"
    done = subprocess.run(
        [sys.executable, "-c", hidden, GUIDE, "--output-dir", str(output_dir)],
        cwd=REPO,
        env=harness_env,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )

    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.splitlines()[-1] == (
        "[ERROR] rehearsal: the simulations need click (the stand-in SpecForge's CLI), which this Python does not "
        "have: pip install 'guide-guard[rehearsal]' (in a checkout: pip install -e '.[rehearsal]')"
    )
    assert not output_dir.exists()


def test_a_plain_fence_guide_is_rehearsed_in_the_dialect_and_limits_given(tmp_path: Path, run_harness) -> None:
    """--dialect and --timeout-rule reach the run the rehearsal makes: the fences example, its front matter (which
    names the dialect) taken off as upstream guides have none, runs as plain fences under `auto`."""
    example = (REPO / "docs/examples/fences.md").read_text(encoding="utf-8")
    guide = tmp_path / "upstream.md"
    guide.write_text(example[example.index("# ") :], encoding="utf-8")
    run = rehearse(run_harness, tmp_path, "--dialect", "auto", "--timeout-rule", "test -n=7s", guide=str(guide))

    assert run.returncode == 0, run.stdout[-3000:] + run.stderr
    blocks = run.record["blocks"]
    assert [block["status"] for block in blocks] == ["passed", "skipped", "passed"]
    assert [block["timeout_s"] for block in blocks][2] == 7

    wrong = rehearse(run_harness, tmp_path / "wrong", "--dialect", "fence", guide=str(guide))
    assert wrong.returncode == 2 and "--dialect: unknown dialect 'fence'" in wrong.stderr
    assert not wrong.output_dir.exists()  # refused before a sandbox was built


def test_mooncake_never_binding_fails_its_start_block(tmp_path: Path, run_harness) -> None:
    run = rehearse(run_harness, tmp_path, REHEARSAL_BREAK="mooncake-no-bind", SPECFORGE_MOONCAKE_READY_TIMEOUT="3")

    assert_stops_at(run, "smoke-start-mooncake", "smoke: FAILED - mooncake_master did not bind 35551 in 3s")
    assert_in_log_and_file(
        run,
        "smoke-start-mooncake",
        "stderr",
        "smoke: FAILED - mooncake_master did not bind 35551 in 3s",
        "[simulation] REHEARSAL_BREAK=mooncake-no-bind: never binding its RPC port 35551",
    )
    assert "REHEARSAL_BREAK=mooncake-no-bind  (mooncake_master never binds" in run.stdout
    assert "mooncake_master --enable_http_metadata_server=true" in run.ended_at_teardown()
    assert_nothing_left(run)


def test_sglang_never_healthy_fails_at_the_guides_deadline(tmp_path: Path, run_harness) -> None:
    run = rehearse(run_harness, tmp_path, REHEARSAL_BREAK="sglang-never-healthy", SPECFORGE_SGLANG_HEALTH_TIMEOUT="5")

    assert_stops_at(run, "smoke-start-sglang", "smoke: FAILED - SGLang not healthy after 5s")
    assert run.output("smoke-start-sglang", "stdout") == "smoke: waiting for SGLang /health (up to 5s)\n"
    assert_in_log_and_file(
        run,
        "smoke-start-sglang",
        "stderr",
        "smoke: FAILED - SGLang not healthy after 5s",
        "[simulation] REHEARSAL_BREAK=sglang-never-healthy: /health answers 503 for ever",
    )
    assert "SPECFORGE_SGLANG_HEALTH_TIMEOUT=5  (from the caller's environment)" in run.stdout
    assert "-m sglang.launch_server" in run.ended_at_teardown()
    assert_nothing_left(run)


def test_a_trainer_dying_at_start_fails_the_launch_and_a_resume_after_the_fix_passes(
    tmp_path: Path, run_harness
) -> None:
    """The resume, on the machine the failed rehearsal left: one test, so that the costly first run is paid once."""
    run = rehearse(run_harness, tmp_path, REHEARSAL_BREAK="trainer-dies")

    # the guide's FAILED line, then the trainer's log, whose traceback says why
    assert_stops_at(
        run,
        "smoke-train-launch",
        "RuntimeError: mooncake: Client not available: master 127.0.0.1:35551 refused the connection",
    )
    assert_in_log_and_file(
        run,
        "smoke-train-launch",
        "stdout",
        "smoke: FAILED - specforge train died within 3s of launch",
        "RuntimeError: mooncake: Client not available: master 127.0.0.1:35551 refused the connection",
    )
    # The guide's Ascend diagnostics ran after the failure: shown in the block's report, kept beside its files.
    diagnostics = run.block("smoke-train-launch")["diagnostics"]
    commands = [d["command"] for d in diagnostics]
    assert commands[0] == "npu-smi info" and commands[-1] == "tail -n 100 /tmp/smoke-train.log"
    assert all(d["timed_out"] is False and d["exit_code"] is not None for d in diagnostics)
    npu_smi = (run.output_dir / diagnostics[0]["output_path"]).read_text(encoding="utf-8")
    assert "[simulation] npu-smi: guide-guard rehearsal stand-in, 4 simulated Ascend 910B4 cards" in npu_smi
    assert ["info"] in [call["argv"] for call in run.calls() if call["tool"] == "npu-smi"]
    plog = (run.output_dir / diagnostics[1]["output_path"]).read_text(encoding="utf-8")
    assert plog == f"no plog-*.log under {run.sandbox}/home/ascend/log\n"  # the rehearsal's HOME has none
    train_tail = (run.output_dir / diagnostics[-1]["output_path"]).read_text(encoding="utf-8")
    assert "RuntimeError: mooncake: Client not available" in train_tail
    report = run.stdout[run.stdout.index("==> [17/18]") : run.stdout.index("[ERROR] [17/18] smoke-train-launch")]
    assert "--- diagnostic 1/6: npu-smi info (exit 0, " in report
    assert "4 simulated Ascend 910B4 cards" in report
    assert "--- diagnostic 6/6: tail -n 100 /tmp/smoke-train.log (exit 0, " in report
    # and the guide's logs were collected after the servers were ended, the run red as it is
    collected = {f["source"]: f for f in run.record["guides"][0]["collected"]["files"]}
    train_log = (run.output_dir / collected["/tmp/smoke-train.log"]["copied_to"]).read_text(encoding="utf-8")
    assert "REHEARSAL_BREAK=trainer-dies" in train_log
    assert_nothing_left(run)

    # The fix (no knob), and `--resume` of that rehearsal: in its sandbox as it was left, with its installs and model.
    record, report = (run.output_dir / "results.json").read_bytes(), (run.sandbox / "rehearsal-report.txt").read_bytes()
    # refused, nothing run, where it cannot work: a knob that shapes the sandbox, a directory that is no rehearsal's
    refused = rehearse(run_harness, tmp_path, resuming=run, REHEARSAL_BREAK="uv-no-venv")
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert (
        "its sandbox was built with neither uv-no-venv nor ascend-patch-missing nor companion-patch-malformed, and "
        "this rehearsal has "
    ) in refused.stderr
    assert "resume with no REHEARSAL_BREAK=uv-no-venv, or rehearse again whole" in refused.stderr
    not_one = run_harness(
        GUIDE,
        "--output-dir",
        str(tmp_path / "resumed"),
        "--resume",
        str(run.output_dir / "blocks"),
        module="ci.rehearse",
        cwd=REPO,
    )
    assert not_one.returncode == 2, not_one.stdout + not_one.stderr
    assert "blocks is not a rehearsal's output directory (no sandbox/.guide-guard-rehearsal in it)" in not_one.stderr
    assert not (tmp_path / "resumed").exists()
    resumed = rehearse(run_harness, tmp_path, resuming=run)

    assert resumed.returncode == 0, resumed.stdout[-4000:] + resumed.stderr
    statuses = resumed.statuses()
    assert list(statuses) == BLOCK_IDS
    # the server blocks again (the first run ended their processes at its end), then from the failed block on
    ran = ["smoke-start-mooncake", "smoke-start-sglang", "smoke-train-launch", "smoke-train-monitor"]
    assert [name for name, status in statuses.items() if status != "skipped"] == ran, statuses
    assert {statuses[name] for name in ran} == {"passed"}, statuses
    assert resumed.block("check-py")["kept_from"]["directory"] == str(run.output_dir)
    assert (
        f"\nresumed: the rehearsal in {run.output_dir}, in its sandbox {run.sandbox} as that one left it"
        in resumed.stdout
    )
    assert f"\n  --workdir {run.sandbox}/work  (" in resumed.stdout
    assert "\n  REHEARSAL_BREAK=" not in resumed.stdout  # the knob of the first run is not this one's
    assert (resumed.output_dir / "rehearsal-report.txt").is_file()
    assert not (resumed.output_dir / "sandbox").exists()
    # the earlier rehearsal's record and report are as it left them
    assert (run.output_dir / "results.json").read_bytes() == record
    assert (run.sandbox / "rehearsal-report.txt").read_bytes() == report
    assert_nothing_left(resumed)


def test_a_zombie_trainer_counts_as_exited(tmp_path: Path, run_harness) -> None:
    run = rehearse(run_harness, tmp_path, REHEARSAL_BREAK="trainer-zombie")

    assert run.returncode == 0, run.stdout[-4000:] + run.stderr
    assert set(run.statuses().values()) == {"passed"}
    monitor = run.output("smoke-train-monitor", "stdout")
    assert re.search(r"already exited \(zombie state; container init does not reap orphans\)", monitor)
    assert monitor.endswith("smoke: OK - 1-step training completed\n")
    # The zombie lasted until the harness ended mooncake_master after the last block: only then did the
    # process's remaining thread see its connection drop and end it.
    assert_nothing_left(run)
    train_log = run.train_log()
    assert "main thread exits; the process stays as a zombie leader" in train_log
    assert train_log.rstrip().endswith("trainer-zombie: mooncake_master went away; the last thread ends the process")


def test_a_trainer_without_step_line_fails_the_monitor(tmp_path: Path, run_harness) -> None:
    run = rehearse(run_harness, tmp_path, REHEARSAL_BREAK="trainer-no-step", SPECFORGE_TRAIN_TIMEOUT="0")

    assert_stops_at(
        run, "smoke-train-monitor", re.compile(r"smoke: FAILED - specforge train exceeded 0s, killing pid=\d+")
    )
    assert_in_log_and_file(
        run,
        "smoke-train-monitor",
        "stdout",
        "smoke: FAILED - specforge train exceeded 0s, killing pid=",
        "[simulation] REHEARSAL_BREAK=trainer-no-step: no feature batch ever arrives",
    )
    assert "step 1:" not in run.train_log()
    # The monitor killed the trainer; its worker was left to the harness, which ended it.
    assert "-m specforge.worker --role consumer" in run.ended_at_teardown()
    assert_nothing_left(run)


def test_a_trainer_hanging_after_its_step_gets_the_monitors_teardown(tmp_path: Path, run_harness) -> None:
    run = rehearse(run_harness, tmp_path, REHEARSAL_BREAK="trainer-hang", SPECFORGE_TRAIN_GRACE="0")

    # By the guide's design a hang after the step line is a success, with diagnostics.
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr
    monitor = run.block("smoke-train-monitor")
    assert monitor["status"] == "passed"
    assert monitor["error_marker"] == "[ERROR]"
    assert re.search(
        r"smoke: WARNING - train pid=\d+ still alive 0s after step/loss markers; dumping stacks then killing",
        run.output("smoke-train-monitor", "stdout"),
    )
    diagnostics = run.output("smoke-train-monitor", "stderr")
    assert len(re.findall(r"^\[ERROR\] teardown-hang diagnostic for pid \d+:$", diagnostics, re.M)) == 2
    assert re.search(
        r"^\[ERROR\] (py-spy stack dump for pid|py-spy dump failed|py-spy install failed)", diagnostics, re.M
    )
    # The job log shows the monitor's stderr in full, line by line.
    section = run.stdout[run.stdout.index("--- stderr", run.stdout.index("id=smoke-train-monitor")) :]
    for line in diagnostics.splitlines():
        assert line.rstrip() in section, f"missing from the job log: {line!r}"
    assert "omitted; the whole stream is on disk" not in section.split("[18/18] smoke-train-monitor: PASSED")[0]
    py_spy = ["pip", "install", "--python", f"{run.sandbox}/bin/python", "--quiet", "py-spy"]
    assert py_spy in [c["argv"] for c in run.calls() if c["tool"] == "uv"]
    assert_nothing_left(run)


def test_a_stale_master_of_a_previous_run_is_stopped_by_the_guide(tmp_path: Path, run_harness) -> None:
    run = rehearse(run_harness, tmp_path, "--until", "smoke-start-mooncake", REHEARSAL_BREAK="mooncake-stale-master")

    assert run.returncode == 0, run.stdout[-4000:] + run.stderr
    assert set(run.statuses().values()) == {"passed", "not_run"}
    assert run.statuses()["smoke-start-mooncake"] == "passed"
    assert re.search(
        r"^previous run \(REHEARSAL_BREAK=mooncake-stale-master\): mooncake_master pid \d+ started on ports "
        r"35551, 35880, 35903 before the guide ran",
        run.stdout,
        re.M,
    )
    assert "\n  the guide stopped it during the run (SIGKILL)\n" in run.stdout
    assert ["-9", "-f", "(^|/)mooncake_master( |$)"] in [c["argv"] for c in run.calls() if c["tool"] == "pkill"]
    assert_nothing_left(run)


@pytest.mark.parametrize("parts", ["--simulated", pytest.param("--real", marks=pytest.mark.real_parts)])
def test_the_old_stop_pattern_leaves_the_stale_master_and_fails(tmp_path: Path, run_harness, parts: str) -> None:
    """The guide as it was: `pkill -f '^mooncake_master'` never matches the running binary's command line.

    With --real (a layer of its own, -m real_parts) the stale master is the Mooncake wheel's binary.
    """
    if parts == "--real":
        require_real_parts()
    text = (REPO / GUIDE).read_text(encoding="utf-8")
    fixed = "pkill -9 -f '(^|/)mooncake_master( |$)'"
    assert text.count(fixed) == 1
    guide = tmp_path / "specforge-old-pattern.md"
    guide.write_text(text.replace(fixed, "pkill -9 -f '^mooncake_master'"), encoding="utf-8")

    run = rehearse(run_harness, tmp_path, parts, guide=str(guide), REHEARSAL_BREAK="mooncake-stale-master")

    assert_stops_at(
        run,
        "smoke-start-mooncake",
        "smoke: FAILED - port(s) 35551 35880 35903 on 127.0.0.1 still in use after stopping old mooncake_master"
        " processes; see who holds them: ss -ltnp",
    )
    assert_in_log_and_file(
        run,
        "smoke-start-mooncake",
        "stderr",
        "smoke: FAILED - port(s) 35551 35880 35903 on 127.0.0.1 still in use after stopping old mooncake_master",
    )
    assert re.search(
        r"^\[ERROR\] rehearsal: the previous run's mooncake_master \(pid \d+\) outlived the guide; killed$",
        run.stdout,
        re.M,
    )
    assert_nothing_left(run, stand_ins_ran=parts == "--simulated")


def test_a_trainer_dependency_missing_fails_the_install_block(tmp_path: Path, run_harness) -> None:
    run = rehearse(run_harness, tmp_path, REHEARSAL_BREAK="specforge-missing-dep")

    assert_stops_at(
        run,
        "specforge-install-source",
        "specforge-install-source: FAILED - `specforge train` imports specforge.application, which needs yunchang"
        " (No module named 'yunchang'); install the package that provides it, then run this block again",
    )
    assert_in_log_and_file(
        run,
        "specforge-install-source",
        "stderr",
        "specforge-install-source: FAILED - `specforge train` imports specforge.application, which needs yunchang "
        "(No module named 'yunchang')",
    )


def test_a_checkout_without_the_ascend_companion_patch_fails_at_the_first_capture(tmp_path: Path, run_harness) -> None:
    # A liveness wait well above the second the trainer needs to die: the launch block, not the monitor, fails.
    run = rehearse(run_harness, tmp_path, REHEARSAL_BREAK="ascend-patch-missing", SPECFORGE_TRAIN_LIVENESS_WAIT="10")

    # The patch block warns and goes on; the server starts healthy, as it reaches Mooncake only at the first capture.
    assert_stops_at(
        run,
        "smoke-train-launch",
        "urllib.error.HTTPError: HTTP Error 500: spec-capture failed: spec-capture mooncake setup failed (status -1)",
    )
    assert re.fullmatch(
        r"smoke: base patch in place: all 2 files it changes are patched in \S+\n"
        r"smoke: WARNING - no Ascend companion patch in this SpecForge checkout \(\S+/SpecForge/patches/sglang/"
        r"v0\.5\.18/spec-capture-ascend-mount\.patch missing; .* specforge train fails at launch\n",
        run.output("smoke-apply-patches", "stderr"),
    )
    assert_in_log_and_file(
        run,
        "smoke-train-launch",
        "stdout",
        "smoke: FAILED - specforge train died within 10s of launch",
        "urllib.error.HTTPError: HTTP Error 500: spec-capture failed: spec-capture mooncake setup failed (status -1)",
    )
    # The server's log says why, in the guide's diagnostics and in what the run collected.
    (sglang_tail,) = [
        d for d in run.block("smoke-train-launch")["diagnostics"] if d["command"] == "tail -n 100 /tmp/smoke-sglang.log"
    ]
    rejected = "E mooncake store: cannot mount a 34359738368-byte segment: location:* is not supported"
    assert rejected in (run.output_dir / sglang_tail["output_path"]).read_text(encoding="utf-8")
    assert rejected in run.stdout
    assert "REHEARSAL_BREAK=ascend-patch-missing  (the SpecForge checkout has no Ascend companion patch" in run.stdout
    assert_nothing_left(run)


def test_a_malformed_companion_patch_is_replaced_by_the_guides_anchored_edits(tmp_path: Path, run_harness) -> None:
    """Upstream's companion patch once was corrupt against the base patch it follows: the guide makes its change
    with anchored edits of its own, and the capture server mounts its segment with location cpu."""
    run = rehearse(run_harness, tmp_path, REHEARSAL_BREAK="companion-patch-malformed")

    assert run.returncode == 0, run.stdout[-4000:] + run.stderr
    assert set(run.statuses().values()) == {"passed"}
    stderr = run.output("smoke-apply-patches", "stderr").splitlines()
    assert re.fullmatch(
        r"smoke: upstream's Ascend companion patch does not apply to \S+ \(error: corrupt patch at line \d+\); "
        r"making its change with anchored edits of \S+/spec_capture_sink\.py instead",
        stderr[1],
    ), stderr
    assert stderr[2].startswith("smoke: Ascend companion edits made to ")
    sglang_log = (run.output_dir / "collected" / "tmp" / "smoke-sglang.log").read_text(encoding="utf-8")
    assert "mooncake store: mounted a 34359738368-byte segment, location=cpu, protocol=tcp\n" in sglang_log
    assert "REHEARSAL_BREAK=companion-patch-malformed  (the Ascend companion patch is corrupt" in run.stdout
    assert_nothing_left(run)


def test_an_apply_script_that_patches_nothing_is_caught_at_the_patch_step(tmp_path: Path, run_harness) -> None:
    """The apply script says "applied" and its own check passes, but git skipped every file (a -p level): the
    patch step checks each file of the base patch and names the ones left as they were."""
    run = rehearse(run_harness, tmp_path, REHEARSAL_BREAK="patch-script-silent-skip")

    checkout = f"{run.sandbox}/sgl-workspace/sglang/python"
    reason = (
        f"smoke: FAILED - 2 of the 2 files the base patch changes are not patched in {checkout} after "
        "scripts/apply_sglang_spec_capture_patch.sh: sglang/srt/server_args.py sglang/srt/spec_capture_sink.py "
        "(git apply --reverse --check of their hunks failed); "
    )
    # the recorded reason is the line's first 200 characters
    assert_stops_at(run, "smoke-apply-patches", re.compile(re.escape(reason[:100]) + r".* \[\.\.\.\]"))
    assert_in_log_and_file(run, "smoke-apply-patches", "stderr", reason)
    script_log = (run.output_dir / "collected" / "tmp" / "smoke-patch.log").read_text(encoding="utf-8")
    assert f"spec-capture patch v0.5.18 applied at {checkout}/sglang\n" in script_log
    assert not Path(checkout, "sglang", "srt", "spec_capture_sink.py").exists()


def test_a_download_client_printing_on_stdout_leaves_the_stored_path_alone(tmp_path: Path, run_harness) -> None:
    """The client writes its progress to fd 1 itself, beside the path the store block prints: the block sends all
    of the client's stdout to stderr and writes the path alone to the block's stdout."""
    run = rehearse(run_harness, tmp_path, REHEARSAL_BREAK="store-polluted")

    assert run.returncode == 0, run.stdout[-4000:] + run.stderr
    assert set(run.statuses().values()) == {"passed"}
    stored = run.block("smoke-download-model")["captured"]["model_path"]
    assert re.fullmatch(
        rf"{re.escape(str(run.sandbox))}/hf-home/hub/models--Qwen--Qwen3\.5-4B/snapshots/[0-9a-f]{{40}}", stored
    )
    assert run.output("smoke-download-model", "stdout") == stored + "\n"
    stderr = run.output("smoke-download-model", "stderr")
    assert "[simulation] REHEARSAL_BREAK=store-polluted: snapshot_download writes its progress to fd 1" in stderr
    assert "Fetching 4 files: 100%|##########| 4/4 [00:00<00:00, 8.00it/s]\n" in stderr
    assert_nothing_left(run)


def test_a_download_that_stalls_fails_at_its_stall_bound_naming_the_host(tmp_path: Path, run_harness) -> None:
    """The Hub accepts the model's download and sends nothing: each read waits SPECFORGE_NET_STALL_TIMEOUT, the
    client resumes five times, then the block fails saying it stalled, where, and what to set."""
    run = rehearse(run_harness, tmp_path, REHEARSAL_BREAK="net-stall", SPECFORGE_NET_STALL_TIMEOUT="1")

    hub = re.search(r"\n  HF_ENDPOINT=(http://127\.0\.0\.1:\d+)  \(", run.stdout)
    assert hub, run.stdout[-3000:]
    said = (
        f"smoke: FAILED - downloading Qwen/Qwen3.5-4B from {hub[1]} stalled: no data for 1s; if {hub[1]} is "
        "unreachable or stalls from this machine, set HF_ENDPOINT to a Hub mirror it can reach (and HTTPS_PROXY if "
        "it needs one), then run this block again"
    )
    assert_stops_at(run, "smoke-download-model", said[:200] + " [...]")
    assert_in_log_and_file(run, "smoke-download-model", "stderr", said)
    assert run.block("smoke-download-model")["status"] == "failed"  # its stall bound, not the block's 3 h limit
    stalled = [line for line in (run.sandbox / "hub.log").read_text(encoding="utf-8").splitlines() if "stalled" in line]
    assert len(stalled) == 6, stalled  # the first read and the client's five resumes, each cut at 1 s
    assert_nothing_left(run, stand_ins_ran=False)


@pytest.mark.parametrize(
    ("knob", "library", "hint"),
    [
        ("cuda-wheel", "libcuda.so.1", "that is a CUDA build, not the NPU wheel: "),
        ("apt-missing-lib", "libibverbs.so.1", "a system library the wheel needs is missing: apt-get install "),
    ],
)
def test_a_mooncake_wheel_that_does_not_load_fails_its_install_quoting_the_loader(
    tmp_path: Path, run_harness, knob: str, library: str, hint: str
) -> None:
    """The index served a CUDA build, or the system lacks libibverbs: the install block's load check fails there,
    quoting the dynamic loader's line, rather than verify-install's expected output."""
    run = rehearse(run_harness, tmp_path, REHEARSAL_BREAK=knob)

    loader = f"ImportError: {library}: cannot open shared object file: No such file or directory"
    assert_stops_at(run, "build-mooncake", loader)
    assert_in_log_and_file(
        run,
        "build-mooncake",
        "stderr",
        f"build-mooncake: FAILED - the installed mooncake-transfer-engine-npu does not load here: {loader}; {hint}",
    )


def test_a_server_dying_at_start_up_fails_its_block_at_once_with_its_last_words(tmp_path: Path, run_harness) -> None:
    """The server exits while the block waits for /health: the block fails then, with the server's log, instead of
    polling for its whole 600 s (the rehearsal's own 240 s limit would end the test first)."""
    run = rehearse(run_harness, tmp_path, REHEARSAL_BREAK="sglang-dies-starting")

    # the reason ci.run records is the server's error line, from the log the block printed
    assert_stops_at(
        run,
        "smoke-start-sglang",
        "RuntimeError: NPU out of memory. Tried to allocate 2.00 GiB (NPU 0; 60.96 GiB total capacity)",
    )
    assert run.output("smoke-start-sglang", "stdout") == "smoke: waiting for SGLang /health (up to 600s)\n"
    assert_in_log_and_file(
        run,
        "smoke-start-sglang",
        "stderr",
        "exited during start-up; the last lines of /tmp/smoke-sglang.log:",
        "RuntimeError: NPU out of memory. Tried to allocate 2.00 GiB (NPU 0; 60.96 GiB total capacity)",
    )
    assert re.match(
        r"smoke: FAILED - the SGLang server started here \(pid=\d+\) exited during start-up; ",
        run.output("smoke-start-sglang", "stderr"),
    )
    assert_nothing_left(run)
