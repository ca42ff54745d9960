"""Secrets a guide's blocks get by name: which names may be given, the named ones picked out of a job's secrets
(`guide-guard-secrets`), and `ci.run --secret NAME` (masked in every report, a missing one said)."""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from ci.base import frozen
from ci.cli import ExitCode, command_parser, fail, guarded_command, print_error

__all__ = [
    "STEERING_FAMILIES",
    "Picked",
    "SteeringFamily",
    "add_secret_options",
    "main",
    "missing_secret_message",
    "missing_secrets",
    "pick_secrets",
    "secret_name_problem",
    "split_names",
    "take_secret_names",
]

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_SEPARATORS = re.compile(r"[\s,]+")


@frozen
class SteeringFamily:
    """Variables that change how a program runs rather than hand it a value, refused as secret names."""

    steers: str  # what they change, as a refusal says it
    names: frozenset[str] = frozenset()  # the names themselves, in upper case
    prefixes: tuple[str, ...] = ()  # every name starting so, in upper case

    def rule(self, upper: str) -> str | None:
        """The rule of the family that UPPER (a name in upper case) falls under: `PATH` or `NODE_*`; else None."""
        prefix = next((prefix for prefix in self.prefixes if upper.startswith(prefix)), None)
        return f"{prefix}*" if prefix is not None else (upper if upper in self.names else None)


# Names no secret may have (compared in upper case: GitHub's secret names are): a secret goes to $GITHUB_ENV, so
# it would be set for every later step of the job, the harness's own, the artifact upload's and the action's
# JavaScript included. Whole families go by their prefix, so that a setting added to a runtime or a library
# later is refused too (NODE_* holds NODE_OPTIONS, NODE_TLS_REJECT_UNAUTHORIZED and NODE_EXTRA_CA_CERTS).
STEERING_FAMILIES = (
    SteeringFamily(
        "what a shell runs first, where programs are found, who and where the process is",
        frozenset({"PATH", "HOME", "SHELL", "ENV", "BASH_ENV", "CDPATH", "IFS", "PS4", "SHELLOPTS", "BASHOPTS"})
        | frozenset({"GLOBIGNORE", "PROMPT_COMMAND", "TMPDIR", "PWD", "USER", "LOGNAME"}),
        ("BASH_FUNC_", "XDG_"),
    ),
    SteeringFamily(
        "what the dynamic loader and the C library load, how they behave, which locale and time zone they use",
        frozenset({"GCONV_PATH", "LOCPATH", "NLSPATH", "LANG", "LANGUAGE", "TZ"}),
        ("LD_", "DYLD_", "GLIBC_", "MALLOC_", "LC_"),
    ),
    SteeringFamily(
        "what code a runtime loads and with which options, in the action's own JavaScript steps too",
        frozenset({"JAVA_TOOL_OPTIONS", "_JAVA_OPTIONS", "JDK_JAVA_OPTIONS", "VIRTUAL_ENV"}),
        ("NODE_", "NPM_CONFIG_", "PYTHON", "PERL", "RUBY", "GEM_"),
    ),
    SteeringFamily("which index an installer uses and how git reaches a remote", prefixes=("PIP_", "UV_", "GIT_")),
    SteeringFamily(
        "which certificates TLS trusts, how it is configured, where its keys are logged",
        frozenset({"REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE"}),
        ("SSL", "OPENSSL_", "GNUTLS_"),
    ),
    SteeringFamily(
        "whom the network is reached through and how names resolve",
        frozenset({"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY", "FTP_PROXY"})
        | frozenset({"HOSTALIASES", "RES_OPTIONS", "LOCALDOMAIN"}),
    ),
    SteeringFamily(
        "the runner, GitHub and the harness themselves", prefixes=("GITHUB_", "RUNNER_", "ACTIONS_", "GUIDE_GUARD_")
    ),
)


