"""The rehearsal's report: isolation, every simulation and override in effect, the calls recorded, the verdict."""

from __future__ import annotations

import contextlib
import json
import re
from collections import Counter
from collections.abc import Mapping
from typing import Any

from ci import Status, did_not_pass_line
from ci.rehearsal.fake_hub import FakeHub
from ci.rehearsal.model import GUIDE_PORTS, Rehearsal, Sandbox

__all__ = ["render"]

_FAILING = frozenset(status.value for status in Status if status.is_failure)


def render(plan: Rehearsal, guide: str, hub: FakeHub, exit_status: int, leftovers: Mapping[int, str]) -> str:
    """The report printed at the end of a rehearsal and kept as sandbox/rehearsal-report.txt (a resumed
    rehearsal's: rehearsal-report.txt in its output directory)."""
    sandbox = plan.sandbox
    lines = [f"=== rehearsal of {guide}: simulations, no NPU, no network (everything on 127.0.0.1)"]
    if plan.resumed is not None:
        lines.append(
            f"resumed: the rehearsal in {plan.resumed}, in its sandbox {sandbox.base} as that one left it "
            f"(installed packages, model, clone); its record is left as it is, this one's is in {sandbox.root}"
        )
    lines += _parts(plan)
    if plan.shared is None:
        lines.append("isolation: private network namespace (loopback only) and mount namespace")
    else:
        lines.append(f"isolation: none ({plan.shared}); the machine's loopback and /tmp are shared")
    lines.append("simulations:")
    lines += [f"  {s.name}: {s.how} (for {s.stands_in_for})" for s in plan.simulations]
    hub_log = plan.own_files / "hub.log"
    logged = f", log {hub_log}" if hub_log.exists() else ""  # only a path that is there is named
    requests = f"{hub.requests} request{'' if hub.requests == 1 else 's'}"
    lines.append(f"  fake Hugging Face Hub: {hub.url} ({requests}{logged})")
    lines.append("invented for the guide, not read from the real packages (a real run can fail here and this cannot):")
    lines += [f"  {s.name}: {s.invented}" for s in plan.simulations if s.invented]
    lines.append("overrides:")
    lines += [f"  {o.name}={o.value}  ({o.why})" for o in plan.overrides]
    lines.append(f"  --workdir {sandbox.workdir}  (the SpecForge clone and every block's cwd)")
    lines.append(f"  ports kept at the guide's defaults on 127.0.0.1: {', '.join(map(str, GUIDE_PORTS))}")
    if plan.shared is None:
        lines.append(
            f"  {', '.join(plan.scratch)}: bind mounts of {sandbox.base / 'guide-tmp'}/ (empty on the machine)"
        )
    else:
        lines.append(f"  not redirected: the guide's own {', '.join(plan.scratch)}")
    calls = _calls(sandbox, plan.calls_from)
    counts = Counter(str(call["tool"]) for call in calls if "tool" in call)
    listed = ", ".join(f"{tool} x{n}" for tool, n in sorted(counts.items())) or "none"
    recorded = f" ({sandbox.calls})" if sandbox.calls.exists() else ""
    since = f" (from byte {plan.calls_from}: the earlier rehearsal's come before)" if plan.calls_from else ""
    lines.append(f"calls recorded by the simulations: {listed}{recorded}{since}")
    blocks = _recorded_blocks(sandbox)
    lines += _parts_per_block(blocks, calls)
    lines += plan.notes
    for pid, name in leftovers.items():
        lines.append(f"[ERROR] rehearsal: simulated process {pid} ({name}) outlived the run; killed")
    lines += _did_not_pass(blocks)
    verdict = "PASSED" if exit_status == 0 else "FAILED"
    lines.append(f"=== rehearsal: {verdict} (ci.run exit {exit_status})")
    return "\n".join(lines)


_BLOCK_TAG = re.compile(r"(\d+)(-diagnostic-\d+)?$")
_NAMED = 10  # failing blocks named again at the end: ci.run's recap above names up to 50, results.json all


