"""The lessons of real nights (ci/maintain/drift/lessons.py): the warnings the drift check and the pre-commit hook
give on a shell block that repeats a mistake a real night paid for, each rule with the incident it comes from."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from conftest import Repo

from ci.guide.parse import parse_guide
from ci.maintain.drift import Severity, static_findings

ROOT = Path(__file__).resolve().parents[1]
FENCE = "```"


def test_our_own_guides_pass_the_pre_commit_hook_without_a_warning() -> None:
    """The lessons of real nights hold in the guides we ship: a finding there is fixed, not carried."""
    guides = [
        "docs/specforge.md",
        *sorted(str(path.relative_to(ROOT)) for path in (ROOT / "docs/examples").glob("*.md")),
    ]
    done = subprocess.run(
        [sys.executable, "-m", "ci.precommit", *guides], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{len(guides)} guides checked, nothing run: 0 errors, 0 warnings" in done.stdout + done.stderr


def _lessons(label: str, body: str) -> list[tuple[int, str]]:
    """The lessons' warnings on a guide of one block (with its expected output when it is a #test):
    (the line inside the block, the message)."""
    guide = f"{FENCE}shell {label}\n{body}\n{FENCE}\n"
    if label.startswith("#test id="):
        guide += f'\n{FENCE}text #test-result id="{label.split("=")[1]}"\nok\n{FENCE}\n'
    findings = static_findings(parse_guide(guide, "guide.md"), shellcheck=None)
    return [(f.line - 1, f.message) for f in findings if f.severity is Severity.WARNING]


NETWORK = "has no time or stall bound"


@pytest.mark.parametrize(
    ("body", "line"),
    [
        ("git clone --depth 1 https://example.org/repo.git", 1),
        ("cd x\ngit -C x fetch --depth 1 origin v1", 2),
        ("curl -fsSL -o model.bin https://example.org/model.bin", 1),
        ("sudo -E git clone https://example.org/repo.git", 1),
        ("git submodule update --init --recursive", 1),
        # bounded by the tool's own default read timeout: pip 15 s, uv 30 s, the Hub's client 10 s, wget 900 s
        ('uv pip install --python "$(command -v python)" numpy', None),
        ("python -m pip install -r requirements.txt", None),
        ("pip install --default-timeout=60 numpy", None),
        ("wget https://example.org/model.bin", None),
        ("sudo -E hf download Qwen/Qwen3-0.6B", None),
        ("python - <<'PY'\nfrom huggingface_hub import snapshot_download\nprint(snapshot_download('a/b'))\nPY", None),
        # bounded, local, offline or not the network at all
        ("timeout 600 git clone https://example.org/repo.git", None),
        ("git -c http.lowSpeedLimit=1000 -c http.lowSpeedTime=60 clone https://example.org/repo.git", None),
        ("export GIT_HTTP_LOW_SPEED_LIMIT=1000 GIT_HTTP_LOW_SPEED_TIME=60\ngit clone https://example.org/r.git", None),
        ("git clone ../local-copy copy && git -C copy checkout v1", None),
        ("pip install --timeout 30 numpy", None),
        ("pip install --no-index --find-links wheels numpy", None),
        ("UV_HTTP_TIMEOUT=30 uv pip install numpy", None),
        ("curl --max-time 600 -o model.bin https://example.org/model.bin", None),
        ('curl -fsS "http://127.0.0.1:$PORT/health"', None),
        # an address the block sets in a variable is read there
        ('URL=https://example.org/model.bin\ncurl -fsSL -o model.bin "$URL"', 2),
        ('HEALTH=http://127.0.0.1:8000/health\ncurl -fs "${HEALTH}"', None),
        ("wget --timeout=30 https://example.org/model.bin", None),
        ("echo 'git clone https://example.org/repo.git' # pip install numpy", None),
        # git bounds a stall only with both http.lowSpeedLimit and http.lowSpeedTime, and reads only exported variables
        ("git -c http.lowSpeedTime=60 clone https://example.org/repo.git", 1),
        ("export GIT_HTTP_LOW_SPEED_TIME=60\ngit clone https://example.org/repo.git", 2),
        ("GIT_HTTP_LOW_SPEED_LIMIT=1000 GIT_HTTP_LOW_SPEED_TIME=60\ngit clone https://example.org/repo.git", 2),
        ("git clone https://example.org/repo.git\nexport GIT_HTTP_LOW_SPEED_LIMIT=1000 GIT_HTTP_LOW_SPEED_TIME=60", 1),
        ("GIT_HTTP_LOW_SPEED_LIMIT=1000 GIT_HTTP_LOW_SPEED_TIME=60 git clone https://example.org/repo.git", None),
        (
            "git config http.lowSpeedLimit 1000\ngit config http.lowSpeedTime 60\ngit clone https://example.org/r.git",
            None,
        ),
        # curl's --speed-limit alone stops a transfer slower than it for 30 s
        ("curl --speed-limit 1024 -o model.bin https://example.org/model.bin", None),
        ("curl -fsSL -Y 1024 -o model.bin https://example.org/model.bin", None),
        ("curl -fsSLm 600 -o model.bin https://example.org/model.bin", None),  # -m among the short options
    ],
)
def test_a_network_command_without_a_bound_is_a_warning(body: str, line: int | None) -> None:
    """Actions run 33254357756: a download stalled until the 90-minute limit; a git clone hung at TLS."""
    found = [(at, message) for at, message in _lessons("#test-setup", body) if NETWORK in message]
    if line is None:
        assert found == []
    else:
        assert [at for at, _ in found] == [line], found
        assert "run it as `timeout SECONDS" in found[0][1] and "33254357756" in found[0][1]


def _guide_lessons(guide: str, needle: str) -> list[tuple[int, str]]:
    """The lessons' warnings on GUIDE whose message holds NEEDLE: (the guide line, the message)."""
    findings = static_findings(parse_guide(guide, "guide.md"), shellcheck=None)
    return [(f.line, f.message) for f in findings if f.severity is Severity.WARNING and needle in f.message]


