"""The run's masking policy is known where text leaves the program, not handed through every stage."""

from __future__ import annotations

import ast
import threading
from pathlib import Path

from ci.base.masking import NO_SECRETS, Masker, installed, masked, policy

CI = Path(__file__).resolve().parents[1] / "ci"

# What names the policy: the masker type and value, and the functions that install it and ask for it.
POLICY_NAMES = {"Masker", "NO_SECRETS", "policy", "masked", "installed"}
MASKING_MODULES = {"ci.base.masking", "ci.base.text"}  # where they are imported from
MOST_MODULES_KNOWING = 12


def _knows_the_policy(path: Path) -> bool:
    """Whether the module imports a name of the policy, handles a `masker`, or is the policy's own module."""
    if path == CI / "base" / "masking.py":
        return True
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module in MASKING_MODULES:
            if any(alias.name in POLICY_NAMES for alias in node.names):
                return True
        elif isinstance(node, ast.ImportFrom) and node.module == "ci.base":
            if any(alias.name in ("masking", "text") for alias in node.names):  # then masking.policy(), say
                return True
        elif (
            (isinstance(node, ast.Import) and any(alias.name in MASKING_MODULES for alias in node.names))
            or (isinstance(node, ast.Name) and node.id == "masker")
            or (isinstance(node, ast.Attribute) and node.attr in {"masker", *POLICY_NAMES})
            or (isinstance(node, ast.arg) and node.arg == "masker")
        ):
            return True
    return False


def test_at_most_twelve_modules_know_the_masking_policy() -> None:
    """The commands install the policy, the writers that mask more than `clean_text` does ask for it (results.json's
    paths, kept files, the live console, [ERROR] lines), and a module that cuts text before it is shown keeps
    knowing it; the rest of the stages do not. (`clean_text` masks by the policy: a writer calling it alone is not
    counted.)"""
    knowing = sorted(
        str(path.relative_to(CI.parent))
        for path in CI.rglob("*.py")
        if "rehearsal" not in path.relative_to(CI).parts and _knows_the_policy(path)
    )
    assert len(knowing) <= MOST_MODULES_KNOWING, f"{len(knowing)} modules know the masking policy: {knowing}"


def test_a_policy_is_installed_for_a_scope_and_seen_by_threads() -> None:
    masker = Masker.of(["s3cr3t-value"])
    assert policy() is NO_SECRETS
    seen: list[str] = []
    with installed(masker):
        assert masked("token s3cr3t-value") == "token ***"
        thread = threading.Thread(target=lambda: seen.append(masked("s3cr3t-value")))
        thread.start()
        thread.join()
        with installed(NO_SECRETS):
            assert masked("s3cr3t-value") == "s3cr3t-value"
        assert policy() is masker
    assert seen == ["***"]
    assert policy() is NO_SECRETS
    assert masked("s3cr3t-value") == "s3cr3t-value"
