"""The run's masking policy is known where text leaves the program, not handed through every stage."""

from __future__ import annotations

import threading

from ci.base.masking import NO_SECRETS, Masker, installed, masked, policy


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
