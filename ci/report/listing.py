"""What `--list` says of each block beyond the plan: whether the selection runs it, and its command as it will run."""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ci.core.model import Plan, Step
from ci.core.preview import PreviewedCommand, previewed_commands
from ci.core.text import Masker, clean_text, plural, secret_values

__all__ = ["COMMAND_INDENT", "PlanListing", "listing_masker"]

COMMAND_INDENT = " " * 6  # before each line of a command under its block's line, past the ordinal's column


def listing_masker(
    env: Mapping[str, str], plans: Sequence[Plan], preset: Mapping[str, str], mask_env: Sequence[str]
) -> Masker:
    """What a listing masks: the values a run would mask (ENV's and the guides' `ci.env` secrets, the variables
    named by --mask-env), and the `--set` values whose names are secret or named by --mask-env."""
    env_seen = dict(env)
    for plan in plans:
        env_seen.update(plan.settings.env)
    return Masker.of([*secret_values(env_seen, mask_env), *secret_values(preset, mask_env)])


@dataclass(frozen=True)
class PlanListing:
    """The selection and, with --commands, the commands as they will run, of each plan a listing shows."""

    left_out: tuple[Mapping[int, str], ...]  # per plan, in order: the ordinals the selection leaves out, with why
    selection: str  # the selection options as given (`--only a --from b`); "" when none was given
    commands: tuple[Mapping[int, PreviewedCommand], ...] | None  # per plan, by ordinal (--commands); else None
    masker: Masker  # what the listing masks in the commands (listing_masker)

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
        masker = listing_masker(env, plans, preset, args.mask_env)
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
