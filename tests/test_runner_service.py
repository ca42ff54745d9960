"""guide-guard-runner-service: a real service process against a stand-in GitHub API and stand-in runner scripts.

The API is tests/web_stub.py on loopback, standing in for api.github.com; config.sh and run.sh are the
stand-ins of tests/fixtures/actions-runner (they behave as the real ones do, and record what they got).
"""

from __future__ import annotations

import base64
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import pytest
from conftest import base_env
from outside import unavailable
from waiting import wait_for
from web_stub import Reply, WebStub, running_stub

from ci.github.runner_service import backoff_s, build_parser, main

STAND_INS = Path(__file__).resolve().parent / "fixtures" / "actions-runner"
PAT = "github_pat_stand_in_0123456789"
REGISTRATION = "/repos/owner/repo/actions/runners/registration-token"


@pytest.fixture
def runner(tmp_path: Path) -> Path:
    """An actions-runner directory holding the stand-in scripts."""
    directory = tmp_path / "actions-runner"
    shutil.copytree(STAND_INS, directory)
    return directory


@pytest.fixture
def token_file(tmp_path: Path) -> Path:
    path = tmp_path / "pat"
    path.write_text(PAT + "\n", encoding="utf-8")
    path.chmod(0o600)
    return path


@pytest.fixture
def stub() -> Iterator[WebStub]:
    with running_stub() as stub:
        yield stub


def service(runner: Path, stub: WebStub, *options: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "ci.github.runner_service",
        "--runner-dir",
        str(runner),
        "--api-url",
        stub.url,
        "--github-url",
        "https://github.example",
        "--name",
        "ascend-01",
        *options,
    ]


def run_service(runner: Path, stub: WebStub, *options: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        service(runner, stub, *options), env=base_env(), capture_output=True, text=True, timeout=60, check=False
    )


@contextmanager
def started(command: list[str], tmp_path: Path, runner: Path) -> Iterator[tuple[subprocess.Popen[bytes], Path, Path]]:
    """The service as a process of its own, its stdout and stderr going to files; killed, with its stand-in job,
    if the test ends while they still run."""
    stdout, stderr = tmp_path / "stdout", tmp_path / "stderr"
    with stdout.open("wb") as out, stderr.open("wb") as err:
        process = subprocess.Popen(command, env=base_env(), stdout=out, stderr=err)
    try:
        yield process, stdout, stderr
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        job = runner / "job.started"
        if job.exists() and job.read_text().strip():
            with suppress(ProcessLookupError):
                os.kill(int(job.read_text()), signal.SIGKILL)


def lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines() if path.exists() else []


def test_registers_runs_a_job_and_registers_again_with_a_fresh_token(
    runner: Path, stub: WebStub, token_file: Path
) -> None:
    stub.routes[REGISTRATION] = Reply(201, {"token": "REG-ONE"}, then=Reply(201, {"token": "REG-TWO"}))
    done = run_service(
        runner, stub, "--repo", "owner/repo", "--token-file", str(token_file), "--labels", "a2,npu", "--jobs", "2"
    )
    assert done.returncode == 0, done.stderr
    assert "2 job(s) done" in done.stdout
    # each registration with a token of its own, given in the environment, never on the command line
    assert lines(runner / "config.tokens") == ["REG-ONE", "REG-TWO"]
    expected = (
        f"--unattended --ephemeral --replace --url https://github.example/owner/repo --name ascend-01 "
        f"--work {runner / '_work'} --labels a2,npu"
    )
    assert lines(runner / "config.calls") == [expected, expected]
    assert lines(runner / "run.calls") == ["session", "session"]
    assert stub.paths() == [REGISTRATION, REGISTRATION]
    assert stub.methods == ["POST", "POST"]
    assert all(headers["Authorization"] == f"Bearer {PAT}" for _, headers in stub.requests)
    for secret in (PAT, "REG-ONE", "REG-TWO"):
        assert secret not in done.stdout + done.stderr
    # the job's files (a read-only directory among them) are gone; the work directory stays
    assert list((runner / "_work").iterdir()) == []


