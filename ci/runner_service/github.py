"""Registration tokens from GitHub's REST API, with a fine-grained token or a GitHub App's installation token.

Only the token endpoints are used: a registration token lasts an hour, so one is asked for just before
each `config.sh`. No token is ever put in a message: an error says which credentials and what to fix.
"""

from __future__ import annotations

import base64
import json
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import requests

from ci.maintain.web import timeout_s

__all__ = [
    "AppCredentials",
    "Credentials",
    "RegistrationError",
    "RunnerScope",
    "TokenCredentials",
    "app_jwt",
    "runner_token",
]

TokenKind = Literal["registration", "remove"]

# GitHub accepts a JWT for at most ten minutes; its clock may be behind ours, so the JWT starts a minute back.
_JWT_LIFETIME_S = 540
_JWT_BACKDATE_S = 60


@dataclass(frozen=True)
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


@dataclass(frozen=True)
class TokenCredentials:
    """A fine-grained personal access token, read from a file at every use (so it can be replaced in place)."""

    token_file: Path  # holds the token on its first line; readable by the runner's user only


@dataclass(frozen=True)
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
    headers = {
        "Accept": "application/vnd.github+json",
        "X-GitHub-Api-Version": "2022-11-28",
        "User-Agent": "guide-guard",
        "Authorization": f"Bearer {bearer}",
    }
    try:
        response = requests.request(method, url, headers=headers, timeout=timeout_s())
    except requests.RequestException as error:
        # the exception's text names the host and the reason; the headers, and so the token, are not in it
        raise RegistrationError(f"cannot reach the GitHub API ({method} {url}): {type(error).__name__}") from error
    if response.status_code in (200, 201):
        try:
            return response.json()
        except ValueError as error:
            raise RegistrationError(f"the GitHub API answered {method} {url} with no JSON") from error
    raise RegistrationError(_refusal(response, method, url, credentials, scope))


def _refusal(response: requests.Response, method: str, url: str, credentials: Credentials, scope: RunnerScope) -> str:
    """What an error status means for these credentials, and what to do about it."""
    try:
        said = str(response.json().get("message", ""))
    except (ValueError, AttributeError):
        said = ""
    status = response.status_code
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
