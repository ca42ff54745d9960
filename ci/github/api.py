"""The one client for GitHub's API and the other JSON services (PyPI, the Hub): one way to make a request (headers,
one timeout setting, rate limits, errors that name the service and say what went wrong), and what the runner service
asks of it: registration tokens (with a fine-grained token or as an App)."""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
import time
from collections.abc import Iterator
from datetime import datetime, timezone
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import urljoin, urlsplit, urlunsplit

from ci.base import frozen

if TYPE_CHECKING:
    import requests

__all__ = [
    "DEFAULT_TIMEOUT_S",
    "RETRY_WAIT_LIMIT_S",
    "TIMEOUT_ENV",
    "AppCredentials",
    "Credentials",
    "RegistrationError",
    "RunnerScope",
    "TokenCredentials",
    "WebError",
    "app_jwt",
    "download",
    "get_json",
    "get_json_pages",
    "github_api_url",
    "github_headers",
    "retry_after_s",
    "runner_token",
    "timeout_s",
    "waited_for_rate_limit",
]

TIMEOUT_ENV = "GUIDE_GUARD_HTTP_TIMEOUT"
DEFAULT_TIMEOUT_S = 15.0
RETRY_WAIT_LIMIT_S = 10.0  # a rate limit lifting this soon is waited for once; a longer one is reported
USER_AGENT = "guide-guard"


class WebError(Exception):
    """A request that gave no usable answer; the message is meant for the job log as it is."""

    def __init__(self, message: str, *, status: int | None = None, said: str | None = None) -> None:
        super().__init__(message)
        self.status = status  # HTTP status when the service answered, else None
        self.said = said  # an error answer's own message ("" when it has none); None when it was no error answer

    @property
    def not_found(self) -> bool:
        return self.status == 404


def github_api_url() -> str:
    """The GitHub API: $GITHUB_API_URL (Actions sets it, GitHub Enterprise included), else the public one."""
    return (os.environ.get("GITHUB_API_URL") or "https://api.github.com").rstrip("/")


def github_headers(token: str | None = None) -> dict[str, str]:
    """Headers for GitHub's REST API, with TOKEN, else $GITHUB_TOKEN (else $GH_TOKEN, as gh names it), as a bearer
    token."""
    headers = {"Accept": "application/vnd.github+json", "X-GitHub-Api-Version": "2022-11-28"}
    token = token or os.environ.get("GITHUB_TOKEN") or os.environ.get("GH_TOKEN")
    if token:
        headers["Authorization"] = f"Bearer {token}"
    return headers


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


def _request(
    url: str,
    *,
    service: str,
    method: str = "GET",
    headers: dict[str, str] | None = None,
    follow_redirects: bool = True,
    stream: bool = False,
    shown_url: str | None = None,
) -> requests.Response:
    """Ask once (twice after a short rate limit); WebError on a timeout, a refused connection or an error status.

    `shown_url` is how messages name the address (a signed URL's query is a credential for a minute).
    """
    import requests  # only the commands that ask web services pay for it

    shown = shown_url or url
    wait_s = timeout_s()
    for attempt in (1, 2):
        try:
            response = requests.request(
                method,
                url,
                headers={"User-Agent": USER_AGENT, **(headers or {})},
                timeout=wait_s,
                allow_redirects=follow_redirects,
                stream=stream,
            )
        except requests.Timeout:
            raise WebError(
                f"{service} did not answer within {wait_s:g} s ({shown}); set {TIMEOUT_ENV} to wait longer"
            ) from None
        except requests.RequestException as exc:
            raise WebError(f"cannot reach {service} ({shown}): {_cause(exc)}") from None
        status = response.status_code
        if status not in (403, 429):
            break
        if attempt == 1 and waited_for_rate_limit(response.headers):
            response.close()
            continue
        limited = _limit_message(service, status, response.headers)
        if limited:
            response.close()
            raise WebError(limited + (" (asked twice)" if attempt == 2 else ""), status=status)
        break
    if status >= 400:
        detail = _server_message(response)
        response.close()
        message = f"{service} answered {status} for {shown}" + (f": {detail}" if detail else "")
        raise WebError(message, status=status, said=detail)
    return response


def _json(response: requests.Response, service: str, url: str) -> Any:
    try:
        return response.json()
    except ValueError:
        raise WebError(f"malformed answer from {service} for {url}: not JSON", status=response.status_code) from None


def get_json(url: str, *, service: str, headers: dict[str, str] | None = None, method: str = "GET") -> Any:
    """A JSON answer (to a GET, unless METHOD says otherwise); WebError on a timeout, a refused connection, an error
    status or a non-JSON answer."""
    return _json(_request(url, service=service, method=method, headers=headers), service, url)


def _origin(url: str) -> tuple[str, str]:
    parts = urlsplit(url)
    return parts.scheme, parts.netloc.lower()