def test_a_refused_token_is_said_and_retried_after_a_growing_wait(
    runner: Path, stub: WebStub, token_file: Path
) -> None:
    # a registration a stopped service left behind is removed first, with a removal token
    (runner / ".runner").write_text("{}", encoding="utf-8")
    stub.set("/orgs/owner/actions/runners/remove-token", {"token": "REMOVE"}, 201)
    stub.routes["/orgs/owner/actions/runners/registration-token"] = Reply(
        401,
        {"message": "Bad credentials"},
        then=Reply(401, {"message": "Bad credentials"}, then=Reply(201, {"token": "REG"})),
    )
    done = run_service(
        runner,
        stub,
        "--org",
        "owner",
        "--runner-group",
        "ascend-npu",
        "--token-file",
        str(token_file),
        "--backoff-s",
        "0.01",
        "--jobs",
        "1",
    )
    assert done.returncode == 0, done.stderr
    assert (
        f"[ERROR] no registration token: the GitHub API answered POST {stub.url}/orgs/owner/actions/runners/"
        f"registration-token with 401 (Bad credentials): the fine-grained token in {token_file} is not accepted "
        "(wrong, expired or revoked); replace it"
    ) in done.stderr
    assert "retrying in 0.01 s (failure 1 in a row)" in done.stderr
    assert "retrying in 0.02 s (failure 2 in a row)" in done.stderr
    calls = lines(runner / "config.calls")
    assert calls[0] == "remove"
    assert calls[1].startswith("--unattended --ephemeral --replace --url https://github.example/owner --name ascend-01")
    assert calls[1].endswith("--runnergroup ascend-npu")
    assert lines(runner / "config.tokens") == ["REMOVE", "REG"]
    assert PAT not in done.stdout + done.stderr


def test_sigterm_ends_the_job_and_stops_the_service(
    runner: Path, stub: WebStub, token_file: Path, tmp_path: Path
) -> None:
    stub.set(REGISTRATION, {"token": "REG"}, 201)
    (runner / "job.blocks").touch()
    with started(service(runner, stub, "--repo", "owner/repo", "--token-file", str(token_file)), tmp_path, runner) as (
        process,
        stdout,
        stderr,
    ):
        wait_for(lambda: (runner / "job.started").exists(), "the stand-in job to start")
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=60) == 0, stderr.read_text()
    # the runner got SIGINT (its own way to end a session) and ended; no new registration followed
    assert lines(runner / "run.calls") == ["session", "interrupted"]
    assert lines(stdout)[-1] == "runner service: stopped by SIGTERM"
    assert len(lines(runner / "config.calls")) == 1


def test_a_github_app_gets_an_installation_token_with_a_signed_jwt(runner: Path, stub: WebStub, tmp_path: Path) -> None:
    key = tmp_path / "app.pem"
    subprocess.run(
        ["openssl", "genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", str(key)],
        check=True,
        capture_output=True,
    )
    stub.set("/repos/owner/repo/installation", {"id": 42})
    stub.set("/app/installations/42/access_tokens", {"token": "ghs_installation"}, 201)
    stub.responder = lambda path, headers: (
        Reply(201, {"token": "REG"}) if headers.get("Authorization") == "Bearer ghs_installation" else Reply(401)
    )
    done = run_service(
        runner, stub, "--repo", "owner/repo", "--app-id", "Iv1.stand-in", "--app-key", str(key), "--jobs", "1"
    )
    assert done.returncode == 0, done.stderr
    assert lines(runner / "config.tokens") == ["REG"]
    assert stub.paths() == ["/repos/owner/repo/installation", "/app/installations/42/access_tokens", REGISTRATION]
    assert stub.methods == ["GET", "POST", "POST"]
    jwt = stub.requests[0][1]["Authorization"].removeprefix("Bearer ")
    header, claims, signature = jwt.split(".")
    assert json.loads(_unbase64url(header)) == {"alg": "RS256", "typ": "JWT"}
    payload = json.loads(_unbase64url(claims))
    assert payload["iss"] == "Iv1.stand-in"
    assert 0 < payload["exp"] - payload["iat"] <= 600  # GitHub's limit
    # the signature is the App key's: openssl checks it with the public half
    public = tmp_path / "app.pub"
    subprocess.run(["openssl", "pkey", "-in", str(key), "-pubout", "-out", str(public)], check=True)
    (tmp_path / "signature").write_bytes(_unbase64url(signature))
    verified = subprocess.run(
        ["openssl", "dgst", "-sha256", "-verify", str(public), "-signature", str(tmp_path / "signature")],
        input=f"{header}.{claims}".encode(),
        capture_output=True,
        check=False,
    )
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert "ghs_installation" not in done.stdout + done.stderr


