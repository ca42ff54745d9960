"""Reading guides: local files and http(s) URLs, as UTF-8 text."""

from __future__ import annotations

import contextlib
import re
import threading
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from ci.base import frozen
from ci.base.text import human_size
from ci.guide.model import DocumentError, Problem

__all__ = [
    "GUIDE_LIMIT_BYTES",
    "URL_LIMIT_BYTES",
    "URL_TIME_LIMIT_S",
    "GuideSource",
    "fetch_url",
    "read_guide",
    "read_local_guide",
    "redact_url",
    "redact_urls",
]

GUIDE_LIMIT_BYTES = 16 * 1024 * 1024  # a guide, local or read from a URL, is refused past this size
URL_LIMIT_BYTES = GUIDE_LIMIT_BYTES
URL_TIME_LIMIT_S = 60.0  # and when its whole answer takes longer than this
_URL_READ_TIMEOUT_S = 30  # each connect and each read, within the whole limit
_URL_CHUNK_BYTES = 64 * 1024


@frozen
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


class _Fetch(threading.Thread):
    """One URL read in a thread of its own, so that the whole fetch can be given up at its time limit.

    requests' timeout applies to each connect and each read: a server that
    sends a byte now and then (or a slow name lookup) is never timed out by it.
    """

    def __init__(self, url: str, limit_bytes: int) -> None:
        super().__init__(name="guide-fetch", daemon=True)  # given up at the time limit, it must not hold the exit
        self.url = url
        self.limit_bytes = limit_bytes
        self.body: bytes | None = None  # once read whole
        self.error = ""  # why there is no body, once the fetch ended
        self.response: Any = None  # requests' response while its body is read: what giving up closes
        self.done = threading.Event()

    def run(self) -> None:
        import requests  # see read_guide

        try:
            with requests.get(self.url, timeout=_URL_READ_TIMEOUT_S, stream=True) as response:
                self.response = response
                response.raise_for_status()
                chunks, size = [], 0
                for chunk in response.iter_content(_URL_CHUNK_BYTES):
                    size += len(chunk)
                    if size > self.limit_bytes:
                        self.error = (
                            f"it is larger than {human_size(self.limit_bytes)}, the limit for a guide read from"
                            " a URL; download it and pass its path"
                        )
                        return
                    chunks.append(chunk)
                self.body = b"".join(chunks)
        except requests.RequestException as exc:
            self.error = str(exc)
        except Exception as exc:  # anything else that breaks the fetch (a bad URL, a decoding error) is its error
            self.error = f"{type(exc).__name__}: {exc}"
        finally:
            self.done.set()

    def give_up(self) -> None:
        """Stop reading: close the connection (urllib3's shutdown wakes a read blocked on it)."""
        response = self.response
        if response is not None:
            # an older urllib3 has no shutdown, and the fetch may have ended meanwhile: either way, it is a daemon
            with contextlib.suppress(Exception):
                response.raw.shutdown()


def fetch_url(url: str, *, limit_bytes: int = URL_LIMIT_BYTES, time_limit_s: float = URL_TIME_LIMIT_S) -> bytes:
    """The body at URL, read whole within TIME_LIMIT_S and at most LIMIT_BYTES; DocumentError saying why not.

    The error names the URL and quotes nothing of it with its credentials (`redact_url`).
    """
    shown = redact_url(url)
    from ci.base.signals import start_deaf

    fetch = _Fetch(url, limit_bytes)
    start_deaf(fetch)  # Ctrl-C goes to the waiting main thread, which says it at once
    if not fetch.done.wait(time_limit_s):
        fetch.give_up()
        message = f"no whole answer within {time_limit_s:g} s, the limit for a guide read from a URL"
    elif fetch.body is None:
        message = _redact_message(fetch.error, url)
    else:
        return fetch.body
    raise DocumentError([Problem(shown, 0, f"cannot fetch the guide: {message}")])


def read_guide(name: str) -> GuideSource:
    """Read a guide from a path or an http(s) URL; DocumentError when it cannot be read.

    A URL's credentials (user, password, query values) appear in no name or
    message this returns or raises: the reports show `GuideSource.name`.
    """
    if name.startswith(("http://", "https://")):
        # requests is imported inside the fetch, on purpose: it takes longer to import (160 ms and
        # more, measured on 2 cores) than a whole `--list` of a local guide, and only a URL needs it.
        shown = redact_url(name)  # a token in the URL must not reach the log or results.json
        return GuideSource(shown, _decode(fetch_url(name), shown), None)
    path = Path(name)
    return GuideSource(name, _decode(read_local_guide(path, name), name), str(path))


def read_local_guide(path: Path, name: str) -> bytes:
    """The bytes of the local guide at PATH (NAME as the user wrote it), at most GUIDE_LIMIT_BYTES of them.

    DocumentError when it cannot be read or is larger: a path to /dev/zero or
    to a huge log is said at once, not read until memory runs out.
    """
    try:
        with open(path, "rb") as handle:
            raw = handle.read(GUIDE_LIMIT_BYTES + 1)
    except OSError as exc:
        raise DocumentError([Problem(name, 0, f"cannot read the guide: {exc.strerror or exc}")]) from None
    if len(raw) > GUIDE_LIMIT_BYTES:
        message = (
            f"cannot read the guide: it is larger than {human_size(GUIDE_LIMIT_BYTES)}, the limit for a guide;"
            " a guide is a Markdown file: check that this is the one meant"
        )
        raise DocumentError([Problem(name, 0, message)])
    return raw
