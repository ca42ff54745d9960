"""Single blocks of docs/specforge.md run by bash against stubs of the programs they call: what a failure says."""

# The rehearsal (tests/test_rehearsal.py) runs the whole guide against its simulations; these run one
# block at a time with a PATH that holds only stub programs and the few real tools the block needs, to
# reach the paths a simulation does not take: apt-get failing, no uv, another CANN version or no ATB,
# a master that exits at once. Paths under /tmp in a block are moved into the test's directory.

from __future__ import annotations

import functools
import json
import platform
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from ports import free_ports

ROOT = Path(__file__).resolve().parents[1]
GUIDE = ROOT / "docs" / "specforge.md"
UV_HELP = "install it with 'pip install uv' (see https://docs.astral.sh/uv/getting-started/installation/)"


@functools.cache
def block_lines() -> dict[str, int]:
    """The line of each runnable block's opening fence, by id, from the harness's own listing."""
    listing = subprocess.run(
        [sys.executable, "-m", "ci.run", str(GUIDE), "--list", "--format", "json"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return {block["id"]: block["line"] for block in json.loads(listing.stdout) if block["id"]}


def block_body(block_id: str) -> str:
    """The body of the guide's runnable block with this id."""
    line = block_lines()[block_id]
    lines = GUIDE.read_text(encoding="utf-8").split("\n")[line:]
    return "\n".join(lines[: lines.index("```")])


def run_block(
    block_id: str, tmp_path: Path, env: dict[str, str], stubs: dict[str, str], tools: tuple[str, ...] = ()
) -> subprocess.CompletedProcess[str]:
    """Run the block with bash; PATH holds the stubs (shell scripts) and links to the real `tools` only."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)  # a second run of a block finds the first one's
    for name, script in stubs.items():
        (bin_dir / name).write_text("#!/bin/sh\n" + script, encoding="utf-8")
        (bin_dir / name).chmod(0o755)
    for tool in tools:
        found = sys.executable if tool == "python" else shutil.which(tool)
        assert found, f"the test needs {tool}"
        if not (bin_dir / tool).exists():
            (bin_dir / tool).symlink_to(found)
    scratch = tmp_path / "tmp"
    scratch.mkdir(exist_ok=True)
    body = block_body(block_id).replace("/tmp/", f"{scratch}/")
    return subprocess.run(
        [shutil.which("bash") or "/bin/bash", "-c", body],
        env={**env, "PATH": str(bin_dir)},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )


def test_without_uv_the_first_install_block_says_how_to_get_it(tmp_path: Path, harness_env: dict[str, str]) -> None:
    done = run_block("install-hf-hub", tmp_path, harness_env, {})

    assert done.returncode == 1
    assert done.stderr == f"install-hf-hub: FAILED - uv not found on PATH; {UV_HELP}\n"


def test_a_failing_apt_get_update_is_named_with_its_output(tmp_path: Path, harness_env: dict[str, str]) -> None:
    uv_called = tmp_path / "uv-called"
    stubs = {
        # the block passes apt-get its stall bound (-o Acquire::...) before the command
        "apt-get": 'case " $* " in *" update "*) echo "E: Failed to fetch http://archive.invalid/InRelease" >&2; '
        "exit 100;; esac\nexit 0\n",
        "uv": f"touch {uv_called}\n",
    }
    done = run_block("build-mooncake", tmp_path, harness_env, stubs, tools=("tail",))

    assert done.returncode == 1
    assert (
        done.stderr == "build-mooncake: FAILED - apt-get update:\nE: Failed to fetch http://archive.invalid/InRelease\n"
    )
    assert not uv_called.exists()


def test_a_failing_apt_get_install_is_named_too(tmp_path: Path, harness_env: dict[str, str]) -> None:
    stubs = {
        "apt-get": 'case " $* " in *" install "*) echo "E: Unable to locate package libnuma1" >&2; exit 100;; esac\n'
    }
    done = run_block("build-mooncake", tmp_path, {**harness_env}, {**stubs, "uv": "exit 0\n"}, tools=("tail",))

    assert done.returncode == 1
    assert done.stderr.startswith("build-mooncake: FAILED - apt-get install libibverbs1 libcurl4 libnuma1:\n")
    assert done.stderr.endswith("E: Unable to locate package libnuma1\n")


def _check_cann(tmp_path: Path, env: dict[str, str], ascend_root: Path) -> subprocess.CompletedProcess[str]:
    return run_block("check-cann", tmp_path, {**env, "SPECFORGE_ASCEND_ROOT": str(ascend_root)}, {}, ("uname", "grep"))


def test_check_cann_reads_the_install_info_of_the_cann_8_5_layout(tmp_path: Path, harness_env: dict[str, str]) -> None:
    done = _check_cann(tmp_path, harness_env, _ascend_root(tmp_path, "cann", "8.5.0", atb_dir=None))

    assert (done.returncode, done.stdout, done.stderr) == (0, "version=8.5.0\n", "")


def test_check_cann_without_install_info_says_where_it_looked(tmp_path: Path, harness_env: dict[str, str]) -> None:
    root = tmp_path / "Ascend"
    root.mkdir()
    done = _check_cann(tmp_path, harness_env, root)

    arch = f"{platform.machine()}-linux"
    assert done.stdout == "ascend_toolkit_install.info MISSING\n"  # the expected output's mismatch
    assert done.stderr == (
        f"check-cann: no ascend_toolkit_install.info under {root}/ascend-toolkit/latest/{arch}/ (before CANN 8.5) "
        f"or {root}/cann/{arch}/ (CANN 8.5 and later)\n"
    )


def _ascend_root(tmp_path: Path, info_dir: str, version: str, atb_dir: str | None) -> Path:
    """A CANN install: its install info (with `version=`) under info_dir, an ATB lib dir under nnal/atb/atb_dir."""
    root = tmp_path / "Ascend"
    info = root / info_dir / f"{platform.machine()}-linux" / "ascend_toolkit_install.info"
    info.parent.mkdir(parents=True)
    info.write_text(f"package_name=Ascend-cann-toolkit\nversion={version}\n", encoding="utf-8")
    if atb_dir is not None:
        (root / "nnal" / "atb" / atb_dir / "atb" / "cxx_abi_1" / "lib").mkdir(parents=True)
    return root


def _start_sglang(
    tmp_path: Path, env: dict[str, str], ascend_root: Path
) -> tuple[subprocess.CompletedProcess[str], str]:
    """smoke-start-sglang with a server stub that records its LD_LIBRARY_PATH: the block's result, and that value."""
    seen = tmp_path / "server-env"
    stubs = {
        "pkill": "exit 1\n",
        # the server: what it was started with, then a mark that it has started
        "python": f'[ "$2" = sglang.launch_server ] && printf "%s" "$LD_LIBRARY_PATH" > {seen} && : > {seen}.started\n'
        # then it serves, as a server does, until the test is done with it (a bounded wait)
        f"for i in $(seq 1 400); do [ -e {seen}.stop ] && exit 0; sleep 0.05; done\nexit 0\n",
        # healthy once the server has started (a bounded wait)
        "curl": f"for i in $(seq 1 200); do [ -e {seen}.started ] && exit 0; sleep 0.05; done\nexit 7\n",
    }
    block_env = {
        **env,
        "SPECFORGE_ASCEND_ROOT": str(ascend_root),
        "LD_LIBRARY_PATH": "/already/there",
        "SPECFORGE_SGLANG_HEALTH_TIMEOUT": "10",
    }
    tools = ("uname", "sed", "seq", "sleep", "nohup", "tail")
    done = run_block("smoke-start-sglang", tmp_path, block_env, stubs, tools)
    (tmp_path / "server-env.stop").touch()
    return done, seen.read_text(encoding="utf-8") if seen.exists() else "(server never started)"


def test_the_atb_dir_follows_the_installed_cann_version(tmp_path: Path, harness_env: dict[str, str]) -> None:
    root = _ascend_root(tmp_path, "ascend-toolkit/latest", "8.5.0", atb_dir="8.5.0")
    done, library_path = _start_sglang(tmp_path, harness_env, root)

    assert done.returncode == 0, done.stderr
    assert library_path == f"{root}/nnal/atb/8.5.0/atb/cxx_abi_1/lib:/already/there"
    assert "WARNING" not in done.stderr


def test_the_new_cann_layout_and_the_latest_atb_link_are_found(tmp_path: Path, harness_env: dict[str, str]) -> None:
    root = _ascend_root(tmp_path, "cann", "9.1.0", atb_dir="latest")
    done, library_path = _start_sglang(tmp_path, harness_env, root)

    assert done.returncode == 0, done.stderr
    assert library_path == f"{root}/nnal/atb/latest/atb/cxx_abi_1/lib:/already/there"


def test_a_missing_atb_dir_is_a_warning_naming_the_version(tmp_path: Path, harness_env: dict[str, str]) -> None:
    root = _ascend_root(tmp_path, "ascend-toolkit/latest", "9.0.0", atb_dir=None)
    done, library_path = _start_sglang(tmp_path, harness_env, root)

    assert done.returncode == 0, done.stderr
    assert library_path == "/already/there"
    assert done.stderr.startswith(f"smoke: WARNING - no ATB lib dir for CANN 9.0.0 under {root}/nnal/atb ")
    assert "libatb.so: cannot open shared object file" in done.stderr
    # the expected output is untouched: the warning is on stderr
    assert re.fullmatch(
        r"smoke: waiting for SGLang /health \(up to \d+s\)\nsmoke: sglang ready \(pid=\d+\)\n", done.stdout
    )


def test_a_server_dying_at_start_up_fails_the_health_wait_at_once(tmp_path: Path, harness_env: dict[str, str]) -> None:
    """The server exits while the block waits for /health: the block fails then, with the server's last words, and
    does not wait out its 600 s (the test's own 60 s limit would end it first)."""
    stubs = {
        "pkill": "exit 1\n",
        "python": 'echo "Load weight begin."\necho "ValueError: --enable-spec-capture needs --chunked-prefill-size -1"\n'
        "exit 1\n",
        "curl": "exit 7\n",  # never healthy
    }
    root = _ascend_root(tmp_path, "ascend-toolkit/latest", "9.0.0", atb_dir="9.0.0")
    env = {**harness_env, "SPECFORGE_ASCEND_ROOT": str(root), "SPECFORGE_SGLANG_HEALTH_TIMEOUT": "600"}
    done = run_block("smoke-start-sglang", tmp_path, env, stubs, ("uname", "sed", "sleep", "nohup", "tail"))

    assert done.returncode == 1
    assert done.stdout == "smoke: waiting for SGLang /health (up to 600s)\n"
    assert re.fullmatch(
        rf"smoke: FAILED - the SGLang server started here \(pid=\d+\) exited during start-up; the last lines of "
        rf"{tmp_path}/tmp/smoke-sglang.log:\nLoad weight begin.\n"
        r"ValueError: --enable-spec-capture needs --chunked-prefill-size -1\n",
        done.stderr,
    ), done.stderr


def test_a_master_that_exits_at_once_fails_the_readiness_loop_at_once(
    tmp_path: Path, harness_env: dict[str, str]
) -> None:
    rpc, http, metrics = free_ports(3)
    stubs = {
        "pkill": "exit 1\n",
        "mooncake_master": 'echo "E mooncake_master: Failed to start HTTP metadata server" >&2\nexit 1\n',
    }
    env = {
        **harness_env,
        "SPECFORGE_MOONCAKE_RPC_PORT": str(rpc),
        "SPECFORGE_MOONCAKE_HTTP_PORT": str(http),
        "SPECFORGE_MOONCAKE_METRICS_PORT": str(metrics),
        "SPECFORGE_MOONCAKE_READY_TIMEOUT": "20",
    }
    done = run_block("smoke-start-mooncake", tmp_path, env, stubs, tools=("python", "seq", "sleep", "nohup", "tail"))

    assert done.returncode == 1
    assert re.match(
        rf"smoke: FAILED - the mooncake_master started here \(pid=\d+\) exited before binding {rpc}; its log:\n",
        done.stderr,
    ), done.stderr
    assert done.stderr.endswith("E mooncake_master: Failed to start HTTP metadata server\n")
    assert done.stdout == ""


@pytest.mark.parametrize(
    ("command_line", "matches"),
    [
        # the NPU wheel's console script execs the binary it ships: its path starts the command line
        ("/usr/local/lib/python3.11/site-packages/mooncake/mooncake_master --rpc_port=35551", True),
        # a wheel whose script runs the binary as a child: the script's interpreter line
        ("/usr/bin/python3 /usr/local/bin/mooncake_master --rpc_port=35551", True),
        ("mooncake_master --rpc_port=35551", True),
        ("/opt/mooncake/mooncake_master", True),
        ("/opt/mooncake/mooncake_master_backup --rpc_port=1", False),
        ("tail -f /tmp/smoke-mooncake.log", False),
    ],
)
def test_the_stop_pattern_matches_the_real_command_lines(command_line: str, matches: bool) -> None:
    body = block_body("smoke-start-mooncake")
    (pattern,) = re.findall(r"pkill -9 -f '([^']+)'", body)
    grep = subprocess.run(["grep", "-qE", pattern], input=command_line, text=True, timeout=10)
    assert (grep.returncode == 0) is matches
    # the block's own bash (`bash -c BODY`) is never a match: pkill would end the block itself
    own = subprocess.run(["grep", "-qE", pattern], input=body.replace("\n", " "), text=True, timeout=10)
    assert own.returncode == 1


# smoke-apply-patches against the rehearsal's stand-ins: its SpecForge checkout (apply script, base and Ascend
# companion patches) and its editable sglang 0.5.18, a git work tree as in the image.
STANDINS = ROOT / "ci" / "rehearsal" / "simulations"
PATCH_TOOLS = ("python", "git", "bash", "tail", "grep", "sed", "sort", "wc", "tr", "head", "dirname")
COMPANION = "SpecForge/patches/sglang/v0.5.18/spec-capture-ascend-mount.patch"
APPLIED_OUTPUT = "smoke: applying spec-capture patches for sglang 0.5.18\nsmoke: patches + apt deps applied\n"
MOUNT = 'store.allocate_and_mount_segment(segment_size, os.environ.get("MOONCAKE_PROTOCOL", "tcp"), "cpu")'


def _checkouts(tmp_path: Path, env: dict[str, str]) -> dict[str, str]:
    """SpecForge/ and sglang/ under tmp_path; the environment in which `python` sees that sglang as 0.5.18."""
    for part in ("scripts", "patches"):
        shutil.copytree(STANDINS / "specforge-repo" / part, tmp_path / "SpecForge" / part)
    shutil.copytree(STANDINS / "sglang", tmp_path / "sglang", ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run(["git", "init", "-q", str(tmp_path / "sglang")], check=True, timeout=30)
    metadata = tmp_path / "site" / "sglang-0.5.18.dist-info" / "METADATA"
    metadata.parent.mkdir(parents=True)
    metadata.write_text("Metadata-Version: 2.1\nName: sglang\nVersion: 0.5.18\n", encoding="utf-8")
    return {
        **env,
        "PYTHONPATH": f"{tmp_path / 'site'}:{tmp_path / 'sglang' / 'python'}",
        "PYTHONDONTWRITEBYTECODE": "1",
    }


def _sink(tmp_path: Path) -> str:
    return (tmp_path / "sglang" / "python" / "sglang" / "srt" / "spec_capture_sink.py").read_text(encoding="utf-8")


def test_the_ascend_companion_patch_goes_on_after_the_base_patch_once(
    tmp_path: Path, harness_env: dict[str, str]
) -> None:
    env = _checkouts(tmp_path, harness_env)
    first = run_block("smoke-apply-patches", tmp_path, env, {}, PATCH_TOOLS)

    assert (first.returncode, first.stdout) == (0, APPLIED_OUTPUT), first.stderr
    assert first.stderr == (
        f"smoke: base patch in place: all 2 files it changes are patched in {tmp_path}/sglang/python\n"
        f"smoke: Ascend companion patch applied to {tmp_path}/sglang/python\n"
    )
    patched = _sink(tmp_path)
    assert MOUNT in patched

    # A second run on the patched checkout changes nothing and passes.
    second = run_block("smoke-apply-patches", tmp_path, env, {}, PATCH_TOOLS)

    assert (second.returncode, second.stdout) == (0, APPLIED_OUTPUT), second.stderr
    assert second.stderr == (
        f"smoke: base patch and Ascend mount already in place in {tmp_path}/sglang/python; "
        "scripts/apply_sglang_spec_capture_patch.sh not run again\n"
        f"smoke: base patch in place: all 2 files it changes are patched in {tmp_path}/sglang/python\n"
        f"smoke: Ascend companion patch already applied to {tmp_path}/sglang/python (the sink mounts its segment "
        "with location cpu)\n"
    )
    assert _sink(tmp_path) == patched


def test_a_companion_patch_that_does_not_apply_is_replaced_by_anchored_edits_once(
    tmp_path: Path, harness_env: dict[str, str]
) -> None:
    env = _checkouts(tmp_path, harness_env)
    companion = tmp_path / COMPANION
    # written for another base patch: one line of its context differs from the sink the base patch adds
    text = companion.read_text(encoding="utf-8")
    context = "     def connect(self, store: Any) -> None:\n"
    assert text.count(context) == 1
    companion.write_text(text.replace(context, "     def connect(self, store: Any, retries: int) -> None:\n"))
    sink = tmp_path / "sglang" / "python" / "sglang" / "srt" / "spec_capture_sink.py"

    done = run_block("smoke-apply-patches", tmp_path, env, {}, PATCH_TOOLS)

    assert (done.returncode, done.stdout) == (0, APPLIED_OUTPUT), done.stderr
    assert done.stderr.splitlines()[1:] == [
        f"smoke: upstream's Ascend companion patch does not apply to {tmp_path}/sglang/python (error: patch failed: "
        f"python/sglang/srt/spec_capture_sink.py:31); making its change with anchored edits of {sink} instead",
        f"smoke: Ascend companion edits made to {sink} (setup() registers no segment on an Ascend host; it is "
        "mounted with location cpu)",
    ]
    patched = _sink(tmp_path)
    assert (
        'store.allocate_and_mount_segment(ascend_segment_bytes, os.environ.get("MOONCAKE_PROTOCOL", "tcp"), "cpu")'
        in (patched)
    )
    # The edited sink mounts its segment with location cpu on an Ascend host, and nowhere else.
    probe = (
        "import sys; sys.path.insert(0, sys.argv[1]); from sglang.srt.spec_capture_sink import SpecCaptureSink\n"
        "class Store:\n"
        "    def setup(self, **kwargs): print('setup', kwargs['global_segment_size'], kwargs['local_buffer_size']); return 0\n"
        "    def allocate_and_mount_segment(self, size, protocol, location): print('mount', size, location); return 0\n"
        "SpecCaptureSink('dflash', [1]).connect(Store())\n"
    )
    python_dir = str(tmp_path / "sglang" / "python")
    for visible, printed in (("0", "setup 0 0\nmount 1024 cpu\n"), ("", "setup 1024 1073741824\n")):
        environment = {**env, "ASCEND_RT_VISIBLE_DEVICES": visible, "MOONCAKE_GLOBAL_SEGMENT_SIZE": "1024"}
        seen = subprocess.run(
            [sys.executable, "-c", probe, python_dir], env=environment, capture_output=True, text=True, timeout=30
        )
        assert seen.stdout == printed, seen.stderr

    # A second run finds the mount and changes nothing.
    again = run_block("smoke-apply-patches", tmp_path, env, {}, PATCH_TOOLS)
    assert (again.returncode, again.stdout) == (0, APPLIED_OUTPUT), again.stderr
    assert "already applied" in again.stderr.splitlines()[-1]
    assert _sink(tmp_path) == patched


def test_a_sink_of_another_shape_fails_the_anchored_edits_unchanged(
    tmp_path: Path, harness_env: dict[str, str]
) -> None:
    env = _checkouts(tmp_path, harness_env)
    patch = tmp_path / "SpecForge" / "patches" / "sglang" / "v0.5.18" / "spec-capture.patch"  # its setup() differs
    patch.write_text(patch.read_text(encoding="utf-8").replace("rc = store.setup(", "rc = store.init("))

    done = run_block("smoke-apply-patches", tmp_path, env, {}, PATCH_TOOLS)

    assert done.returncode == 1
    assert done.stdout == "smoke: applying spec-capture patches for sglang 0.5.18\n"
    sink = tmp_path / "sglang" / "python" / "sglang" / "srt" / "spec_capture_sink.py"
    assert (
        f"smoke: FAILED - anchored edit of {sink}: the store.setup( call is there 0 times, not once; the base "
        "patch's sink has changed shape"
    ) in done.stderr
    assert done.stderr.endswith("error: python/sglang/srt/spec_capture_sink.py: patch does not apply\n")
    assert "allocate_and_mount_segment" not in _sink(tmp_path)  # the base patch only, as the script left it


def test_the_companion_patch_without_the_apply_script_is_refused(tmp_path: Path, harness_env: dict[str, str]) -> None:
    env = _checkouts(tmp_path, harness_env)
    (tmp_path / "SpecForge" / "scripts" / "apply_sglang_spec_capture_patch.sh").unlink()

    done = run_block("smoke-apply-patches", tmp_path, env, {}, PATCH_TOOLS)

    assert done.returncode == 1
    assert done.stderr == (
        "smoke: FAILED - SpecForge/scripts/apply_sglang_spec_capture_patch.sh missing while "
        f"{tmp_path / COMPANION} exists: SpecForge's Ascend tutorial applies that companion patch after the "
        "script's base patch, so neither was applied; use a complete SpecForge checkout "
        "(specforge-install-source), then run this block again\n"
    )
    assert not (tmp_path / "sglang" / "python" / "sglang" / "srt" / "spec_capture_sink.py").exists()


def test_a_checkout_without_the_companion_patch_is_a_warning(tmp_path: Path, harness_env: dict[str, str]) -> None:
    env = _checkouts(tmp_path, harness_env)
    (tmp_path / COMPANION).unlink()

    done = run_block("smoke-apply-patches", tmp_path, env, {}, PATCH_TOOLS)

    assert (done.returncode, done.stdout) == (0, APPLIED_OUTPUT), done.stderr
    assert done.stderr.splitlines()[-1].startswith(
        f"smoke: WARNING - no Ascend companion patch in this SpecForge checkout ({tmp_path / COMPANION} missing; "
    )
    assert "class SpecCaptureSink" in _sink(tmp_path)


# smoke-download-model against a stub huggingface_hub: a snapshot whose cached shard an interrupted download
# left short, and a client that prints its progress to file descriptor 1 directly.
HUB_STUB = """\
import os
from pathlib import Path

SNAPSHOT = Path(os.environ["STUB_SNAPSHOT"])


class ReadTimeout(Exception):
    pass


def snapshot_download(repo_id):
    os.write(1, b"Fetching 1 files: 100%|##########| 1/1\\n")  # not through sys.stdout
    if os.environ.get("STUB_STALL"):
        raise ReadTimeout("The read operation timed out")
    return str(SNAPSHOT)


def hf_hub_download(repo_id, filename, force_download=False):
    os.write(1, f"downloading {filename} again (force_download={force_download})\\n".encode())
    if os.environ.get("STUB_WHOLE"):
        (SNAPSHOT / filename).write_bytes(Path(os.environ["STUB_WHOLE"]).read_bytes())
    return str(SNAPSHOT / filename)
"""


def _shard(tensor_bytes: int) -> bytes:
    """A safetensors file whose header says 32 bytes of tensor data, holding tensor_bytes of them."""
    header = json.dumps({"w": {"dtype": "F32", "shape": [4, 2], "data_offsets": [0, 32]}}).encode()
    header += b" " * (-len(header) % 8)
    return len(header).to_bytes(8, "little") + header + bytes(tensor_bytes)


def _download(tmp_path: Path, env: dict[str, str], **stub_env: str) -> subprocess.CompletedProcess[str]:
    package = tmp_path / "stub-site" / "huggingface_hub"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(HUB_STUB, encoding="utf-8")
    snapshot = tmp_path / "snapshot"
    snapshot.mkdir()
    (snapshot / "config.json").write_text("{}", encoding="utf-8")
    (snapshot / "model.safetensors").write_bytes(_shard(16))  # an interrupted download: 16 of 32 bytes
    block_env = {**env, "PYTHONPATH": str(package.parent), "STUB_SNAPSHOT": str(snapshot), **stub_env}
    return run_block("smoke-download-model", tmp_path, block_env, {}, ("python",))


def test_an_incomplete_cached_shard_is_downloaded_again_and_only_the_path_is_stored(
    tmp_path: Path, harness_env: dict[str, str]
) -> None:
    whole = tmp_path / "whole.safetensors"
    whole.write_bytes(_shard(32))
    done = _download(tmp_path, harness_env, STUB_WHOLE=str(whole))

    assert done.returncode == 0, done.stderr
    assert done.stdout == f"{tmp_path}/snapshot\n"  # what the store keeps: the path alone
    needed = len(_shard(32))
    assert (
        f"smoke: cached shard model.safetensors is incomplete ({needed - 16} bytes, its header needs {needed}); "
        "downloading it again\n"
    ) in done.stderr
    # the client's own output, written to fd 1, went to stderr
    assert "Fetching 1 files: 100%" in done.stderr
    assert "downloading model.safetensors again (force_download=True)" in done.stderr
    assert (tmp_path / "snapshot" / "model.safetensors").read_bytes() == whole.read_bytes()


def test_a_shard_still_incomplete_after_a_fresh_download_fails(tmp_path: Path, harness_env: dict[str, str]) -> None:
    done = _download(tmp_path, harness_env)

    assert done.returncode == 1
    assert done.stdout == ""
    assert done.stderr.endswith(
        f"smoke: FAILED - {tmp_path}/snapshot/model.safetensors is still incomplete after a fresh download "
        f"({len(_shard(16))} bytes, its header needs {len(_shard(32))})\n"
    )


def test_a_stalled_download_names_the_host_and_the_variable_to_set(tmp_path: Path, harness_env: dict[str, str]) -> None:
    done = _download(tmp_path, harness_env, STUB_STALL="1", HF_ENDPOINT="https://hub.invalid")

    assert done.returncode == 1
    assert done.stdout == ""
    assert done.stderr.endswith(
        "smoke: FAILED - downloading Qwen/Qwen3.5-4B from https://hub.invalid stalled: no data for 60s; if "
        "https://hub.invalid is unreachable or stalls from this machine, set HF_ENDPOINT to a Hub mirror it can "
        "reach (and HTTPS_PROXY if it needs one), then run this block again\n"
    )
