"""Reading guides: local files and http(s) URLs, as UTF-8 text."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from ci.core.model import DocumentError, Problem

__all__ = ["GuideSource", "read_guide", "redact_url", "redact_urls"]

_URL_TIMEOUT_S = 30


@dataclass(frozen=True)
class GuideSource:
    """A guide's text and where it came from."""

    name: str  # as the user wrote it, but a URL without its credentials (`redact_url`): what reports show
    text: str
    local_path: str | None  # None for a URL


_URL = re.compile(r"https?://[^\s'\"<>]+")


def redact_url(url: str) -> str:
    """URL with what may be a credential replaced by ***: the user and password, and every query value.

    `https://u:p@host/g.md?token=abc&ref=main` -> `https://***@host/g.md?token=***&ref=***`.
    """
    if not url.startswith(("http://", "https://")):
        return url  # a local path: a `?` or `@` in a file name is no credential
    parts = urlsplit(url)
    netloc = parts.netloc
    if "@" in netloc:
        netloc = "***@" + netloc.rpartition("@")[2]
    query = "&".join(
        f"{field.partition('=')[0]}=***" if "=" in field else "***" for field in parts.query.split("&") if field
    )
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def redact_urls(text: str) -> str:
    """TEXT with every http(s) URL in it redacted (`redact_url`): for messages that quote one."""
    return _URL.sub(lambda found: redact_url(found.group()), text)


def _redact_message(text: str, url: str) -> str:
    """An error message about URL without its credentials, even where it quotes only a part (`url: /g.md?token=x`)."""
    text = redact_urls(text)
    parts, shown = urlsplit(url), urlsplit(redact_url(url))
    for secret, redacted in ((parts.query, shown.query), (parts.netloc, shown.netloc)):
        if secret and secret != redacted:
            text = text.replace(secret, redacted)
    return text


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
    """Read a guide from a path or an http(s) URL; DocumentError when it cannot be read.

    A URL's credentials (user, password, query values) appear in no name or
    message this returns or raises: the reports show `GuideSource.name`.
    """
    if name.startswith(("http://", "https://")):
        # The one import left inside a function below the command line, on purpose: requests takes
        # longer to import (160 ms and more, measured on 2 cores) than a whole `--list` of a local
        # guide, and only a guide named by URL needs it.
        import requests

        shown = redact_url(name)  # a token in the URL must not reach the log or results.json
        try:
            response = requests.get(name, timeout=_URL_TIMEOUT_S)
            response.raise_for_status()
        except requests.RequestException as exc:
            message = _redact_message(str(exc), name)
            raise DocumentError([Problem(shown, 0, f"cannot fetch the guide: {message}")]) from None
        return GuideSource(shown, _decode(response.content, shown), None)
    path = Path(name)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise DocumentError([Problem(name, 0, f"cannot read the guide: {exc.strerror or exc}")]) from None
    return GuideSource(name, _decode(raw, name), str(path))