def test_a_bound_the_guide_gives_every_block_bounds_its_network_commands() -> None:
    """git's stall bound set in the front matter's ci.env, or by `git config --global` in an earlier block, holds
    for every later block: no warning there."""
    clone = f"{FENCE}shell #test-setup\ngit clone https://example.org/repo.git\n{FENCE}\n"
    both = "---\nci:\n  env:\n    GIT_HTTP_LOW_SPEED_LIMIT: '1000'\n    GIT_HTTP_LOW_SPEED_TIME: '60'\n---\n"
    assert _guide_lessons(both + clone, NETWORK) == []
    time_only = "---\nci:\n  env:\n    GIT_HTTP_LOW_SPEED_TIME: '60'\n    PIP_DEFAULT_TIMEOUT: '60'\n---\n"
    assert [line for line, _ in _guide_lessons(time_only + clone, NETWORK)] == [8]
    configure = "git config --global http.lowSpeedLimit 1000\ngit config --global http.lowSpeedTime 60"
    guide = f"{clone}\n{FENCE}shell #test-setup\n{configure}\n{FENCE}\n\n{clone}"
    # the clone before the configuration is warned about, the one after it is not
    assert [line for line, _ in _guide_lessons(guide, NETWORK)] == [2]
    # `git config` without --global sets the configuration of the repository it runs in only
    in_repository = guide.replace("--global ", "")
    assert [line for line, _ in _guide_lessons(in_repository, NETWORK)] == [2, 11]


@pytest.mark.parametrize(
    ("body", "warned"),
    [
        ("source /usr/local/Ascend/ascend-toolkit/set_env.sh\nnpu-smi info", True),
        ('. "$ASCEND_HOME_PATH/../set_env.sh"', True),
        ("echo 'source /usr/local/Ascend/ascend-toolkit/set_env.sh'", False),  # a word, not a command
        ("source venv/bin/activate", False),
    ],
)
def test_sourcing_the_cann_set_env_script_is_a_warning(body: str, warned: bool) -> None:
    """Actions run 33464343161: set_env.sh skips itself in a non-interactive shell, so ASCEND_HOME stayed empty."""
    found = [(at, m) for at, m in _lessons("#test-setup", body) if "non-interactive shell" in m]
    assert [at for at, _ in found] == ([1] if warned else [])
    assert all("ascend_toolkit_install.info" in message for _, message in found)