def _recorded_blocks(sandbox: Sandbox) -> list[dict[str, Any]]:
    """The blocks of ci.run's results.json; none when there is no record (ci.run could not start) or not ours."""
    try:
        blocks = json.loads((sandbox.root / "results.json").read_text(encoding="utf-8"))["blocks"]
    except (OSError, ValueError, KeyError, TypeError):
        return []
    return blocks if isinstance(blocks, list) else []


def _did_not_pass(blocks: list[dict[str, Any]]) -> list[str]:
    """ci.run's recap again, from its results.json, so that the rehearsal's last lines too name what failed."""
    try:
        failing = [block for block in blocks if block["status"] in _FAILING]
        lines = [f"blocks that did not pass ({len(failing)}; ci.run's log above shows why):"] if failing else []
        for block in failing[:_NAMED]:
            lines.append(
                did_not_pass_line(
                    status=block["status"],
                    name=block["id"] or block["store"] or f"#{block['ordinal']}",
                    where=f"{block['guide']}:{block['failure_line']}",
                    message=str(block["message"]),
                    reason=str(block["reason"]) if block.get("reason") else None,  # since version 4 of the record
                )
            )
    except (KeyError, TypeError):  # a record that is not ours
        return []
    if len(failing) > _NAMED:
        lines.append(f"  ... and {len(failing) - _NAMED} more (results.json lists them all)")
    return lines


def _parts(plan: Rehearsal) -> list[str]:
    """Which of the parts that can run real here did (--real), and why each other one is a stand-in."""
    parts = plan.parts
    if parts.mode == "simulated":
        return ["parts (--simulated): uv and Mooncake are stand-ins (--real runs the real ones where they can be had)"]
    lines = ["parts (--real):"]
    for part in (parts.uv, parts.mooncake):
        lines.append(f"  {part.name}: {'real, ' if part.real else ''}{part.how}")
    return lines


def _parts_per_block(blocks: list[dict[str, Any]], calls: list[dict[str, Any]]) -> list[str]:
    """Per block, the parts it reached (as they recorded themselves, CALLS), real or simulated."""
    try:
        names = {str(block["ordinal"]): block["id"] or block["store"] or f"#{block['ordinal']}" for block in blocks}
    except (KeyError, TypeError):
        return []
    used: dict[str, dict[str, bool]] = {}
    for call in calls:
        # the harness's marker: [GUIDE_DIR-]ORDINAL, and ORDINAL-diagnostic-N for the guide's ci.diagnostics
        found = _BLOCK_TAG.search(str(call.get("block") or ""))
        tag = found.group(1) if found else ""
        if tag in names:
            tool = str(call.get("tool", "?")).removeprefix("import ")
            tool += " (ci.diagnostics)" if found and found.group(2) else ""
            used.setdefault(tag, {})[tool] = used.get(tag, {}).get(tool, False) or bool(call.get("real"))
    lines = ["parts per block (as each part recorded itself; bash, git, curl and the coreutils are the machine's):"]
    for tag, name in names.items():
        if tag in used:
            real = ", ".join(sorted(tool for tool, is_real in used[tag].items() if is_real)) or "-"
            simulated = ", ".join(sorted(tool for tool, is_real in used[tag].items() if not is_real)) or "-"
            lines.append(f"  {name}: real: {real}; simulated: {simulated}")
    return lines if len(lines) > 1 else []


def _calls(sandbox: Sandbox, start: int) -> list[dict[str, Any]]:
    """The calls the simulations and real parts recorded in calls.jsonl from byte START (a line that is not a record
    is passed over)."""
    calls = []
    with contextlib.suppress(OSError):
        for line in sandbox.calls.read_bytes()[start:].decode("utf-8", "replace").splitlines():
            with contextlib.suppress(ValueError):
                call = json.loads(line)
                if isinstance(call, dict):
                    calls.append(call)
    return calls