def secret_name_problem(name: str) -> str | None:
    """What is wrong with NAME as the name of a secret the blocks get as a variable; None when nothing is.

    Besides a name no variable or no GitHub secret can have, a name of one of STEERING_FAMILIES (in any case) is
    refused: the secret would override that variable for every later step.
    """
    if not _NAME.match(name):
        return f"secret {name!r} is not a variable name: letters, digits and underscores, not starting with a digit"
    upper = name.upper()
    if upper.startswith("GITHUB_"):
        return f"secret {name!r}: GitHub reserves GITHUB_ names (no secret can have one); name the secret otherwise"
    for family in STEERING_FAMILIES:
        rule = family.rule(upper)
        if rule is not None:
            return (
                f"secret {name!r} would set {name} for every later step of the job, and no secret may be named"
                f" {rule} ({family.steers}: docs/ci.md lists the rules); store the secret under a name of its own,"
                f" e.g. GUIDE_{name}, name that, and set {name} from it in the block that needs it"
                f' (`export {name}="$GUIDE_{name}"`)'
            )
    return None


def split_names(text: str) -> list[str]:
    """The names in TEXT, separated by blanks, commas or line breaks (an action input, a matrix value)."""
    return [name for name in _SEPARATORS.split(text) if name]


def missing_secret_message(name: str) -> str:
    """What is said of a named secret the blocks would run without."""
    return (
        f"secret {name} is named for the guide's blocks but is not set or is empty: add it in the repository's"
        " settings (Secrets and variables > Actions) and pass it to the workflow (`secrets: inherit`),"
        " or stop naming it (the registry entry's `secrets`, the action's `secrets` input)"
    )


@frozen
class Picked:
    """The named secrets found among a job's secrets, and those that were not."""

    found: dict[str, str]  # name as given -> its value (non-empty), in the order the names were given
    missing: tuple[str, ...]  # names that are not among the secrets, or whose value is empty


def pick_secrets(secrets: Mapping[str, object], names: Sequence[str]) -> Picked:
    """NAMES out of SECRETS (name -> value). GitHub's secret names are case-insensitive: a name matches a key that
    differs in case only when no key matches it exactly."""
    folded = {key.upper(): key for key in secrets}
    found: dict[str, str] = {}
    missing: list[str] = []
    for name in dict.fromkeys(names):
        key = name if name in secrets else folded.get(name.upper(), name)
        value = secrets.get(key)
        if isinstance(value, str) and value:
            found[name] = value
        else:
            missing.append(name)
    return Picked(found, tuple(missing))


def _env_file_text(found: Mapping[str, str]) -> str:
    """FOUND as $GITHUB_ENV lines: NAME<<DELIMITER, the value, DELIMITER, with a delimiter no value holds."""
    delimiter = f"guide_guard_{os.urandom(16).hex()}"  # as random as a uuid4
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
        "ci.github.secrets",
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


def add_secret_options(parser: argparse.ArgumentParser) -> None:
    """--secret NAME (repeatable, or names separated by commas)."""
    parser.add_argument(
        "--secret",
        action="append",
        default=[],
        metavar="NAME",
        help=(
            "the blocks need the secret variable NAME: it is masked in every report as --mask-env masks, and"
            " an unset or empty one is a warning (an error under --strict); repeatable, or names separated by commas"
        ),
    )


def take_secret_names(args: argparse.Namespace) -> str | None:
    """--secret: the names checked, split at commas, and masked as --mask-env names are; what is wrong, if anything."""

    args.secret = [name for given in args.secret for name in split_names(given)]
    problem = next(filter(None, map(secret_name_problem, args.secret)), None)
    if problem:
        return f"--secret: {problem}"
    args.mask_env = [*args.mask_env, *args.secret]
    return None


def missing_secrets(names: Sequence[str], strict: bool, github: bool) -> bool:
    """Say each secret of --secret that the environment lacks or leaves empty: a warning, or under --strict an
    error; whether the run stops for them (--strict)."""
    from ci.report.github import annotation, command_safe

    missing = [name for name in dict.fromkeys(names) if not os.environ.get(name)]
    for name in missing:
        message = missing_secret_message(name)
        if strict:
            print_error(message)
        else:
            print(command_safe(f"warning: {message}", github), file=sys.stderr)
        if github:
            print(annotation("error" if strict else "warning", None, 0, "secret missing", message), file=sys.stderr)
    if missing and strict:
        print_error("--strict: a missing secret is an error; nothing was run")
    return bool(missing) and strict


if __name__ == "__main__":
    sys.exit(main())
