"""Writing results.json from the finished outcomes of a run."""

from __future__ import annotations

import json
import resource
from collections.abc import Sequence
from pathlib import Path

from ci.base.files import write_atomically
from ci.base.text import escape_undecodable_json
from ci.record.format import (
    JSON,
    RECORD_VERSION,
    block_to_json,
    collection_to_json,
    diagnostic_to_json,
    earlier_to_json,
    processes_to_json,
)
from ci.record.outcome import EarlierRun, GuideOutcome

__all__ = ["run_record", "write_record"]


def _own_peak_rss_bytes() -> int:
    """The harness's peak resident memory since it started.

    VmHWM, not getrusage: Linux carries ru_maxrss across exec, so a harness
    forked from a big process (a test runner) would report its parent's size.
    """
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux


def run_record(
    outcomes: Sequence[GuideOutcome],
    exit_status: int,
    base: Path,
    *,
    resumed_from: EarlierRun | None = None,
) -> JSON:
    """The run record: every block of every guide, plus per-guide verdicts and leftovers, and the run it resumed;
    what it quotes of the run (output, names, paths) masked by the run's policy."""
    return {
        "version": RECORD_VERSION,
        "exit_status": int(exit_status),  # the number, not the ExitCode member the run may pass
        "harness_peak_rss_bytes": _own_peak_rss_bytes(),
        "resumed_from": earlier_to_json(resumed_from),
        "guides": [
            {
                "guide": o.plan.guide,
                "started_at": o.started_at,
                "duration_s": round(o.duration_s, 3),
                "failed": o.failed,
                "interrupted_by_signal": o.interrupted_by,
                "processes_ended": processes_to_json(o.leftovers),
                "collected": collection_to_json(o.collection, base),
                "cleanup": [diagnostic_to_json(c, base) for c in o.cleanup],
            }
            for o in outcomes
        ],
        "blocks": [block_to_json(r, o.plan.guide, base) for o in outcomes for r in o.results],
    }


def write_record(
    path: Path,
    outcomes: Sequence[GuideOutcome],
    exit_status: int,
    *,
    resumed_from: EarlierRun | None = None,
) -> None:
    """Write the run record to `path`, whole or not at all; paths in it are relative to `path`'s directory.

    A name from the OS that is not UTF-8 (a guide's file name, a collected
    file's) is recorded with those bytes as `\\xNN`: the file stays UTF-8.
    """
    record = run_record(outcomes, exit_status, path.parent, resumed_from=resumed_from)
    path.parent.mkdir(parents=True, exist_ok=True)
    # One line per block: readable, and json's fast C encoder works only without indent.
    head = json.dumps({key: value for key, value in record.items() if key != "blocks"}, indent=2, ensure_ascii=False)
    blocks = record["blocks"]
    lines = ",\n".join("    " + json.dumps(block, ensure_ascii=False) for block in blocks)
    text = head[:-2] + (',\n  "blocks": [\n' + lines + "\n  ]\n}\n" if blocks else ',\n  "blocks": []\n}\n')
    write_atomically(path, escape_undecodable_json(text))
