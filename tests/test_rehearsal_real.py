"""The rehearsal with its real parts (--real): the real uv and the real Mooncake NPU wheel's mooncake_master.

A layer of its own, run by .ci/run after the suite (`pytest -m real_parts`, which also takes the --real
cases of tests/test_rehearsal.py; the suite's own run deselects them: pyproject.toml's addopts): each test is
a whole rehearsal, and they need what the repository does not carry, the wheels the guide installs
(`python -m ci.rehearsal.parts fetch DIR`, then GUIDE_GUARD_WHEELHOUSE=DIR), the real uv and Debian's
libibverbs1 (tests/real_parts.py). Without them each test is skipped saying so, or
fails under GUIDE_GUARD_REQUIRE_EXTERNAL=1, as .ci/run sets.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from real_parts import require_real_parts
from test_rehearsal import (
    BLOCK_IDS,
    GUIDE,
    REPO,
    assert_nothing_left,
    assert_stops_at,
    rehearse,
)

pytestmark = [pytest.mark.real_parts, pytest.mark.xdist_group("guide-ports")]

SOURCE_TEXT_UV = "uv pip install "  # the source text's install, before the guide named its interpreter


@pytest.fixture
def wheelhouse() -> Path:
    return require_real_parts()


def _real_lines(stdout: str) -> list[str]:
    return stdout.split("\nparts (--real):\n", 1)[1].split("\nisolation:")[0].splitlines()


def test_the_guide_passes_with_the_real_uv_and_the_real_mooncake_master(
    tmp_path: Path, run_harness, wheelhouse: Path
) -> None:
    run = rehearse(run_harness, tmp_path, "--real")

    assert run.returncode == 0, run.stdout[-4000:] + run.stderr
    assert list(run.statuses()) == BLOCK_IDS and set(run.statuses().values()) == {"passed"}
    uv, mooncake = _real_lines(run.stdout)
    assert uv.startswith("  uv: real, ") and f"offline against the wheels of {wheelhouse}" in uv, uv
    assert mooncake.startswith("  mooncake: real, mooncake_transfer_engine_npu-0.3.13.post1-cp311-"), mooncake
    assert "\n  isolation: none" not in run.stdout
    per_block = run.stdout.split("\nparts per block", 1)[1]
    # build-mooncake imports the wheel's store to check it loads: the real compiled module
    assert "\n  build-mooncake: real: mooncake, uv; simulated: apt-get\n" in per_block
    assert "\n  verify-install: real: huggingface_hub, mooncake; simulated: -\n" in per_block
    assert "\n  smoke-start-mooncake: real: mooncake, mooncake_master; simulated: pkill\n" in per_block
    # uv is the real one: it resolved the wheel's dependencies from the wheelhouse, which no stand-in does
    pip_log = (run.output_dir / "collected" / "tmp" / "build-mooncake-pip.log").read_text(encoding="utf-8")
    assert " + aiohttp==" in pip_log and " + mooncake-transfer-engine-npu==0.3.13.post1" in pip_log, pip_log
    # the master is the wheel's binary: glog lines, all three ports on 0.0.0.0 (inside the private namespace)
    master_log = (run.output_dir / "collected" / "tmp" / "smoke-mooncake.log").read_text(encoding="utf-8")
    assert re.search(r"^I\d{4} [\d:.]+ +\d+ master\.cpp:\d+\] Master service started on port 35551,", master_log, re.M)
    assert "HTTP metadata server started on 0.0.0.0:35880" in master_log
    (ended,) = [p["command"] for p in run.record["guides"][0]["processes_ended"] if "mooncake_master" in p["command"]]
    binary = ended.split(" ")[0]
    assert binary.endswith("/site-packages/mooncake/mooncake_master"), ended
    assert Path(binary).read_bytes()[:4] == b"\x7fELF"
    # mooncake.store is the wheel's compiled module, loaded against the stand-in CANN runtime
    assert "\n  CANN runtime libraries: libascendcl.so, " in run.stdout
    assert run.output("verify-install", "stdout").splitlines()[1] == "mooncake.store imports clean"
    assert_nothing_left(run)


def test_a_stale_real_master_is_stopped_by_the_guide(tmp_path: Path, run_harness, wheelhouse: Path) -> None:
    run = rehearse(
        run_harness, tmp_path, "--real", "--until", "smoke-start-mooncake", REHEARSAL_BREAK="mooncake-stale-master"
    )

    assert run.returncode == 0, run.stdout[-4000:] + run.stderr
    assert run.statuses()["smoke-start-mooncake"] == "passed"
    assert "\n  the guide stopped it during the run (SIGKILL)\n" in run.stdout
    previous = (run.sandbox / "previous-run-mooncake.log").read_text(encoding="utf-8")
    assert "master.cpp" in previous and "Master service started on port 35551" in previous
    assert_nothing_left(run, stand_ins_ran=False)


def test_the_real_uv_refuses_the_source_texts_install_without_a_virtualenv(
    tmp_path: Path, run_harness, wheelhouse: Path
) -> None:
    text = (REPO / GUIDE).read_text(encoding="utf-8")
    guide = tmp_path / "specforge-source-text.md"
    guide.write_text(text.replace('uv pip install --python "$(command -v python)" ', SOURCE_TEXT_UV), encoding="utf-8")

    run = rehearse(
        run_harness, tmp_path, "--real", "--until", "install-hf-hub", guide=str(guide), REHEARSAL_BREAK="uv-no-venv"
    )

    assert run.returncode == 1, run.stdout[-3000:] + run.stderr
    assert run.block("install-hf-hub")["status"] == "failed"
    said = " ".join(run.output("install-hf-hub", "stderr").split())  # uv wraps its message at 80 columns
    # the real uv's refusal, then the block's line naming the index it was installing from
    assert said.startswith(
        "error: No virtual environment found; run `uv venv` to create an environment, "
        "or pass `--system` to install into a non-virtual environment "
        "install-hf-hub: FAILED - uv could not install huggingface_hub from the default index "
    )
    assert [c["real"] for c in run.calls() if c["tool"] == "uv"] == [True]


def test_with_a_system_python_the_guide_passes_with_the_real_parts(
    tmp_path: Path, run_harness, wheelhouse: Path
) -> None:
    run = rehearse(run_harness, tmp_path, "--real", REHEARSAL_BREAK="uv-no-venv")

    assert run.returncode == 0, run.stdout[-4000:] + run.stderr
    assert set(run.statuses().values()) == {"passed"}
    site = next((run.sandbox / "system-python" / "lib").glob("python3.*/site-packages"))
    assert (site / "mooncake" / "mooncake_master").read_bytes()[:4] == b"\x7fELF"
    assert (site / "huggingface_hub").is_dir() and (site / "specforge").is_dir()
    assert_nothing_left(run)


def test_without_the_ascend_companion_patch_the_first_capture_fails_against_the_real_master(
    tmp_path: Path, run_harness, wheelhouse: Path
) -> None:
    """The real master is up and the server healthy; the capture's segment mount is what fails, at launch."""
    run = rehearse(
        run_harness, tmp_path, "--real", REHEARSAL_BREAK="ascend-patch-missing", SPECFORGE_TRAIN_LIVENESS_WAIT="10"
    )

    failed = r"spec-capture mooncake setup failed \(status -?\d+\)"
    assert_stops_at(
        run,
        "smoke-train-launch",
        re.compile(rf"urllib\.error\.HTTPError: HTTP Error 500: spec-capture failed: {failed}"),
    )
    assert "smoke: WARNING - no Ascend companion patch in this SpecForge checkout" in run.output(
        "smoke-apply-patches", "stderr"
    )
    assert "spec-capture mooncake setup failed" in run.output("smoke-train-launch", "stdout")
    master_log = (run.output_dir / "collected" / "tmp" / "smoke-mooncake.log").read_text(encoding="utf-8")
    assert "Master service started on port 35551" in master_log
    assert _real_lines(run.stdout)[1].startswith("  mooncake: real, ")
    assert_nothing_left(run, stand_ins_ran=False)
