"""Choosing the rehearsal's parts: stand-ins by default, real ones with --real where they can be had, and why not.

The runs with the real parts themselves (the real uv, the real mooncake_master) need the wheels the guide
installs and are a layer of their own: tests/test_rehearsal_real.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from test_rehearsal import rehearse

pytestmark = pytest.mark.xdist_group("guide-ports")

NO_WHEELHOUSE = {"GUIDE_GUARD_WHEELHOUSE": "", "GUIDE_GUARD_REQUIRE_EXTERNAL": "0"}


def test_by_default_uv_and_mooncake_are_stand_ins_and_the_report_says_so(tmp_path: Path, run_harness) -> None:
    run = rehearse(run_harness, tmp_path, "--until", "build-mooncake")

    assert run.returncode == 0, run.stdout[-4000:] + run.stderr
    assert (
        "\nparts (--simulated): uv and Mooncake are stand-ins (--real runs the real ones where they can be had)\n"
        in (run.stdout)
    )
    per_block = run.stdout.split("\nparts per block", 1)[1]
    assert "\n  install-hf-hub: real: -; simulated: uv\n" in per_block
    # build-mooncake checks that the wheel it installed loads: it imports mooncake.store
    assert "\n  build-mooncake: real: -; simulated: apt-get, mooncake, uv\n" in per_block


def test_real_parts_that_cannot_be_had_fall_back_and_say_why(tmp_path: Path, run_harness) -> None:
    """--real without a wheelhouse: the stand-ins run, and the report says what was missing and how to get it."""
    run = rehearse(run_harness, tmp_path, "--real", "--until", "install-hf-hub", **NO_WHEELHOUSE)

    assert run.returncode == 0, run.stdout[-4000:] + run.stderr
    parts = run.stdout.split("\nparts (--real):\n", 1)[1].split("\nisolation:")[0].splitlines()
    assert parts[0].startswith("  uv: the stand-in: "), parts
    assert "python -m ci.rehearsal.parts fetch DIR" in parts[0] or "no uv" in parts[0], parts
    assert parts[1] == "  mooncake: the stand-in: the real wheel needs the real uv", parts
    assert "\n  uv: fake: " in run.stdout  # listed among the simulations again


def test_under_require_external_a_missing_real_part_is_an_error(tmp_path: Path, run_harness) -> None:
    run = rehearse(
        run_harness, tmp_path, "--real", GUIDE_GUARD_WHEELHOUSE=str(tmp_path / "none"), GUIDE_GUARD_REQUIRE_EXTERNAL="1"
    )

    assert run.returncode == 2, run.stdout[-3000:] + run.stderr
    assert (
        "[ERROR] rehearsal: --real with GUIDE_GUARD_REQUIRE_EXTERNAL=1, and a real part cannot be had here (uv: "
        in (run.stderr)
    )
    assert not (run.output_dir / "results.json").exists()


def test_a_wheelhouse_without_real_is_a_usage_error(tmp_path: Path, run_harness) -> None:
    run = rehearse(run_harness, tmp_path, "--wheelhouse", str(tmp_path))

    assert run.returncode == 2
    assert "--wheelhouse is for --real: the stand-ins need no wheels" in run.stderr


def test_without_a_virtualenv_a_bare_uv_install_is_refused_as_the_real_uv_refuses(tmp_path: Path, run_harness) -> None:
    """REHEARSAL_BREAK=uv-no-venv: the image's Python is a system one; the guide's source text fails there."""
    source_text = tmp_path / "specforge.md"
    guide = (Path(__file__).resolve().parents[1] / "docs" / "specforge.md").read_text(encoding="utf-8")
    source_text.write_text(guide.replace('uv pip install --python "$(command -v python)" ', "uv pip install "))
    run = rehearse(
        run_harness, tmp_path, "--until", "install-hf-hub", guide=str(source_text), REHEARSAL_BREAK="uv-no-venv"
    )

    assert run.returncode == 1, run.stdout[-3000:] + run.stderr
    assert run.block("install-hf-hub")["status"] == "failed"
    # uv's own refusal, then the block's line naming the index it was installing from
    assert run.output("install-hf-hub", "stderr").startswith(
        "error: No virtual environment found; run `uv venv` to create an environment, "
        "or pass `--system` to install into a non-virtual environment\n"
        "install-hf-hub: FAILED - uv could not install huggingface_hub from the default index "
    )
    assert "\n  python: a system Python (no virtualenv) in the sandbox, Python " in run.stdout
    assert "\n  VIRTUAL_ENV=(unset)  (the image's Python is a system one: no virtualenv)\n" in run.stdout


def test_without_a_virtualenv_the_guide_installs_into_its_own_python(tmp_path: Path, run_harness) -> None:
    """The guide names the interpreter (`--python "$(command -v python)"`): the system Python gets the packages."""
    run = rehearse(run_harness, tmp_path, "--until", "verify-install", REHEARSAL_BREAK="uv-no-venv")

    assert run.returncode == 0, run.stdout[-4000:] + run.stderr
    installed = run.sandbox / "system-python" / "lib"
    assert list(installed.glob("python3.*/site-packages/mooncake/mooncake_master")), "not in the system Python"
    assert not (run.sandbox / "venv").exists()
    assert run.output("verify-install", "stdout").endswith("mooncake_master binary present\n")
