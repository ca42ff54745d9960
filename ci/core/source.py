"""Reading guides: local files and http(s) URLs, as UTF-8 text."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ci.core.model import DocumentError, Problem

__all__ = ["GuideSource", "read_guide"]

_URL_TIMEOUT_S = 30


@dataclass(frozen=True)
class GuideSource:
    """A guide's text and where it came from."""

    name: str  # as the user wrote it
    text: str
    local_path: str | None  # None for a URL


def _decode(raw: bytes, name: str) -> str:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise DocumentError(
            [Problem(name, line, f"the guide is not valid UTF-8 (byte {exc.start}); save it as UTF-8")]
        ) from None
    return text.removeprefix("\ufeff")


def read_guide(name: str) -> GuideSource:
    """Read a guide from a path or an http(s) URL; DocumentError when it cannot be read."""
    if name.startswith(("http://", "https://")):
        # The one import left inside a function below the command line, on purpose: requests takes
        # longer to import (160 ms and more, measured on 2 cores) than a whole `--list` of a local
        # guide, and only a guide named by URL needs it.
        import requests

        try:
            response = requests.get(name, timeout=_URL_TIMEOUT_S)
            response.raise_for_status()
        except requests.RequestException as exc:
            raise DocumentError([Problem(name, 0, f"cannot fetch the guide: {exc}")]) from None
        return GuideSource(name, _decode(response.content, name), None)
    path = Path(name)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise DocumentError([Problem(name, 0, f"cannot read the guide: {exc.strerror or exc}")]) from None
    return GuideSource(name, _decode(raw, name), str(path))
