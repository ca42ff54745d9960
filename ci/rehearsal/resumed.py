"""`ci.rehearse GUIDE --resume DIR`: the earlier rehearsal whose sandbox a resumed one reuses, and whether it can."""

# A machine the guide failed on keeps what the run did: the packages installed, the model downloaded, the
# clone. A resumed rehearsal is that machine: it reuses the earlier rehearsal's sandbox as it was left, and
# its ci.run continues the earlier ci.run's record (`ci.run --resume`). What a sandbox was built with is
# written into it (BUILT_FILE), so that a resume which cannot work on it is refused before anything runs.
# A resumed rehearsal's output directory holds no sandbox; POINTER_FILE names the one it used, so that it
# can be resumed in turn.

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from ci.rehearsal.model import MALFORMED_COMPANION_KNOB, SYSTEM_PYTHON_KNOB, SetupError

__all__ = [
    "BUILT_FILE",
    "POINTER_FILE",
    "SANDBOX_MARKER",
    "SHAPING_KNOBS",
    "Earlier",
    "built_facts",
    "find_earlier",
    "pointer",
]

SANDBOX_MARKER = ".guide-guard-rehearsal"  # the file that makes a directory a sandbox the rehearsal may delete
BUILT_FILE = "built.json"  # in a sandbox: the mode and the failure knob it was built with
POINTER_FILE = "rehearsal-resumed.json"  # in a resumed rehearsal's output directory: the sandbox it reused
# Knobs that change the sandbox's files when it is built (its interpreter, the SpecForge repository), not only
# what runs: a sandbox built with one is that machine for good, and one built without it cannot become it.
SHAPING_KNOBS = (SYSTEM_PYTHON_KNOB, "ascend-patch-missing", MALFORMED_COMPANION_KNOB)


@dataclass(frozen=True)
class Earlier:
    """The rehearsal a resumed one continues."""

    root: Path  # its output directory: the ci.run record the resumed ci.run continues (left as it is)
    base: Path  # the sandbox it ran in (its own, or the one it reused in turn), reused as it was left
    system_python: bool  # the sandbox's interpreter is a system one (built with REHEARSAL_BREAK=uv-no-venv)


def built_facts(mode: str, knob: str) -> str:
    """The text of BUILT_FILE for a sandbox built now."""
    return json.dumps({"mode": mode, "knob": knob}) + "\n"


def pointer(earlier: Earlier) -> str:
    """The text of POINTER_FILE for a rehearsal that resumed EARLIER."""
    return json.dumps({"resumed": str(earlier.root), "sandbox": str(earlier.base)}) + "\n"


def _sandbox_of(root: Path, given: str) -> Path:
    """The sandbox the rehearsal in ROOT ran in; SetupError naming the fix when ROOT is not a rehearsal's."""
    if (root / "sandbox" / SANDBOX_MARKER).is_file():
        return root / "sandbox"
    try:
        named = Path(json.loads((root / POINTER_FILE).read_text(encoding="utf-8"))["sandbox"])
    except FileNotFoundError:
        raise SetupError(
            f"--resume {given} is not a rehearsal's output directory (no sandbox/{SANDBOX_MARKER} in it): "
            "pass the --output-dir of an earlier `python -m ci.rehearse`; a run of ci.run alone is resumed "
            "with `python -m ci.run GUIDE --resume DIR`"
        ) from None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise SetupError(
            f"--resume {given}: {root / POINTER_FILE} cannot be read ({exc}); rehearse again whole"
        ) from exc
    if not (named / SANDBOX_MARKER).is_file():
        raise SetupError(
            f"--resume {given}: the sandbox it reused, {named}, is gone (pruned or deleted); rehearse again whole"
        )
    return named


def find_earlier(given: str, *, output_dir: str | None, mode: str, knob: str) -> Earlier:
    """The rehearsal in GIVEN (its --output-dir), if this one (MODE, failure KNOB, "" for none) can resume it.

    SetupError says why not, and what to do: GIVEN is not a rehearsal's output directory, OUTPUT_DIR is
    GIVEN or holds a sandbox of its own, the mode differs or is --real, or a knob that shapes the sandbox differs.
    """
    root = Path(given).absolute()
    if not root.is_dir():
        raise SetupError(f"--resume {given}: no such directory; pass the --output-dir of an earlier rehearsal")
    if output_dir is not None:
        target = Path(output_dir).absolute()
        if target.exists() and os.path.samefile(root, target):
            raise SetupError(
                f"--resume {given} and --output-dir {output_dir} are the same directory: the resumed rehearsal "
                "writes a record of its own and leaves the earlier one as it was; name another --output-dir"
            )
        if (target / "sandbox" / SANDBOX_MARKER).exists():
            raise SetupError(
                f"--output-dir {output_dir} holds a rehearsal's sandbox: a resumed rehearsal reuses the one of "
                f"--resume {given}; name a new --output-dir"
            )
    base = _sandbox_of(root, given)
    try:
        built = json.loads((base / BUILT_FILE).read_text(encoding="utf-8"))
        built_mode, built_knob = str(built["mode"]), str(built["knob"])
    except (OSError, ValueError, KeyError, TypeError):
        raise SetupError(
            f"--resume {given}: its sandbox {base} does not say how it was built (no {BUILT_FILE}: an older "
            "guide-guard made it); rehearse again whole"
        ) from None
    if mode == "real" or built_mode == "real":
        raise SetupError(
            f"--resume {given}: a --real rehearsal cannot be resumed (its real parts are set up per rehearsal); "
            "rehearse again whole, or resume --simulated rehearsals only"
        )
    if mode != built_mode:
        raise SetupError(f"--resume {given}: that rehearsal ran --{built_mode}; resume it with --{built_mode}")
    shaped = built_knob if built_knob in SHAPING_KNOBS else ""
    wanted = knob if knob in SHAPING_KNOBS else ""
    if shaped != wanted:
        built_with = f"REHEARSAL_BREAK={shaped}" if shaped else f"neither {' nor '.join(SHAPING_KNOBS)}"
        fix = f"REHEARSAL_BREAK={shaped}" if shaped else f"no REHEARSAL_BREAK={knob}"
        raise SetupError(
            f"--resume {given}: its sandbox was built with {built_with}, and this rehearsal has "
            f"REHEARSAL_BREAK={knob or '(none)'}; these knobs change a sandbox's files when it is built, and a "
            f"built sandbox cannot become another machine: resume with {fix}, or rehearse again whole"
        )
    return Earlier(root, base, system_python=shaped == SYSTEM_PYTHON_KNOB)
