"""How a block's body reaches its interpreter: as `bash -c BODY` runs it, or from a file when no argument can hold it.

Linux gives a program no single argument longer than 128 KiB (MAX_ARG_STRLEN),
and no arguments and environment longer than a quarter of the stack limit in
all: `bash -c BODY` with a larger body fails with "Argument list too long"
before bash starts. Such a body is written to a file beside the block's
outputs and read from there, as close to `-c` as each interpreter allows:
bash runs the file (`bash FILE`: `$0` and its error messages name the file,
the line numbers are the body's); python reads it as its program from stdin
(`python -`: `sys.path[0]` is the working directory, as with `-c`; the program
is read whole before it runs, so the block's own stdin is empty, as always).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ci.core.model import Language
from ci.core.text import human_size

__all__ = [
    "ARGUMENT_LIMIT_BYTES",
    "Launch",
    "body_path",
    "environment_too_large",
    "launches",
    "too_long_for_an_argument",
]

ARGUMENT_LIMIT_BYTES = 128 * 1024  # MAX_ARG_STRLEN, with the terminating NUL: the longest argument of a program


@dataclass(frozen=True)
class Launch:
    """One way to start a block: its command line, and where its stdin comes from."""

    argv: tuple[str, ...]
    stdin_path: Path | None = None  # None: empty (/dev/null); else the body, which the interpreter reads whole first


def too_long_for_an_argument(command: str) -> bool:
    """Whether COMMAND, as the bytes a command line would carry, is too long for one argument."""
    return len(os.fsencode(command)) + 1 > ARGUMENT_LIMIT_BYTES


def body_path(stem: str, language: Language) -> Path:
    """The file beside a block's outputs that holds its body when it runs from a file."""
    return Path(f"{stem}.body.{'sh' if language is Language.SHELL else 'py'}")


def launches(language: Language, command: str, from_file: Path | None = None) -> list[Launch]:
    """The ways to start the block, in order; the block's own PATH decides which program they are.

    FROM_FILE: the file COMMAND was written to, when it is to be read from there.
    """
    if language is Language.SHELL:
        return [Launch(("bash", str(from_file)) if from_file else ("bash", "-c", command))]
    # the container's interpreter, as a reader typing `python` would get it
    if from_file:
        return [Launch((python, "-"), from_file) for python in ("python", "python3")]
    return [Launch((python, "-c", command)) for python in ("python", "python3")]


def environment_too_large(env: Mapping[str, str]) -> str:
    """Why Linux refused to start a block whose body was not on its command line (E2BIG): its environment."""
    sizes = {name: len(os.fsencode(name)) + len(os.fsencode(value)) + 2 for name, value in env.items()}
    largest = max(sizes, key=sizes.__getitem__, default="")
    return (
        f"Linux refused to start it (Argument list too long): its environment holds {human_size(sum(sizes.values()))}"
        f" ({largest} alone {human_size(sizes.get(largest, 0))}), more than a program may be started with (one"
        f" variable at most {human_size(ARGUMENT_LIMIT_BYTES)}, all of them at most a quarter of the stack limit,"
        " `ulimit -s`): make the large variables smaller (the guide's ci.env, or the environment the run inherits)"
    )