def test_sigterm_during_the_wait_after_a_failure_stops_at_once(runner: Path, stub: WebStub, tmp_path: Path) -> None:
    key = tmp_path / "missing.pem"
    command = service(
        runner, stub, "--repo", "owner/repo", "--app-id", "7", "--app-key", str(key), "--backoff-s", "600"
    )
    with started(command, tmp_path, runner) as (process, stdout, stderr):
        wait_for(lambda: "retrying in 600 s" in stderr.read_text(), "the service to wait after its failure")
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=60) == 0
    assert lines(stdout)[-1] == "runner service: stopped by SIGTERM"
    said = stderr.read_text()
    assert f"[ERROR] no registration token: cannot sign the GitHub App's JWT with the private key {key}:" in said
    assert "give the App's private key (PEM, downloaded from the App's settings) readable by this user" in said
    assert stub.requests == []
    assert not (runner / "config.calls").exists()


@pytest.mark.parametrize(
    ("status", "said"),
    [
        (403, "may not manage the runners of the repository owner/repo; it needs 'Administration: read and write'"),
        (404, "no repository owner/repo, or the fine-grained token in"),
    ],
)
def test_what_a_refusal_means_is_said(runner: Path, stub: WebStub, token_file: Path, status: int, said: str) -> None:
    stub.routes[REGISTRATION] = Reply(status, {"message": "refused"}, then=Reply(201, {"token": "REG"}))
    done = run_service(
        runner, stub, "--repo", "owner/repo", "--token-file", str(token_file), "--backoff-s", "0.01", "--jobs", "1"
    )
    assert done.returncode == 0, done.stderr
    assert said in done.stderr


def test_the_systemd_unit_runs_the_same_service(runner: Path, stub: WebStub, token_file: Path) -> None:
    done = run_service(
        runner, stub, "--org", "owner", "--token-file", str(token_file), "--labels", "a2", "--systemd-unit"
    )
    assert done.returncode == 0, done.stderr
    unit = done.stdout
    exec_start = next(line for line in unit.splitlines() if line.startswith("ExecStart="))
    assert exec_start.startswith(
        f"ExecStart={sys.executable} -I -m ci.github.runner_service --org owner --token-file {token_file}"
    )
    assert f"--runner-dir {runner} --name ascend-01" in exec_start
    for line in (f"WorkingDirectory={runner}", "Restart=always", "KillMode=mixed", "WantedBy=multi-user.target"):
        assert line in unit.splitlines()
    assert stub.requests == []  # it only prints


def systemd_reads(unit: str, tmp_path: Path) -> dict[str, str]:
    """What systemd makes of UNIT: `systemd-analyze verify` loads it as the service manager does (its quoting,
    its escapes, its specifiers; the executable must exist) and, at the debug log level, prints the loaded unit.

    Returns its Description, WorkingDirectory and ExecStart's `Command Line` (the arguments, each as systemd
    writes one for people: bare, or in double quotes with a backslash before `"`, `\\`, `` ` `` and `$`).
    """
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        unavailable("systemd-analyze is not installed", "Install systemd (GitHub's Ubuntu runners have it).")
    path = tmp_path / "guide-guard-runner.service"
    path.write_text(unit, encoding="utf-8")
    environment = {**base_env(), "SYSTEMD_LOG_LEVEL": "debug", "SYSTEMD_LOG_COLOR": "0"}
    done = subprocess.run(
        [analyze, "verify", str(path)], env=environment, capture_output=True, text=True, timeout=60, check=False
    )
    problems = [line for line in done.stderr.splitlines() if line.startswith((f"{path}:", f"{path.name}: Command"))]
    assert done.returncode == 0, f"systemd-analyze verify refused the unit: {problems}"
    dump = dict(re.findall(r"^\t+(Description|WorkingDirectory|Command Line): (.*)$", done.stdout, re.MULTILINE))
    assert len(dump) == 3, done.stdout
    return dump


