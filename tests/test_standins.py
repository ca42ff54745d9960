"""The stand-ins behave as the real parts were seen or read to: mooncake_master, `specforge train`, the model config."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from ports import free_ports

from ci.rehearsal.fake_hub import EMBEDDING_TENSOR, hub_repositories

REPO = Path(__file__).resolve().parents[1]
REHEARSAL = REPO / "ci" / "rehearsal" / "simulations"
MOONCAKE = REHEARSAL / "packages" / "mooncake-transfer-engine-npu"
MASTER = MOONCAKE / "mooncake" / "mooncake_master"
SPECFORGE = REHEARSAL / "specforge-repo"
RECIPE = "examples/configs/online/disaggregated/external/qwen3.5-4b-dflash-online-npu.yaml"
DEADLINE_S = 60.0
_LISTEN = "0A"  # TCP_LISTEN in /proc/net/tcp


def stand_in_env(*paths: Path, **extra: str) -> dict[str, str]:
    """The caller's environment without the rehearsal's variables, the stand-ins importable, no bytecode written."""
    env = {name: value for name, value in os.environ.items() if not name.startswith(("REHEARSAL_", "PYTHON"))}
    env.update(PYTHONPATH=os.pathsep.join(str(path) for path in (*paths, REHEARSAL / "image")))
    env.update(PYTHONDONTWRITEBYTECODE="1", **extra)
    return env


def guide_flags(rpc: int, metadata: int, metrics: int) -> list[str]:
    """smoke-start-mooncake's flags, on the given ports."""
    return [
        "--enable_http_metadata_server=true",
        f"--rpc_port={rpc}",
        f"--http_metadata_server_port={metadata}",
        f"--metrics_port={metrics}",
        "--enable_metric_reporting=false",
    ]


def listening(pid: int) -> dict[int, str]:
    """The IPv4 ports the process's network namespace listens on, each with its address as /proc/net/tcp spells it."""
    ports = {}
    for line in Path(f"/proc/{pid}/net/tcp").read_text(encoding="utf-8").splitlines()[1:]:
        fields = line.split()
        address, _, port = fields[1].partition(":")
        if fields[3] == _LISTEN:
            ports[int(port, 16)] = address
    return ports


def wait_until_listening(process: subprocess.Popen[str], ports: list[int]) -> dict[int, str]:
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        assert process.poll() is None, f"the master exited with {process.returncode}"
        bound = listening(process.pid)
        if set(ports) <= set(bound):
            return bound
        time.sleep(0.05)
    raise AssertionError(f"ports {ports} not all listening after {DEADLINE_S}s: {listening(process.pid)}")


@dataclass(frozen=True)
class Served:
    """A master started with the guide's flags, seen listening, then stopped with SIGTERM."""

    bound: dict[int, str]  # port -> the address it listened on, as /proc/net/tcp writes it
    comm: str  # its process name while it ran
    cmdline: str  # the first word of its command line while it ran
    returncode: int
    stdout: str
    stderr: str