@pytest.mark.parametrize(
    ("body", "line"),
    [
        ('echo "downloading the model"\npython -c "print(\'/models/a\')"', 1),  # two lines stored
        ("pip install --timeout 30 modelscope\npython -c \"print('/models/a')\"", 1),  # pip writes to stdout
        ("pushd /tmp\npwd", 1),
        ("apt-get install -q -y libnuma1\necho /usr/lib", 1),  # one -q drops the progress, not the report
        ("apt-get install -qq -y libnuma1\necho /usr/lib", None),
        ('echo "downloading" >&2\npython -c "print(\'/models/a\')"', None),
        ("pip install --timeout 30 modelscope >/dev/null\npython -c \"print('/models/a')\"", None),
        ("pip install -q --timeout 30 modelscope\npython -c \"print('/models/a')\"", None),
        ("UV_HTTP_TIMEOUT=30 uv pip install modelscope\npython -c \"print('/models/a')\"", None),  # stderr
        ("if [ -d /models/a ]; then echo /models/a; else echo /models/b; fi", None),  # one branch runs
        ('test -d /m || { echo "no /m" >&2; exit 1; }\nls /m | head -1\necho done >&2', None),
        # commands that print nothing on stdout when they work, before the one that prints the value
        ("timeout 600 git clone -q https://example.org/y.git /tmp/y\necho /tmp/y", None),
        ("conda activate myenv\nsed -i 's/a/b/' /tmp/conf.txt\npython -c \"print('ok')\"", None),
    ],
)
def test_a_store_block_printing_more_than_its_value_is_a_warning(body: str, line: int | None) -> None:
    """Actions run 33507844975: the model path was stored together with the download client's progress line."""
    found = [(at, m) for at, m in _lessons('#test-setup store="model_path"', body) if "33507844975" in m]
    assert [at for at, _ in found] == ([] if line is None else [line]), found
    assert all("`>&2`" in message for _, message in found)
    # the same commands in a block that stores nothing are fine
    assert not [m for _, m in _lessons("#test-setup", body) if "33507844975" in m]


SERVER = "nohup python -m http.server 8000 >server.log 2>&1 &\nPID=$!\n"


@pytest.mark.parametrize(
    ("body", "line"),
    [
        (SERVER + "for _ in $(seq 60); do\n  curl -fs http://127.0.0.1:8000/ && exit 0\n  sleep 1\ndone\nexit 1", 3),
        (SERVER + "until curl -fs http://127.0.0.1:8000/; do sleep 1; done", 3),
        (
            SERVER + 'for _ in $(seq 60); do\n  curl -fs http://127.0.0.1:8000/ && exit 0\n  kill -0 "$PID" || exit 1\n'
            "  sleep 1\ndone",
            None,
        ),
        (SERVER + 'while kill -0 "$PID"; do curl -fs http://127.0.0.1:8000/ && exit 0; sleep 1; done', None),
        (
            SERVER
            + 'alive() { kill -0 "$PID" 2>/dev/null; }\nuntil curl -fs http://127.0.0.1:8000/; do alive || exit 1;'
            " sleep 1; done",
            None,
        ),
        ("for _ in $(seq 60); do test -f ready && exit 0; sleep 1; done", None),  # nothing started in the background
        (SERVER + 'until curl -fs http://127.0.0.1:8000/; do [ -d /proc/"$PID" ] || exit 1; sleep 1; done', None),
        (SERVER + 'until curl -fs http://127.0.0.1:8000/; do\n  # kill -0 "$PID" || exit 1\n  sleep 1\ndone', 3),
        # the wait the timeout bounds, in a string bash runs
        (SERVER + "timeout 300 bash -c 'until curl -fs http://127.0.0.1:8000/; do sleep 1; done'", 3),
        # a loop in a function defined before the start, and called after it
        ("up() { until curl -fs http://127.0.0.1:8000/; do sleep 1; done; }\n" + SERVER + "up", 1),
        # commands run in parallel and waited for: nothing is left running when the loop starts
        (
            "hf download org/a >/dev/null &\nhf download org/b >/dev/null &\nwait\nfor m in a b; do ls $m; sleep 1; done",
            None,
        ),
    ],
)
def test_a_readiness_loop_that_never_checks_the_server_is_alive_is_a_warning(body: str, line: int | None) -> None:
    """SGLang died while starting and the health check polled /health for its whole limit."""
    found = [(at, m) for at, m in _lessons('#test id="serve"', body) if "still alive" in m]
    assert [at for at, _ in found] == ([] if line is None else [line]), found
    assert all("started with `&` at line" in m and 'kill -0 "$PID"' in m for _, m in found)


def test_a_server_started_in_one_block_and_waited_for_in_the_next_is_watched_there() -> None:
    """The authoring tips split a long job into a block that starts it with `&` and one that waits for it: the
    waiting block's loop must ask whether the server is still alive, through a pid file (`$!` is gone there)."""
    start = f"{FENCE}shell #test-setup\nnohup python -m http.server 8000 >/tmp/server.log 2>&1 &\n{FENCE}\n\n"
    wait = "until curl -fs http://127.0.0.1:8000/; do sleep 1; done"
    waiting = f"{FENCE}shell #test-setup\n{wait}\n{FENCE}\n\n"
    retrying = f"{FENCE}shell #test-setup\nfor _ in 1 2 3; do curl -fs http://127.0.0.1:8000/ && break; sleep 5; done\n{FENCE}\n"
    ((line, message),) = _guide_lessons(start + waiting + retrying, "still alive")  # the readiness loop only
    assert line == 6 and "waits for `python -m http.server`, started with `&` at line 2 (another block)" in message
    assert "`echo $! >/tmp/PID_FILE` after the start" in message and 'kill -0 "$(cat /tmp/PID_FILE)"' in message
    watched = waiting.replace(
        wait, 'until curl -fs http://127.0.0.1:8000/; do kill -0 "$(cat /tmp/s.pid)" || exit 1; sleep 1; done'
    )
    assert _guide_lessons(start + watched + retrying, "still alive") == []
    ended = start.replace("&\n", "&\nwait\n")
    assert _guide_lessons(ended + waiting, "still alive") == []


