"""Asking web services (GitHub, PyPI) for JSON: one timeout setting, and errors that say what went wrong."""

from __future__ import annotations

import os
import re
import time
from datetime import datetime, timezone
from email.utils import parsedate_to_datetime
from typing import Any

__all__ = [
    "DEFAULT_TIMEOUT_S",
    "RETRY_WAIT_LIMIT_S",
    "TIMEOUT_ENV",
    "WebError",
    "get_json",
    "retry_after_s",
    "timeout_s",
    "waited_for_rate_limit",
]

TIMEOUT_ENV = "GUIDE_GUARD_HTTP_TIMEOUT"
DEFAULT_TIMEOUT_S = 15.0
RETRY_WAIT_LIMIT_S = 10.0  # a rate limit lifting this soon is waited for once; a longer one is reported
USER_AGENT = "guide-guard"


class WebError(Exception):
    """A request that gave no usable answer; the message is meant for the job log as it is."""

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status  # HTTP status when the service answered, else None

    @property
    def not_found(self) -> bool:
        return self.status == 404


def timeout_s() -> float:
    """Seconds to wait for a web service: $GUIDE_GUARD_HTTP_TIMEOUT, else 15."""
    raw = os.environ.get(TIMEOUT_ENV, "")
    try:
        value = float(raw)
    except ValueError:
        return DEFAULT_TIMEOUT_S
    return value if value > 0 else DEFAULT_TIMEOUT_S


def retry_after_s(headers: Any) -> float | None:
    """Seconds a Retry-After header asks to wait (a number of seconds or an HTTP date), else None."""
    value = str(headers.get("Retry-After") or "").strip()
    if not value:
        return None
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return max((when - datetime.now(timezone.utc)).total_seconds(), 0.0)


def waited_for_rate_limit(headers: Any) -> bool:
    """Sleep through a rate limit that lifts within RETRY_WAIT_LIMIT_S; True if the caller should ask again."""
    pause_s = retry_after_s(headers)
    if pause_s is None or pause_s > RETRY_WAIT_LIMIT_S:
        return False
    time.sleep(pause_s)
    return True


def _limit_message(service: str, status: int, headers: Any) -> str | None:
    """Why a 403/429 answer means "slow down", or None when it means something else."""
    retry_after = headers.get("Retry-After")
    if retry_after:
        return f"{service} rate limit hit ({status}): retry after {retry_after} s"
    if headers.get("X-RateLimit-Remaining") == "0":
        reset = headers.get("X-RateLimit-Reset", "")
        when = ""
        if reset.isdigit():
            when = " until " + datetime.fromtimestamp(int(reset), timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
        limit = headers.get("X-RateLimit-Limit", "?")
        return f"{service} rate limit exceeded ({status}; {limit} requests per hour{when})"
    if status == 429:
        return f"{service} rate limit hit (429 Too Many Requests)"
    return None


def _server_message(response: Any) -> str:
    try:
        data = response.json()
    except ValueError:
        return str(response.text).strip()[:200]
    if isinstance(data, dict) and isinstance(data.get("message"), str):
        return str(data["message"])[:200]
    return ""


def _cause(exc: Exception) -> str:
    """The useful end of a connection error ("[Errno 111] Connection refused"), not urllib3's whole chain."""
    text = str(exc)
    found = re.search(r"\[Errno -?\d+\][^'\")]*", text)
    return found.group(0).strip() if found else text[:300]


def get_json(url: str, *, service: str, headers: dict[str, str] | None = None) -> Any:
    """GET a JSON document; WebError on a timeout, a refused connection, an error status or a non-JSON answer."""
    import requests  # only the commands that ask web services pay for it

    wait_s = timeout_s()
    for attempt in (1, 2):
        try:
            response = requests.get(url, headers={"User-Agent": USER_AGENT, **(headers or {})}, timeout=wait_s)
        except requests.Timeout:
            raise WebError(
                f"{service} did not answer within {wait_s:g} s ({url}); set {TIMEOUT_ENV} to wait longer"
            ) from None
        except requests.RequestException as exc:
            raise WebError(f"cannot reach {service} ({url}): {_cause(exc)}") from None
        status = response.status_code
        if status not in (403, 429):
            break
        if attempt == 1 and waited_for_rate_limit(response.headers):
            continue
        limited = _limit_message(service, status, response.headers)
        if limited:
            raise WebError(limited + (" (asked twice)" if attempt == 2 else ""), status=status)
        break
    if status >= 400:
        detail = _server_message(response)
        raise WebError(f"{service} answered {status} for {url}" + (f": {detail}" if detail else ""), status=status)
    try:
        return response.json()
    except ValueError:
        raise WebError(f"malformed answer from {service} for {url}: not JSON", status=status) from None