def get_json_pages(url: str, *, service: str, headers: dict[str, str] | None = None) -> Iterator[tuple[Any, bool]]:
    """GET a paginated JSON listing page after page: (page, whether another follows), as long as the caller asks.

    The next page is the Link header's rel="next", followed as given (GitHub
    writes it itself, for some listings under /repositories/ID/ rather than
    the path that was asked for), but only on the same scheme, host and port:
    the headers, a token among them, go nowhere else.
    """
    while True:
        response = _request(url, service=service, headers=headers)
        data = _json(response, service, url)
        next_url = response.links.get("next", {}).get("url")
        if next_url:
            next_url = urljoin(url, next_url)
            if _origin(next_url) != _origin(url):
                raise WebError(f"{service} put its next page on another host ({next_url}); it is not asked")
        yield data, bool(next_url)
        if not next_url:
            return
        url = next_url


def _redacted(url: str) -> str:
    """The URL without its query, where a signed address keeps its credentials."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(query="...", fragment="")) if parts.query else url


def download(
    url: str, destination: Path, *, service: str, headers: dict[str, str] | None = None, limit_bytes: int
) -> int:
    """GET a file that `service` may hand out through a redirect into `destination`; the number of bytes written.

    GitHub answers an artifact's archive_download_url with a redirect to a
    signed address on its storage. That redirect is followed here, not by
    requests, so that the other host gets no header but the User-Agent: the
    token stays with `service`, and a plain-http address after https is
    refused. WebError on an error answer, a lost connection, or a file larger
    than `limit_bytes` (nothing is left at `destination` then).
    """
    import requests

    response = _request(url, service=service, headers=headers, follow_redirects=False, stream=True)
    if response.is_redirect:
        location = urljoin(url, response.headers["Location"])
        response.close()
        if urlsplit(url).scheme == "https" and urlsplit(location).scheme != "https":
            raise WebError(f"{service} redirected {url} to plain http ({_redacted(location)}); not followed")
        storage = f"the storage {service} redirected to ({urlsplit(location).netloc})"
        response = _request(location, service=storage, stream=True, shown_url=_redacted(location))
        url = _redacted(location)
    written = 0
    try:
        with response:
            declared = response.headers.get("Content-Length", "")
            if declared.isdigit() and int(declared) > limit_bytes:
                raise WebError(f"{url} holds {int(declared)} bytes, more than the {limit_bytes} allowed")
            with open(destination, "wb") as handle:
                for chunk in response.iter_content(chunk_size=1 << 20):
                    written += len(chunk)
                    if written > limit_bytes:
                        raise WebError(f"{url} holds more than the {limit_bytes} bytes allowed")
                    handle.write(chunk)
    except requests.RequestException as exc:
        destination.unlink(missing_ok=True)
        raise WebError(f"the download of {url} broke off after {written} bytes: {_cause(exc)}") from None
    except BaseException:
        destination.unlink(missing_ok=True)
        raise
    return written


TokenKind = Literal["registration", "remove"]

# GitHub accepts a JWT for at most ten minutes; its clock may be behind ours, so the JWT starts a minute back.
_JWT_LIFETIME_S = 540
_JWT_BACKDATE_S = 60


@frozen
class RunnerScope:
    """Where the runner registers: an organisation (its runner groups) or one repository."""

    owner: str  # the organisation, or the repository's owner
    repository: str | None  # the repository's name; None for an organisation's runner

    @property
    def api_prefix(self) -> str:
        """The REST path of the scope: `orgs/ORG` or `repos/OWNER/NAME`."""
        return f"orgs/{self.owner}" if self.repository is None else f"repos/{self.owner}/{self.repository}"

    @property
    def described(self) -> str:
        """The scope as a person names it in messages."""
        return f"organisation {self.owner}" if self.repository is None else f"repository {self.owner}/{self.repository}"

    def runner_url(self, web_url: str) -> str:
        """The `--url` config.sh takes: the organisation's or the repository's page."""
        path = self.owner if self.repository is None else f"{self.owner}/{self.repository}"
        return f"{web_url.rstrip('/')}/{path}"


@frozen
class TokenCredentials:
    """A fine-grained personal access token, read from a file at every use (so it can be replaced in place)."""

    token_file: Path  # holds the token on its first line; readable by the runner's user only


@frozen
class AppCredentials:
    """A GitHub App installed on the organisation or repository; its private key signs a JWT at every use."""

    app_id: str  # the App's ID or client ID (the JWT's issuer)
    key_file: Path  # the App's private key (PEM), readable by the runner's user only


Credentials = TokenCredentials | AppCredentials


class RegistrationError(Exception):
    """No token: the message names the credentials, what the API said and what to fix; it holds no token."""


def runner_token(kind: TokenKind, scope: RunnerScope, credentials: Credentials, api_url: str) -> str:
    """A fresh registration (or removal) token for SCOPE's self-hosted runners; RegistrationError when none."""
    bearer = _bearer(scope, credentials, api_url)
    reply = _call("POST", f"{api_url}/{scope.api_prefix}/actions/runners/{kind}-token", bearer, credentials, scope)
    return str(_field(reply, "token", f"the {kind} token", api_url))