def serve_until_sigterm(prefix: list[str], ports: list[int], **env: str) -> Served:
    """Run the master (after PREFIX, a command that runs it) until it listens on PORTS, then SIGTERM it."""
    process = subprocess.Popen(
        [*prefix, sys.executable, str(MASTER), *guide_flags(*ports)],
        env=stand_in_env(MOONCAKE, **env),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        bound = wait_until_listening(process, ports)
        comm = Path(f"/proc/{process.pid}/comm").read_text(encoding="utf-8")
        cmdline = Path(f"/proc/{process.pid}/cmdline").read_bytes().split(b"\0")[0].decode()
        process.send_signal(signal.SIGTERM)
        stdout, stderr = process.communicate(timeout=DEADLINE_S)
    finally:
        process.kill()
        process.wait()
    return Served(bound, comm, cmdline, process.returncode, stdout, stderr)


def glog(stderr: str) -> list[str]:
    """The glog lines, each reduced to its severity, file:line tag and message (no time, no thread id)."""
    pattern = re.compile(r"^([IWEF])\d{4} \d\d:\d\d:\d\d\.\d{6} +\d+ (\S+:\d+)\] (.*)$")
    return [f"{m[1]} {m[2]}] {m[3]}" for m in map(pattern.match, stderr.splitlines()) if m]


@pytest.fixture
def ports() -> list[int]:
    return free_ports(3)


@pytest.fixture
def taken() -> Iterator[list[socket.socket]]:
    """Listening sockets the test holds (the port another process took)."""
    held: list[socket.socket] = []
    yield held
    for sock in held:
        sock.close()


def take(held: list[socket.socket], port: int) -> None:
    sock = socket.socket()
    sock.bind(("127.0.0.1", port))
    sock.listen()
    held.append(sock)


def run_master(ports: list[int], *, timeout_s: float = DEADLINE_S) -> subprocess.CompletedProcess[str]:
    """The master with the guide's flags, under bash as the guide runs it (a signal's death is 128+N there)."""
    command = ["bash", "-c", '"$@"; exit $?', "bash", sys.executable, str(MASTER), *guide_flags(*ports)]
    return subprocess.run(command, env=stand_in_env(MOONCAKE), capture_output=True, text=True, timeout=timeout_s)


def test_the_master_starts_as_the_real_one_logs_it_and_stops_on_sigterm(ports: list[int]) -> None:
    rpc, metadata, metrics = ports
    served = serve_until_sigterm([], ports)
    bound, comm, cmdline, stdout, stderr = served.bound, served.comm, served.cmdline, served.stdout, served.stderr

    assert served.returncode == 0, stderr
    # no private network namespace here: loopback only, where the real one binds 0.0.0.0
    assert {bound[port] for port in ports} == {"0100007F"}
    assert comm == "mooncake_master\n"
    assert cmdline.startswith(f"{MASTER} --enable_http_metadata_server=true --rpc_port={rpc} ")
    assert stdout == ""
    lines = stderr.splitlines()
    assert lines[0].startswith("[simulation] mooncake_master: guide-guard rehearsal stand-in, listening on 127.0.0.1")
    assert lines[1] == "WARNING: Logging before InitGoogleLogging() is written to STDERR"
    assert glog(stderr) == [
        f"I master.cpp:1522] Master service started on port {rpc}, max_threads=2, enable_metric_reporting=0, "
        f"metrics_port={metrics}, metrics_host=127.0.0.1, rpc_port={rpc}, rpc_address=127.0.0.1, "
        f"enable_http_metadata_server=1, http_metadata_server_port={metadata}, http_metadata_server_host=127.0.0.1",
        f"I master.cpp:1374] Starting C++ HTTP metadata server on 127.0.0.1:{metadata}",
        f"I http_metadata_server.cpp:126] HTTP metadata server started on 127.0.0.1:{metadata}",
        "I master.cpp:1383] C++ HTTP metadata server started successfully",
        "I master_service.cpp:2596] Task cleanup thread started",
        f"I master_admin_service.cpp:310] Master admin server started on port {metrics}",
        "I master.cpp:1683] Shutdown signal received, exiting gracefully",
        "I master_service.cpp:2619] Task cleanup thread stopped",
        "I http_metadata_server.cpp:137] HTTP metadata server stopped",
    ]
    # the cleanup thread and the admin server come from another thread than the start, as in the real master
    threads = [line.split()[2] for line in lines if re.match(r"[IEF]\d{4} ", line)]
    assert threads[0] == threads[3] != threads[4] == threads[5]


def test_a_taken_metadata_port_aborts_the_master(ports: list[int], taken: list[socket.socket]) -> None:
    take(taken, ports[1])
    done = run_master(ports)

    assert done.returncode == 128 + signal.SIGABRT, done.stderr
    # the [simulation] line, glog's warning, three glog lines, the banner; then bash's word on the abort
    lines = done.stderr.splitlines()
    assert lines[1] == "WARNING: Logging before InitGoogleLogging() is written to STDERR"
    assert lines[5] == "*** Check failure stack trace: ***"
    # bash pads the pid of its job line to a width that depends on the pid's number of digits
    assert re.fullmatch(rf'bash: line 1: +{lines[2].split()[2]} Aborted +"\$@"', lines[6]), lines[6:]
    assert len(lines) == 7, lines
    assert glog(done.stderr) == [
        f"E http_metadata_server.cpp:121] Failed to start HTTP metadata server on 127.0.0.1:{ports[1]}",
        "E master.cpp:1386] Failed to start C++ HTTP metadata server",
        "F master.cpp:1608] Failed to start HTTP metadata server",
    ]


def test_a_taken_metrics_port_ends_the_master_with_status_1(ports: list[int], taken: list[socket.socket]) -> None:
    take(taken, ports[2])
    done = run_master(ports)

    assert done.returncode == 1, done.stderr
    assert glog(done.stderr)[3:] == [
        "I master.cpp:1383] C++ HTTP metadata server started successfully",
        f"E master_admin_service.cpp:269] Failed to start master admin server on 127.0.0.1:{ports[2]}: "
        "Address already in use",
        "E master.cpp:1651] Failed to start master admin server",
        "I master_service.cpp:2596] Task cleanup thread started",
        "I master_service.cpp:2619] Task cleanup thread stopped",
        "I http_metadata_server.cpp:137] HTTP metadata server stopped",
    ]


def test_a_taken_rpc_port_ends_the_master_with_status_1_and_no_error_line(
    ports: list[int], taken: list[socket.socket]
) -> None:
    take(taken, ports[0])
    done = run_master(ports)

    assert done.returncode == 1, done.stderr
    assert glog(done.stderr)[3:] == [
        "I master.cpp:1383] C++ HTTP metadata server started successfully",
        "I master_service.cpp:2596] Task cleanup thread started",
        f"I master_admin_service.cpp:310] Master admin server started on port {ports[2]}",
        "I master_service.cpp:2619] Task cleanup thread stopped",
        "I http_metadata_server.cpp:137] HTTP metadata server stopped",
    ]
    assert not [line for line in glog(done.stderr) if line[0] in "EF"]


def _private_network_namespace() -> list[str]:
    """A command prefix that runs its command in a new network namespace with loopback up, or skips the test."""
    prefix = ["unshare", "--user", "--map-root-user", "--net", "sh", "-c", 'ip link set lo up && exec "$@"', "sh"]
    if not (shutil.which("unshare") and shutil.which("ip")):
        pytest.skip("needs unshare and ip for a private network namespace")
    probe = subprocess.run([*prefix, "true"], capture_output=True, text=True)
    if probe.returncode != 0:
        pytest.skip(f"no private network namespace here: {probe.stderr.strip()}")
    return prefix


def test_in_the_private_network_namespace_the_master_binds_0000_as_the_real_one(ports: list[int]) -> None:
    served = serve_until_sigterm(_private_network_namespace(), ports, REHEARSAL_ISOLATION="private")
    bound, stderr = served.bound, served.stderr

    assert served.returncode == 0, stderr
    assert {bound[port] for port in ports} == {"00000000"}
    assert "listening on 0.0.0.0 (as the real one; inside the rehearsal's private network namespace)" in stderr
    assert f"metrics_host=0.0.0.0, rpc_port={ports[0]}, rpc_address=0.0.0.0," in stderr
    assert f"HTTP metadata server started on 0.0.0.0:{ports[1]}\n" in stderr


# -- specforge train ------------------------------------------------------------------------------------


def guide_overrides() -> list[str]:
    """The section.field=value overrides smoke-train-launch passes to `specforge train`, from the guide itself."""
    text = (REPO / "docs" / "specforge.md").read_text(encoding="utf-8")
    launch = text.split("nohup specforge train", 1)[1].split(">/tmp/smoke-train.log", 1)[0]
    overrides = re.findall(r"^\s+([a-z_]+(?:\.[a-z_]+)+=\S+?)\s*\\?$", launch, re.M)
    assert len(overrides) == 13, launch
    return [item.replace('"', "") for item in overrides]


def specforge(*args: str, cwd: Path = SPECFORGE) -> subprocess.CompletedProcess[str]:
    program = "import sys; from specforge.cli import main; sys.argv[0] = 'specforge'; main()"
    env = stand_in_env(SPECFORGE)
    return subprocess.run(
        [sys.executable, "-c", program, *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=DEADLINE_S
    )


def test_train_plan_prints_the_real_plans_json(tmp_path: Path) -> None:
    overrides = guide_overrides()
    done = specforge("train", "-c", RECIPE, "--plan", *overrides)

    assert done.returncode == 0, done.stderr
    plan = json.loads(done.stdout)  # stdout is the JSON and nothing else
    assert done.stdout == json.dumps(plan, indent=2, sort_keys=True) + "\n"
    assert set(plan) == {"kind", "role", "commands", "worker_env"}
    assert (plan["kind"], plan["role"], plan["worker_env"]) == ("supervisor", "both", {})
    assert [set(command) for command in plan["commands"]] == [{"label", "argv", "env"}] * 2
    producer, consumer = plan["commands"]
    assert producer["label"] == "producer"
    assert producer["argv"] == [
        sys.executable,
        *("-m", "specforge.cli", "train", "--config", RECIPE, "--role", "producer"),
        *overrides,
    ]
    assert consumer["argv"][6:8] == ["--role", "consumer"]
    assert producer["env"]["MOONCAKE_MASTER_SERVER_ADDR"] == "127.0.0.1:35551"
    assert producer["env"]["DISAGG_STORE_ID"] == "qwen3.5-4b-dflash-npu-online"

    two = specforge("train", "-c", RECIPE, "--plan", *overrides, "deployment.trainer.nproc_per_node=2")
    consumer_argv = json.loads(two.stdout)["commands"][1]["argv"]
    assert consumer_argv[:6] == [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2"]
    assert consumer_argv[6:8] == ["--module", "specforge.cli"]


@pytest.mark.parametrize(
    "override",
    ["training.max_step=1", "run.output_dir=x", "deployment.disaggregated.capture_server_url=http://x", "model=1.2"],
)
def test_train_refuses_a_key_the_real_run_config_lacks(override: str) -> None:
    done = specforge("train", "-c", RECIPE, "--plan", override)

    assert done.returncode == 2
    assert done.stdout == ""
    assert "is not a field of the run config" in done.stderr or "must be a mapping" in done.stderr, done.stderr


def test_train_refuses_a_recipe_key_the_real_run_config_lacks(tmp_path: Path) -> None:
    recipe = tmp_path / "recipe.yaml"
    text = (SPECFORGE / RECIPE).read_text(encoding="utf-8")
    recipe.write_text(text.replace("  num_anchors: 512\n", "  num_anchors: 512\n  num_anchor: 3\n"), encoding="utf-8")
    done = specforge("train", "-c", str(recipe), "--plan")

    assert done.returncode == 2
    assert "Error: training: not a field of the run config: num_anchor" in done.stderr


def test_train_checks_the_embedding_against_the_text_config(tmp_path: Path) -> None:
    model = tmp_path / "model"
    model.mkdir()
    for name, data in hub_repositories()["Qwen/Qwen3.5-4B"].files.items():
        (model / name).write_bytes(data)
    config = json.loads((model / "config.json").read_text(encoding="utf-8"))
    assert (config["model_type"], config["text_config"]["model_type"]) == ("qwen3_5", "qwen3_5_text")
    data = tmp_path / "data.jsonl"
    turns = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    data.write_text(json.dumps({"id": "a", "conversations": turns}) + "\n", encoding="utf-8")
    check = (
        "import sys; from specforge import application, config; "
        "application.check_inputs(config.load(sys.argv[1], tuple(sys.argv[2:])))"
    )
    arguments = [str(SPECFORGE / RECIPE), f"model.target_model_path={model}", f"data.train_data_path={data}"]
    arguments.append(f"model.embedding_key={EMBEDDING_TENSOR}")

    def check_inputs() -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-c", check, *arguments]
        return subprocess.run(command, env=stand_in_env(SPECFORGE), capture_output=True, text=True, timeout=DEADLINE_S)

    assert check_inputs().returncode == 0
    config["text_config"]["hidden_size"] = 3
    (model / "config.json").write_text(json.dumps(config), encoding="utf-8")
    done = check_inputs()
    assert done.returncode == 1
    assert "the text config says [vocab_size, hidden_size] = [4, 3]" in done.stderr


def test_the_sglang_stand_in_reads_the_hybrid_layers_where_qwen3_5_keeps_them(tmp_path: Path) -> None:
    """Qwen3.5's layer_types live under text_config: a hybrid model on the ascend backend needs libatb.so."""
    model = tmp_path / "model"
    model.mkdir()
    shutil.copy(REHEARSAL / "hub" / "Qwen" / "Qwen3.5-4B" / "config.json", model / "config.json")
    config = json.loads((model / "config.json").read_text(encoding="utf-8"))
    assert "layer_types" not in config and "linear_attention" in config["text_config"]["layer_types"]
    command = [sys.executable, "-m", "sglang.launch_server", "--model-path", str(model), "--attention-backend"]
    env = stand_in_env(REHEARSAL / "sglang" / "python", LD_LIBRARY_PATH=str(tmp_path))

    done = subprocess.run([*command, "ascend"], env=env, capture_output=True, text=True, timeout=DEADLINE_S)

    assert done.returncode != 0
    assert "libatb.so: cannot open shared object file" in done.stderr


def test_the_sglang_stand_in_refuses_chunked_prefill_with_a_value_error_as_the_real_scheduler(tmp_path: Path) -> None:
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}", encoding="utf-8")
    sglang = tmp_path / "sglang"
    shutil.copytree(REHEARSAL / "sglang", sglang, ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run(["git", "init", "-q", str(sglang)], check=True, timeout=30)
    base = SPECFORGE / "patches" / "sglang" / "v0.5.18" / "spec-capture.patch"
    subprocess.run(["git", "-C", str(sglang), "apply", str(base)], check=True, timeout=30)
    command = [sys.executable, "-m", "sglang.launch_server", "--model-path", str(model), "--enable-spec-capture"]
    env = stand_in_env(sglang / "python")

    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=DEADLINE_S)

    assert done.returncode == 1
    assert done.stderr.splitlines()[-1] == (
        "ValueError: --enable-spec-capture needs --chunked-prefill-size -1 (one prefill pass)"
    )


def test_the_npu_recipe_has_the_real_ones_values_and_needs_the_guides_process_override() -> None:
    """sdpa attention, sglang's ascend attention backend, 8 trainer processes: on the one card the guide gives the
    trainer, only its deployment.trainer.nproc_per_node=1 override lets it start."""
    import yaml

    recipe = yaml.safe_load((SPECFORGE / RECIPE).read_text(encoding="utf-8"))
    assert recipe["training"]["attention_backend"] == "sdpa"
    assert recipe["model"]["sglang_attention_backend"] == "ascend"
    assert recipe["deployment"]["trainer"]["nproc_per_node"] == 8
    check = "import sys; from specforge import config, distributed; c = config.load(sys.argv[1], tuple(sys.argv[2:]))"
    check += "; distributed.init_distributed(int(config.get(c, 'deployment.trainer.nproc_per_node')))"
    env = stand_in_env(SPECFORGE, ASCEND_RT_VISIBLE_DEVICES="1")

    def start(*overrides: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-c", check, str(SPECFORGE / RECIPE), *overrides]
        return subprocess.run(command, env=env, capture_output=True, text=True, timeout=DEADLINE_S)

    refused = start()
    assert refused.returncode == 1
    assert "RuntimeError: deployment.trainer.nproc_per_node=8 but 1 NPU(s) are visible" in refused.stderr
    assert start("deployment.trainer.nproc_per_node=1").returncode == 0


def _apply_script_checkout(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """The stand-in SpecForge's scripts and patches, and an editable sglang in a git work tree, as in the image."""
    for part in ("scripts", "patches"):
        shutil.copytree(SPECFORGE / part, tmp_path / "SpecForge" / part)
    sglang = tmp_path / "sglang"
    shutil.copytree(REHEARSAL / "sglang", sglang, ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run(["git", "init", "-q", str(sglang)], check=True, timeout=30)
    return tmp_path / "SpecForge" / "scripts" / "apply_sglang_spec_capture_patch.sh", stand_in_env(sglang / "python")


def test_the_apply_script_takes_v0_5_18_by_default_and_refuses_another_target(tmp_path: Path) -> None:
    script, env = _apply_script_checkout(tmp_path)
    sink = tmp_path / "sglang" / "python" / "sglang" / "srt" / "spec_capture_sink.py"

    def apply(*args: str) -> subprocess.CompletedProcess[str]:
        command = ["bash", str(script), *args]
        return subprocess.run(command, env=env, capture_output=True, text=True, timeout=DEADLINE_S)

    refused = apply("--target", "v0.5.14")
    assert (refused.returncode, refused.stderr) == (2, "ERROR: unsupported SGLang patch target: v0.5.14\n")
    assert not sink.exists()

    first = apply()
    assert first.returncode == 0, first.stderr
    assert first.stdout.endswith(f"spec-capture patch v0.5.18 applied at {tmp_path}/sglang/python/sglang\n")
    assert sink.is_file()
    # "already applied" is what git apply --reverse --check says, not a receipt file beside the tree
    assert not (tmp_path / "sglang" / "python" / "sglang" / ".spec_capture_patch.applied").exists()
    again = apply("--target", "v0.5.18")
    assert again.stdout.endswith(f"spec-capture patch v0.5.18 already applied at {tmp_path}/sglang/python/sglang\n")
    sink.write_text(sink.read_text(encoding="utf-8") + "# edited\n", encoding="utf-8")
    edited = apply()
    assert edited.returncode != 0  # neither clean nor the exact patched state: git apply refuses
    assert "spec_capture_sink.py: already exists in working directory" in edited.stderr
