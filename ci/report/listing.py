"""What `--list` says of each block beyond the plan: whether the selection runs it, and its command as it will run
(as far as that is known before the run starts)."""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping, Sequence
from typing import Any

from ci.base import frozen
from ci.base.text import Masker, clean_text, escape_undecodable_json, plural, secret_values
from ci.guide.model import Plan, Step
from ci.guide.placeholders import substitute
from ci.report.github import LEGACY_COMMAND, command_safe

__all__ = ["COMMAND_INDENT", "PlanListing", "PreviewedCommand", "previewed_commands", "print_plan", "secrets_masker"]

COMMAND_INDENT = " " * 6  # before each line of a command under its block's line, past the ordinal's column


def secrets_masker(
    env: Mapping[str, str], plans: Sequence[Plan], preset: Mapping[str, str], mask_env: Sequence[str]
) -> Masker:
    """What a run and a listing mask: ENV's and the guides' `ci.env` secret values, the variables named by
    --mask-env, and the `--set` values (PRESET) whose names are secret by the same rule or named by --mask-env."""
    env_seen = dict(env)
    for plan in plans:
        env_seen.update(plan.settings.env)
    return Masker.of([*secret_values(env_seen, mask_env), *secret_values(preset, mask_env)])


@frozen
class PlanListing:
    """The selection and, with --commands, the commands as they will run, of each plan a listing shows."""

    left_out: tuple[Mapping[int, str], ...]  # per plan, in order: the ordinals the selection leaves out, with why
    selection: str  # the selection options as given (`--only a --from b`); "" when none was given
    commands: tuple[Mapping[int, PreviewedCommand], ...] | None  # per plan, by ordinal (--commands); else None
    masker: Masker  # what the listing masks in the commands (secrets_masker)

    @classmethod
    def of(
        cls,
        plans: Sequence[Plan],
        left_out: Sequence[Mapping[int, str]],
        *,
        selection: str,
        preset: Mapping[str, str] | None,
        masker: Masker,
    ) -> PlanListing:
        """The listing of PLANS; PRESET (the `--set` values) given when the commands are to be shown, else None."""
        commands = None
        if preset is not None:
            commands = tuple(previewed_commands(plan, out, preset) for plan, out in zip(plans, left_out, strict=True))
        return cls(tuple(left_out), selection, commands, masker)

    @classmethod
    def of_command_line(
        cls,
        args: argparse.Namespace,
        plans: Sequence[Plan],
        left_out: Sequence[Mapping[int, str]],
        preset: Mapping[str, str],
        env: Mapping[str, str],
    ) -> PlanListing:
        """The listing ci.run's options ask for (the selection, --commands, --mask-env), in the environment ENV."""
        given = [("--only", value) for value in args.only] + [("--from", args.start), ("--until", args.until)]
        selection = " ".join(f"{flag} {value}" for flag, value in given if value)
        masker = secrets_masker(env, plans, preset, args.mask_env)
        return cls.of(plans, left_out, selection=selection, preset=preset if args.commands else None, masker=masker)

    def header(self, index: int, plan: Plan) -> str:
        """`guide.md: 5 blocks`, and with a selection `guide.md: 5 blocks, 2 selected by --from check`."""
        count = plural(len(plan.steps), "block")
        if not self.selection:
            return f"{plan.guide}: {count}"
        return f"{plan.guide}: {count}, {len(plan.steps) - len(self.left_out[index])} selected by {self.selection}"

    def note(self, index: int, step: Step) -> str:
        """What ends a left-out block's line: ` (not run: before --from check)`; "" for a block that runs."""
        reason = self.left_out[index].get(step.ordinal)
        return "" if reason is None else f" (not run: {reason})"

    def command_lines(self, index: int, step: Step) -> list[str]:
        """With --commands, the lines under the block's line: its command as it will run, then a `# ` line for
        each placeholder whose value only the run will know. Cleaned and masked as every report is."""
        if self.commands is None:
            return []
        command = self.commands[index][step.ordinal]
        lines = [f"{COMMAND_INDENT}{line}".rstrip() for line in clean_text(command.text, self.masker).split("\n")]
        return lines + [f"{COMMAND_INDENT}# {clean_text(note, self.masker)}" for note in command.pending]

    def json_keys(self, index: int, step: Step) -> dict[str, Any]:
        """The keys a JSON entry adds: `selected`, `not_run` (why, when left out); with --commands, `command`
        (masked) and `command_pending` (the notes on the placeholders only the run fills)."""
        reason = self.left_out[index].get(step.ordinal)
        keys: dict[str, Any] = {"selected": reason is None}
        if reason is not None:
            keys["not_run"] = reason
        if self.commands is not None:
            command = self.commands[index][step.ordinal]
            keys["command"] = self.masker.mask(command.text)
            keys["command_pending"] = [self.masker.mask(note) for note in command.pending]
        return keys


