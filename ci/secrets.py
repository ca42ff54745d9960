"""The secrets a guide's blocks get: their names checked, and the named ones picked out of a job's secrets.

A workflow that calls guide-run.yml with `secrets: inherit` hands it every secret of the caller. Only those a
guide names (its registry entry's `secrets`, the action's `secrets` input) may reach its blocks: this command,
`guide-guard-secrets NAME... --from-env VAR`, runs in a step of its own before the guide's, takes the JSON of the
job's secrets (`${{ toJSON(secrets) }}`) from the variable VAR, and writes only the named ones to $GITHUB_ENV,
for the later steps of the job. The JSON never reaches the step that runs the blocks, nor any report; the
harness (`ci.run --secret NAME`) masks each named secret and says which is missing.
"""

from __future__ import annotations

import json
import os
import sys
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path

from ci.cli import ExitCode, command_parser, fail, guarded_command
from ci.core.secrets import pick_secrets, secret_name_problem, split_names

__all__ = ["main"]


def _env_file_text(found: Mapping[str, str]) -> str:
    """FOUND as $GITHUB_ENV lines: NAME<<DELIMITER, the value, DELIMITER, with a delimiter no value holds."""
    delimiter = f"guide_guard_{uuid.uuid4().hex}"
    assert not any(delimiter in value for value in found.values())
    return "".join(f"{name}<<{delimiter}\n{value}\n{delimiter}\n" for name, value in found.items())


def _read_secrets(variable: str) -> dict[str, object] | str:
    """The JSON object in VARIABLE, or what is wrong with it (never quoting the value: it holds secrets)."""
    text = os.environ.get(variable)
    if text is None:
        return f"--from-env {variable}: the variable is not set; give it `${{{{ toJSON(secrets) }}}}`"
    try:
        secrets = json.loads(text)
    except json.JSONDecodeError as exc:
        return f"--from-env {variable}: not JSON ({exc.msg} at line {exc.lineno}, column {exc.colno}); give it `${{{{ toJSON(secrets) }}}}`"
    if not isinstance(secrets, dict):
        return (
            f"--from-env {variable}: not a JSON object of secret names and values; give it `${{{{ toJSON(secrets) }}}}`"
        )
    return secrets


@guarded_command()
def main(argv: Sequence[str] | None = None) -> int:
    parser = command_parser(
        "ci.secrets",
        description=(
            "Hand the named secrets of a GitHub Actions job to its later steps ($GITHUB_ENV), and no other:"
            " the step that runs a guide's blocks gets those alone."
        ),
        epilog="Exit status: 0 done (a missing secret is said, and the harness's --secret warns of it); 2 usage error.",
    )
    parser.add_argument("names", nargs="*", metavar="NAME", help="a secret the blocks get (blanks or commas separate)")
    parser.add_argument(
        "--from-env",
        required=True,
        metavar="VAR",
        help="the variable holding the job's secrets as a JSON object: `${{ toJSON(secrets) }}`",
    )
    parser.add_argument("--env-file", type=Path, metavar="FILE", help="where the secrets go (default: $GITHUB_ENV)")
    args = parser.parse_args(argv)
    names = [name for given in args.names for name in split_names(given)]
    problem = next(filter(None, map(secret_name_problem, names)), None)
    if problem:  # the names come from the action's `secrets` input, which a registry entry's `secrets` fills
        return fail(
            f"the secrets named (the action's `secrets` input, a registry entry's `secrets`): {problem}", parser
        )
    env_file = args.env_file or (Path(os.environ["GITHUB_ENV"]) if os.environ.get("GITHUB_ENV") else None)
    if env_file is None:
        return fail("$GITHUB_ENV is not set: name the file for the later steps' variables with --env-file", parser)
    secrets = _read_secrets(args.from_env)
    if isinstance(secrets, str):
        return fail(secrets, parser)
    picked = pick_secrets(secrets, names)
    try:
        with open(env_file, "a", encoding="utf-8") as handle:
            handle.write(_env_file_text(picked.found))
    except OSError as exc:
        return fail(f"cannot write {env_file}: {exc.strerror or exc}")
    print(f"secrets for the blocks: {', '.join(picked.found) or 'none'}")
    for name in picked.missing:
        print(f"not among the job's secrets, or empty: {name} (the guide's run says more)")
    return ExitCode.OK


if __name__ == "__main__":
    sys.exit(main())