def test_an_unwatched_server_is_named_by_its_program() -> None:
    body = "(cd srv && setsid nohup python -m http.server 8000 >server.log 2>&1 &)\nuntil curl -fs localhost:8000; do sleep 1; done"
    ((_, message),) = _lessons('#test id="serve"', body)
    assert "this loop waits for `python -m http.server`, started with `&` at line 2" in message


def test_the_fix_of_an_unwatched_server_names_the_variable_its_pid_is_in() -> None:
    unsaved = (
        "nohup python -m http.server 8000 >server.log 2>&1 &\nuntil curl -fs http://127.0.0.1:8000/; do sleep 1; done"
    )
    saved = "nohup python -m http.server 8000 >server.log 2>&1 &\nSERVER_PID=$!\n" + unsaved.split("\n")[1]
    ((_, unsaved_message),) = _lessons('#test id="serve"', unsaved)
    assert "save its pid (`PID=$!`) and fail at once" in unsaved_message
    ((_, saved_message),) = _lessons('#test id="serve"', saved)
    assert "save its pid" not in saved_message and 'kill -0 "$SERVER_PID" || { tail -50 LOG >&2' in saved_message


@pytest.mark.parametrize(
    ("body", "line"),
    [
        ("uv pip install --timeout 30 -e .\npython -c 'import pkg; print(pkg.__name__)'", 1),
        ("cd src && pip install --timeout 30 .\necho installed", 1),
        ("timeout 600 apt-get install -y libnuma1 | tail -1\necho ok", 1),
        ("set -e\npip install --timeout 30 . | tail -1\necho installed", 2),  # without pipefail, tail's status
        ("set -eo pipefail\npip install --timeout 30 . | tail -1\necho installed", None),
        ("set -euo pipefail\npip install --timeout 30 .\necho installed", None),
        ("pip install --timeout 30 . || exit 1\necho installed", None),
        ("if ! pip install --timeout 30 .; then echo failed; exit 1; fi\necho installed", None),
        ("echo start\npip install --timeout 30 .", None),  # the last command: its status is the block's
        ("set -euo pipefail; pip install --timeout 30 . | tail -1\necho installed", None),
        ("set -e\nset +e\npip install --timeout 30 .\necho installed", 3),  # errexit turned off again
        ('die() { echo "$*" >&2; exit 1; }\npip install --timeout 30 . || die "no install"\necho installed', None),
        ("trap 'echo \"failed at line $LINENO\" >&2; exit 1' ERR\npip install --timeout 30 .\necho installed", None),
        ('"$VENV/bin/pip" install --timeout 30 .\necho installed', 1),  # a pip named by a quoted path
    ],
)
def test_an_install_whose_failure_would_show_as_a_mismatch_is_a_warning(body: str, line: int | None) -> None:
    """Actions run 33467285504: the output of a failing step was compared with the expected lines."""
    found = [(at, m) for at, m in _lessons('#test id="install"', body) if "can fail and the block go on" in m]
    assert [at for at, _ in found] == ([] if line is None else [line]), found
    assert all("set -euo pipefail" in message and "|| exit 1" in message for _, message in found)
    # a setup's failure fails the run whatever it prints: no lesson there
    assert not [m for _, m in _lessons("#test-setup", body) if "can fail and the block go on" in m]


def test_the_lessons_name_file_and_line_in_the_report_and_fail_under_strict(repo: Repo) -> None:
    base = repo.start()
    guide = f"""\
# Lessons

{FENCE}shell #test-setup
source /usr/local/Ascend/ascend-toolkit/set_env.sh
git clone https://example.org/repo.git
{FENCE}
"""
    repo.write("guide.md", guide)
    repo.commit("add")
    done = repo.drift("--base", base, "--no-pins", "guide.md")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "warning: guide.md:4: [static] #test-setup at line 3: `source " in done.stdout, done.stdout
    assert "warning: guide.md:5: [static] #test-setup at line 3: `git clone` has no time or stall bound" in done.stdout
    strict = repo.drift("--base", base, "--no-pins", "--strict", "guide.md")
    assert strict.returncode == 1, strict.stdout + strict.stderr
    assert "error: guide.md:5: [static] #test-setup at line 3: `git clone` has no time or stall bound" in strict.stdout