def print_plan(plans: Sequence[Plan], listing: PlanListing, *, as_json: bool, github: bool) -> None:
    """What `--list` prints: the plan as text, a line per block, or (AS_JSON) as JSON, one entry per block."""
    if as_json:
        _print_json(plans, github, listing)
    else:
        _print_text(plans, github, listing)


def _plan_entries(plans: Sequence[Plan], listing: PlanListing) -> list[dict[str, Any]]:
    entries = []
    for index, plan in enumerate(plans):
        for step in plan.steps:
            entry: dict[str, Any] = {"guide": plan.guide, **step.identity(), **listing.json_keys(index, step)}
            entry.update(retry=step.retry, retry_delay_s=step.retry_delay_s)
            if step.skip_reason is not None:
                entry["skip"] = step.skip_reason
            if step.rerun_on_resume:
                entry["rerun_on_resume"] = True
            if step.expected is not None:
                entry["expected"] = step.expected.body
                entry["fuzzy"] = list(step.expected.fuzzy)
                entry["expected_line"] = step.expected.line
                entry["expected_loads"] = [[load.name, load.placeholder] for load in step.expected.loads]
                if step.expected.search:  # the plain-fence dialect: found anywhere in the output, not matched whole
                    entry["expected_search"] = True
            if step.merge_streams:
                entry["merge_streams"] = True
            entries.append(entry)
    return entries


def _print_text(plans: Sequence[Plan], github: bool, listing: PlanListing) -> None:
    """The plan, a line per block; under Actions issuing no workflow command an id, a store or a reason quotes."""
    lines = []
    for index, plan in enumerate(plans):
        lines.append(listing.header(index, plan))
        for step in plan.steps:
            name = " ".join(step.named_by)
            # after the time limit, one space between each setting: `timeout=60s load=a>>A hidden skip='why'`
            settings = [f"timeout={step.timeout_s:g}s"]
            settings += [f"load={load.name}>>{load.placeholder}" for load in step.loads]
            settings += ["hidden"] if step.hidden else []
            settings += [f"skip={step.skip_reason!r}"] if step.skip_reason is not None else []
            settings += [f"retry={step.retry} retry_delay={step.retry_delay_s:g}s"] if step.retry else []
            settings += ["rerun_on_resume"] if step.rerun_on_resume else []
            lines.append(
                f"{step.ordinal:>4}  {step.label.value:<12} {name or '-':<30} {step.language_word:<7} "
                f"{step.file}:{step.line}  {' '.join(settings)}" + listing.note(index, step)
            )
            lines.extend(listing.command_lines(index, step))
    print(command_safe("\n".join(lines), github))


def _print_json(plans: Sequence[Plan], github: bool, listing: PlanListing) -> None:
    """The plan as JSON; under Actions with `##[` written `#\\u0023[`: the same JSON, and no workflow command.

    Stop-commands lines would make it something else than JSON; the other
    form of a command, `::` at a line's start, cannot occur in it.
    """
    text = escape_undecodable_json(json.dumps(_plan_entries(plans, listing), indent=2, ensure_ascii=False))
    print(text.replace(LEGACY_COMMAND, "#\\u0023[") if github else text)


@frozen
class PreviewedCommand:
    """One block's command: its body with the values a run will load into it that are known beforehand."""

    text: str  # the body with each `<PH>` whose value `--set` gives substituted; any other `<PH>` left as written
    # one note per `<PH>` left as written, saying where its value comes from:
    # `<DIR>: stored by #test-setup store=where at line 3 at run time`
    pending: tuple[str, ...]


def previewed_commands(
    plan: Plan, left_out: Mapping[int, str], preset: Mapping[str, str]
) -> dict[int, PreviewedCommand]:
    """Each step's command by ordinal, its loads substituted as the run would substitute them when it is known now.

    A value a setup stores is known only at run time, when that setup runs: a setup the selection leaves out
    (LEFT_OUT) or that is skipped stores nothing, and a `--set` value (PRESET) holds until a setup that runs
    stores the same name.
    """
    stored_by: dict[str, Step] = {}  # name -> the last setup so far that will store it at run time
    commands = {}
    for step in plan.steps:
        known, pending = [], []
        for load in step.loads:
            setup = stored_by.get(load.name)
            if setup is not None:
                pending.append(f"<{load.placeholder}>: stored by {_named(setup)} at line {setup.line} at run time")
            elif load.name in preset:
                known.append((load.placeholder, preset[load.name]))
            else:
                pending.append(f"<{load.placeholder}>: no value: no block that runs before it stores {load.name}")
        commands[step.ordinal] = PreviewedCommand(substitute(step.body, tuple(known)), tuple(dict.fromkeys(pending)))
        if step.store is not None and step.ordinal not in left_out and step.skip_reason is None:
            stored_by[step.store] = step
    return commands


def _named(step: Step) -> str:
    """`#test-setup store=where`, else `#test-setup #3`."""
    return f"{step.label.value} {(step.named_by or (f'#{step.ordinal}',))[0]}"