def executed(command_line: str) -> list[str]:
    """The arguments a process started from COMMAND_LINE (as `systemd_reads` returns it) gets.

    In double quotes, systemd writes a control character as its C escape (`\\n`) and puts a backslash before `"`,
    `\\`, `` ` `` and `$`. It expands its environment in the arguments when it starts the process
    (systemd.service(5), "Command lines": `$NAME` and `${NAME}` are replaced, `$$` is a dollar sign): a lone `$`
    here would be expanded.
    """
    arguments: list[str] = []
    for quoted, bare in re.findall(r' ?(?:"((?:[^"\\]|\\.)*)"|([^\s"\\]+))', command_line):
        word = bare or re.sub(r"\\(.)", lambda escape: _unescaped(escape[1], command_line), quoted)
        assert re.fullmatch(r"(?:[^$]|\$\$)*", word), f"systemd would expand a variable in {word!r}"
        arguments.append(word.replace("$$", "$"))
    return arguments


def _unescaped(character: str, command_line: str) -> str:
    controls = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v"}
    assert character in controls or character in '"\\`$', f"an escape this reader does not know in {command_line!r}"
    return controls.get(character, character)


# a directory, a runner's name and labels a shell or systemd would read otherwise than as written
ODD_NAME = "npu-%H \"x\" 'y' $USER\\n"
ODD_LABELS = "a2,$ARCH,${HOME},100%"
ODD_DIRECTORY = "runner 100% $HOME \\ \"q\" 's' %%"


def test_systemd_reads_the_unit_as_written(runner: Path, stub: WebStub, tmp_path: Path) -> None:
    odd = tmp_path / ODD_DIRECTORY
    shutil.copytree(runner, odd)
    token = odd / "pat $x"
    token.write_text(PAT, encoding="utf-8")
    options = ["--name", ODD_NAME, "--labels", ODD_LABELS, "--org", "owner", "--token-file", str(token)]
    done = run_service(odd, stub, *options, "--systemd-unit")
    assert done.returncode == 0, done.stderr
    unit = systemd_reads(done.stdout, tmp_path)
    arguments = executed(unit["Command Line"])
    assert arguments[:4] == [sys.executable, "-I", "-m", "ci.github.runner_service"]
    given = dict(zip(arguments[4::2], arguments[5::2], strict=False))
    assert given["--name"] == ODD_NAME
    assert given["--labels"] == ODD_LABELS
    assert given["--runner-dir"] == str(odd)
    assert given["--token-file"] == str(token)
    assert given["--work"] == str(odd / "_work")
    assert unit["Description"].startswith(f"GitHub Actions runner {ODD_NAME} ")
    assert unit["WorkingDirectory"] == str(odd)


