"""Secrets a guide's blocks get by name: which names may be given, and the named ones picked out of a job's secrets."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

__all__ = [
    "STEERING_NAMES",
    "STEERING_PREFIXES",
    "Picked",
    "missing_secret_message",
    "pick_secrets",
    "secret_name_problem",
    "split_names",
]

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_SEPARATORS = re.compile(r"[\s,]+")
# Names no secret may have (compared in upper case: GitHub's secret names are): a secret goes to $GITHUB_ENV, so
# it would be set for every later step of the job, the harness's own, the artifact upload's and the action's
# JavaScript included, and these variables change how a program runs rather than hand it a value: where it looks
# for programs and libraries, what a shell runs first, which certificates, proxy or index it trusts.
STEERING_NAMES = frozenset(
    {
        # the shell and the process: what runs, where, what a shell reads first
        *("PATH", "HOME", "SHELL", "ENV", "BASH_ENV", "CDPATH", "IFS", "PS4", "SHELLOPTS", "BASHOPTS"),
        *("GLOBIGNORE", "PROMPT_COMMAND", "TMPDIR", "PWD", "USER", "LOGNAME", "LANG", "LANGUAGE", "TZ"),
        # runtimes that load code named by a variable (the action's own JavaScript steps among them)
        *("NODE_OPTIONS", "NODE_PATH", "JAVA_TOOL_OPTIONS", "_JAVA_OPTIONS", "PERL5LIB", "PERL5OPT", "RUBYOPT"),
        *("RUBYLIB", "GCONV_PATH", "VIRTUAL_ENV"),
        # whom the network is trusted through
        *("SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE"),
        *("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY", "FTP_PROXY"),
    }
)
# ... and every name starting so: the dynamic loader's (LD_PRELOAD), Python's (PYTHONPATH, PYTHONSTARTUP), pip's
# and uv's settings (PIP_INDEX_URL), git's (GIT_SSH_COMMAND), bash's exported functions, the locale, the runner's
# and GitHub's own, and the harness's
STEERING_PREFIXES = (
    *("LD_", "DYLD_", "PYTHON", "PIP_", "UV_", "GIT_", "BASH_FUNC_", "LC_"),
    *("GITHUB_", "RUNNER_", "ACTIONS_", "GUIDE_GUARD_"),
)


def secret_name_problem(name: str) -> str | None:
    """What is wrong with NAME as the name of a secret the blocks get as a variable; None when nothing is.

    Besides a name no variable or no GitHub secret can have, a name in STEERING_NAMES or starting with one of
    STEERING_PREFIXES (in any case) is refused: the secret would override that variable for every later step.
    """
    if not _NAME.match(name):
        return f"secret {name!r} is not a variable name: letters, digits and underscores, not starting with a digit"
    upper = name.upper()
    if upper.startswith("GITHUB_"):
        return f"secret {name!r}: GitHub reserves GITHUB_ names (no secret can have one); name the secret otherwise"
    rule = next((f"{prefix}..." for prefix in STEERING_PREFIXES if upper.startswith(prefix)), None)
    if rule is None and upper in STEERING_NAMES:
        rule = upper
    if rule is not None:
        return (
            f"secret {name!r} would set {name} for every later step of the job, which changes how they run (no"
            f" secret may be named {rule}: see docs/ci.md); store the secret under a name of its own,"
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


@dataclass(frozen=True)
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