def app_jwt(app_id: str, key_file: Path, now_s: float | None = None) -> str:
    """A JWT (RS256) that authenticates as the App, signed with `openssl` (no Python crypto dependency)."""
    issued = int(time.time() if now_s is None else now_s) - _JWT_BACKDATE_S
    header = _base64url(json.dumps({"alg": "RS256", "typ": "JWT"}, separators=(",", ":")).encode())
    claims = {"iat": issued, "exp": issued + _JWT_LIFETIME_S, "iss": app_id}
    payload = _base64url(json.dumps(claims, separators=(",", ":")).encode())
    signing_input = f"{header}.{payload}"
    try:
        signed = subprocess.run(
            ["openssl", "dgst", "-sha256", "-sign", str(key_file)],
            input=signing_input.encode(),
            capture_output=True,
            check=False,
        )
    except FileNotFoundError as error:
        raise RegistrationError("openssl is not installed: the GitHub App's JWT is signed with it") from error
    if signed.returncode != 0 or not signed.stdout:
        # openssl's message names the file and the reason (missing, unreadable, not a private key), not the key
        reason = signed.stderr.decode(errors="replace").strip().splitlines()[:1]
        raise RegistrationError(
            f"cannot sign the GitHub App's JWT with the private key {key_file}: {' '.join(reason) or 'openssl failed'}"
            f"; give the App's private key (PEM, downloaded from the App's settings) readable by this user"
        )
    return f"{signing_input}.{_base64url(signed.stdout)}"


def _bearer(scope: RunnerScope, credentials: Credentials, api_url: str) -> str:
    """The token the registration-token request is made with."""
    match credentials:
        case TokenCredentials(token_file):
            try:
                lines = token_file.read_text(encoding="utf-8").splitlines()
            except OSError as error:
                raise RegistrationError(
                    f"cannot read the token file {token_file}: {error.strerror}; put the fine-grained token there"
                ) from error
            token = lines[0].strip() if lines else ""
            if not token:
                raise RegistrationError(f"the token file {token_file} is empty; put the fine-grained token there")
            return token
        case AppCredentials(app_id, key_file):
            jwt = app_jwt(app_id, key_file)
            installation = _call("GET", f"{api_url}/{scope.api_prefix}/installation", jwt, credentials, scope)
            installation_id = _field(installation, "id", "the App's installation", api_url)
            access = _call(
                "POST", f"{api_url}/app/installations/{installation_id}/access_tokens", jwt, credentials, scope
            )
            return str(_field(access, "token", "the installation access token", api_url))


def _call(method: str, url: str, bearer: str, credentials: Credentials, scope: RunnerScope) -> Any:
    """One API request's JSON; RegistrationError saying what went wrong and what to fix."""
    try:
        return get_json(url, service="the GitHub API", headers=github_headers(bearer), method=method)
    except WebError as error:
        raise RegistrationError(_refusal(error, method, url, credentials, scope)) from None


def _refusal(error: WebError, method: str, url: str, credentials: Credentials, scope: RunnerScope) -> str:
    """What an error status means for these credentials, and what to do about it."""
    status, said = error.status, error.said
    if said is None:  # no answer, a rate limit, an answer that is not JSON: the client's message says it
        return str(error)
    heard = f"the GitHub API answered {method} {url} with {status}" + (f" ({said})" if said else "")
    permission = (
        "'Self-hosted runners: read and write' on the organisation"
        if scope.repository is None
        else "'Administration: read and write' on the repository"
    )
    match credentials:
        case TokenCredentials(token_file):
            who = f"the fine-grained token in {token_file}"
        case AppCredentials(app_id, key_file):
            who = f"the GitHub App {app_id} (private key {key_file})"
    if status == 401:
        return f"{heard}: {who} is not accepted (wrong, expired or revoked); replace it"
    if status == 403:
        return f"{heard}: {who} may not manage the runners of the {scope.described}; it needs {permission}"
    if status == 404:
        if isinstance(credentials, AppCredentials) and url.endswith("/installation"):
            return f"{heard}: the GitHub App {credentials.app_id} is not installed on the {scope.described}; install it"
        return f"{heard}: no {scope.described}, or {who} cannot see it; check the name and that it needs {permission}"
    return heard


def _field(reply: Any, name: str, what: str, api_url: str) -> Any:
    """REPLY[NAME], or RegistrationError when the API's answer lacks it."""
    value = reply.get(name) if isinstance(reply, dict) else None
    if value in (None, ""):
        raise RegistrationError(f"the GitHub API ({api_url}) gave no {what}: its answer has no {name!r}")
    return value


def _base64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()