def test_systemd_starts_the_python_the_unit_names(
    runner: Path, stub: WebStub, tmp_path: Path, token_file: Path
) -> None:
    """An interpreter whose path holds a `$`: systemd never expands the program's path, only its arguments."""
    interpreter = tmp_path / "python $HOME 100%" / "python3"
    interpreter.parent.mkdir()
    interpreter.symlink_to(sys.executable)
    # the symlink is outside the virtual environment: its packages and this checkout come from PYTHONPATH
    packages = [str(Path(__file__).resolve().parents[1]), *sys.path[1:]]
    command = [str(interpreter), *service(runner, stub, "--org", "owner", "--token-file", str(token_file))[1:]]
    done = subprocess.run(
        [*command, "--systemd-unit"],
        env={**base_env(), "PYTHONPATH": os.pathsep.join(packages)},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    arguments = executed(systemd_reads(done.stdout, tmp_path)["Command Line"])
    assert arguments[:4] == [str(interpreter), "-I", "-m", "ci.github.runner_service"]


@pytest.mark.parametrize(
    ("options", "said"),
    [
        (["--repo", "owner/repo"], "no credentials: give --token-file FILE"),
        (["--repo", "owner/repo", "--app-id", "7"], "a GitHub App needs both --app-id and --app-key"),
        (["--repo", "owner", "--token-file", "pat"], "--repo 'owner' is not OWNER/NAME"),
        (
            ["--repo", "o/r", "--token-file", "pat", "--runner-group", "g"],
            "--runner-group is for an organisation's runner",
        ),
    ],
)
def test_usage_errors(runner: Path, options: list[str], said: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--runner-dir", str(runner), *options]) == 2
    assert f"[ERROR] {said}" in capsys.readouterr().err


@pytest.mark.parametrize("work", [".", "..", "/"])
def test_a_work_directory_that_holds_the_runner_is_refused(
    runner: Path, token_file: Path, work: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Emptied after each job, it would take the runner (and here the token file beside it) with it."""
    options = ["--runner-dir", str(runner), "--repo", "owner/repo", "--token-file", str(token_file)]
    assert main([*options, "--work", work]) == 2
    assert "which emptying it after each job would delete" in capsys.readouterr().err
    assert (runner / "config.sh").is_file() and token_file.is_file()


def test_a_directory_without_the_runner_is_refused(
    tmp_path: Path, token_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--runner-dir", str(tmp_path), "--repo", "owner/repo", "--token-file", str(token_file)]) == 2
    assert f"[ERROR] {tmp_path} has no config.sh and run.sh: give --runner-dir" in capsys.readouterr().err


def _unbase64url(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


@pytest.mark.parametrize(
    ("failures", "expected_s"), [(1, 15.0), (2, 30.0), (3, 60.0), (6, 480.0), (7, 900.0), (1000, 900.0)]
)
def test_backoff_doubles_up_to_its_limit(failures: int, expected_s: float) -> None:
    assert backoff_s(failures, 15.0, 900.0) == expected_s


def test_the_documented_commands_are_accepted() -> None:
    """docs/runners.md "Registering the runner": each command of the service there is one its parser takes."""
    docs = (Path(__file__).resolve().parents[1] / "docs" / "runners.md").read_text(encoding="utf-8")
    section = docs.split("## Registering the runner\n", 1)[1].split("\n## ", 1)[0]
    commands = [
        block.replace("\\\n", " ").split("|", 1)[0]
        for block in section.split("/opt/guide-guard/bin/guide-guard-runner-service")[1:]
        if block.startswith(" ")
    ]
    assert len(commands) == 2
    for command in commands:
        args = build_parser().parse_args(shlex.split(command.split("\n", 1)[0]))
        assert (args.org, args.runner_group, args.app_id) == ("OWNER", "ascend-npu", "APP_ID")
        assert args.labels == "linux-aarch64-a2-4"


@pytest.mark.parametrize(
    ("option", "value"), [("--name", "npu\nExecStartPre=/bin/false"), ("--name", "npu\r01"), ("--runner-dir", "a\nb")]
)
def test_a_control_character_the_unit_cannot_hold_is_refused_before_it_is_printed(
    runner: Path, token_file: Path, tmp_path: Path, option: str, value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """systemd has no quoting in Description= and WorkingDirectory=: a newline would end the line, and what follows
    it would be read as a setting of its own."""
    if option == "--runner-dir":
        odd = tmp_path / value
        shutil.copytree(runner, odd)
        value = str(odd)
    options = ["--runner-dir", str(runner), "--repo", "owner/repo", "--token-file", str(token_file)]
    assert main([*options, option, value, "--systemd-unit"]) == 2
    out, err = capsys.readouterr()
    assert out == ""  # no unit, not even a part of one
    assert f"[ERROR] {option} {value!r} holds a control character" in err, err
    assert "which a systemd unit cannot hold" in err and "without control characters" in err
