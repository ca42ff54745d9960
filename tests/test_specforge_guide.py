"""Static checks of docs/specforge.md: plan, syntax of every block, front matter."""

from __future__ import annotations

import ast
import fnmatch
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
GUIDE = ROOT / "docs" / "specforge.md"

# (label, id, store, loads) in execution order.
EXPECTED_PLAN = [
    ("#test", "check-py", None, []),
    ("#test", "check-cann", None, []),
    ("#test", "check-torch", None, []),
    ("#test-setup", "install-hf-hub", None, []),
    ("#test-setup", "build-mooncake", None, []),
    ("#test", "verify-install", None, []),
    ("#test-setup", None, "upstream_ref", []),
    ("#test", "specforge-install-source", None, [["upstream_ref", "ref"]]),
    ("#test", "specforge-import", None, []),
    ("#test", "specforge-help", None, []),
    ("#test", "specforge-train-help", None, []),
    ("#test-setup", "smoke-download-model", "model_path", []),
    ("#test", "smoke-apply-patches", None, []),
    ("#test", "smoke-start-mooncake", None, []),
    ("#test", "smoke-start-sglang", None, [["model_path", "MODEL_PATH"]]),
    ("#test-setup", "smoke-prepare-data", "sharegpt_path", []),
    (
        "#test",
        "smoke-train-launch",
        None,
        [["model_path", "MODEL_PATH"], ["sharegpt_path", "SHAREGPT_PATH"]],
    ),
    ("#test", "smoke-train-monitor", None, []),
]

SHELL_LANGS = {"shell", "bash", "sh"}
PYTHON_LANGS = {"python", "python3"}
PLACEHOLDER = re.compile(r"<([A-Za-z_][A-Za-z0-9_]*)>")
FENCE_OPEN = re.compile(r"^(`{3,}|~{3,})(.*)$")
LABELS = ("#test", "#test-result", "#test-setup")


@pytest.fixture(scope="module")
def cli_result() -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "ci.run", "docs/specforge.md", "--list", "--format", "json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.fixture(scope="module")
def plan(cli_result: subprocess.CompletedProcess) -> list[dict]:
    assert cli_result.returncode == 0, cli_result.stderr
    return json.loads(cli_result.stdout)


@pytest.fixture(scope="module")
def guide_text() -> str:
    return GUIDE.read_text(encoding="utf-8")


def labelled_blocks(text: str) -> list[tuple[int, str, str, str]]:
    """Every labelled fence: (line, language, label, body); a small independent parser."""
    lines = text.split("\n")
    blocks = []
    i = 0
    while i < len(lines):
        m = FENCE_OPEN.match(lines[i])
        if not m:
            i += 1
            continue
        fence, info = m.group(1), m.group(2).split()
        start = i
        i += 1
        body = []
        while i < len(lines) and not (
            lines[i].startswith(fence[0] * len(fence)) and not lines[i].strip(fence[0]).strip()
        ):
            body.append(lines[i])
            i += 1
        i += 1
        label = next((w for w in info if w in LABELS), None)
        if label is None:
            continue
        lang = info[0].lower() if info and info[0] != label else ""
        blocks.append((start + 1, lang, label, "\n".join(body)))
    return blocks


def substitute(body: str) -> str:
    """Replace <PLACEHOLDER> tokens by a dummy value (else `<ref>` is a redirection)."""
    return PLACEHOLDER.sub(lambda m: f"dummy_{m.group(1)}", body)


def python_heredocs(body: str) -> list[str]:
    """Bodies of heredocs fed to python (`python - ... <<'PY'`, `python3 <<EOF`, ...)."""
    found = []
    lines = body.split("\n")
    for n, line in enumerate(lines):
        if not re.search(r"\bpython3?\b", line):
            continue
        m = re.search(r"<<(-?)\s*(['\"]?)([A-Za-z_][A-Za-z0-9_]*)\2", line)
        if not m:
            continue
        strip_tabs, delim = m.group(1) == "-", m.group(3)
        doc = []
        for later in lines[n + 1 :]:
            check = later.lstrip("\t") if strip_tabs else later
            if check == delim:
                break
            doc.append(check)
        else:
            raise AssertionError(f"heredoc {delim!r} is never closed")
        found.append("\n".join(doc))
    return found


def python_c_strings(body: str) -> list[str]:
    """Multi-line `python -c "..."` programs (the double-quoted string spans lines)."""
    found = []
    for m in re.finditer(r'\bpython3?\s+-c\s+"((?:[^"\\]|\\.)*)"', body, re.S):
        code = m.group(1)
        if "\n" not in code:
            continue
        # Shell expansions inside the string: give them a harmless Python value.
        code = re.sub(r"\$\{?[A-Za-z_][A-Za-z0-9_]*\}?", "0", code)
        code = code.replace('\\"', '"').replace("\\$", "$").replace("\\\\", "\\")
        found.append(code)
    return found


def test_cli_lists_the_guide_cleanly(cli_result: subprocess.CompletedProcess) -> None:
    assert cli_result.returncode == 0, cli_result.stderr
    assert "warning" not in cli_result.stderr.lower(), cli_result.stderr
    assert "[ERROR]" not in cli_result.stderr, cli_result.stderr


def test_plan_order_ids_stores_and_loads(plan: list[dict]) -> None:
    got = [(b["label"], b["id"], b["store"], b["loads"]) for b in plan]
    assert got == EXPECTED_PLAN
    assert [b["ordinal"] for b in plan] == list(range(1, len(EXPECTED_PLAN) + 1))


def test_only_upstream_ref_setup_is_hidden(plan: list[dict]) -> None:
    hidden = [b["store"] for b in plan if b["hidden"]]
    assert hidden == ["upstream_ref"]


def test_every_test_has_expected_output(plan: list[dict]) -> None:
    for block in plan:
        if block["label"] == "#test":
            assert block["expected"], block["id"]


def test_fuzzy_tokens(plan: list[dict]) -> None:
    by_id = {b["id"]: b for b in plan if b["label"] == "#test"}
    for block in by_id.values():
        if "xxx" in block["expected"]:
            assert block["fuzzy"] == ["xxx"], block["id"]
    # click prints `[ARGS]...`: matched literally, not as a wildcard; only the benchmark line's description,
    # which differs between revisions of the click CLI, is one.
    assert by_id["specforge-help"]["fuzzy"] == ["xxx"]
    assert "\n  benchmark  xxx\n" in by_id["specforge-help"]["expected"]
    assert by_id["specforge-help"]["expected"].count("xxx") == 1
    assert by_id["specforge-train-help"]["fuzzy"] == []


def test_stores_come_before_loads(plan: list[dict]) -> None:
    stored: set[str] = set()
    for block in plan:
        for name, _ph in block["loads"]:
            assert name in stored, f"{block['id']} loads {name} before it is stored"
        if block["store"]:
            stored.add(block["store"])
    assert {"upstream_ref", "model_path", "sharegpt_path"} <= stored


def test_loaded_placeholders_are_used(plan: list[dict], guide_text: str) -> None:
    bodies = {line: body for line, _lang, _label, body in labelled_blocks(guide_text)}
    for block in plan:
        body = bodies[block["line"]]
        for _name, ph in block["loads"]:
            assert f"<{ph}>" in body, f"{block['id']} loads {ph} but never uses <{ph}>"


def test_front_matter(plan: list[dict], guide_text: str) -> None:
    assert guide_text.startswith("---\n")
    front = yaml.safe_load(guide_text.split("---\n", 2)[1])
    ci = front["ci"]
    assert ci["timeout"] == 10800
    assert "ERR99999" in ci["error_markers"]
    assert "applicaiton exception" in ci["error_markers"]
    assert ci["upstream"] == {
        "repo": "sgl-project/SpecForge",
        "model": "Qwen/Qwen3.5-4B",
        "written_for": "main with PR #825 (click CLI), without PR #873",  # the expected `specforge --help`'s
    }
    assert all(b["timeout_s"] == 10800 for b in plan)


def test_every_log_the_guide_writes_is_collected(guide_text: str) -> None:
    front, body = guide_text.split("---\n", 2)[1:]
    collect = yaml.safe_load(front)["ci"]["collect"]
    logs = set(re.findall(r"/tmp/[A-Za-z0-9._-]+\.log\b", body))
    assert {"/tmp/smoke-sglang.log", "/tmp/smoke-train.log", "/tmp/build-mooncake-pip.log"} <= logs
    assert all(any(fnmatch.fnmatchcase(log, glob) for glob in collect) for log in logs), (logs, collect)
    assert not any(fnmatch.fnmatchcase("/tmp/smoke-train.pid", glob) for glob in collect)


def test_ascend_diagnostics_are_declared_and_valid_bash(guide_text: str, tmp_path: Path) -> None:
    ci = yaml.safe_load(guide_text.split("---\n", 2)[1])["ci"]
    diagnostics = ci["diagnostics"]
    assert diagnostics[0] == "npu-smi info"
    assert any("ascend/log" in d and "plog-" in d for d in diagnostics)
    assert any(d.startswith("if out=$(dmesg") for d in diagnostics)
    assert {"tail -n 100 /tmp/smoke-sglang.log", "tail -n 100 /tmp/smoke-train.log"} <= set(diagnostics)
    for number, command in enumerate(diagnostics):
        script = tmp_path / f"diagnostic-{number}.sh"
        script.write_text(command + "\n", encoding="utf-8")
        proc = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
        assert proc.returncode == 0, f"diagnostic {command!r}: {proc.stderr}"


def test_the_plog_diagnostic_shows_the_newest_plogs(guide_text: str, tmp_path: Path) -> None:
    (command,) = [d for d in yaml.safe_load(guide_text.split("---\n", 2)[1])["ci"]["diagnostics"] if "plog-" in d]
    plog = tmp_path / "ascend" / "log" / "debug" / "plog"
    plog.mkdir(parents=True)
    for age, name in enumerate(["plog-9_4.log", "plog-9_3.log", "plog-9_2.log", "plog-9_1.log"]):
        (plog / name).write_text(f"{name} line\n")
        os.utime(plog / name, (1_000_000 - age * 100, 1_000_000 - age * 100))
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path)}
    shown = subprocess.run(["bash", "-c", command], capture_output=True, text=True, env=env, timeout=60).stdout
    assert shown == "".join(f"== {plog / n}\n{n} line\n" for n in ["plog-9_4.log", "plog-9_3.log", "plog-9_2.log"])
    env["ASCEND_PROCESS_LOG_PATH"] = str(tmp_path / "elsewhere")
    shown = subprocess.run(["bash", "-c", command], capture_output=True, text=True, env=env, timeout=60).stdout
    assert shown == f"no plog-*.log under {tmp_path / 'elsewhere'}\n"


def test_prose_is_chinese_and_uses_hugging_face(guide_text: str) -> None:
    body = guide_text.split("---\n", 2)[2]
    assert body.lstrip().startswith("# SpecForge\n")
    for heading in ("## 前置条件", "### 硬件", "### 基础软件", "### 本文档示例使用的版本"):
        assert heading + "\n" in body
    assert "| 组件 | 版本 |" in body
    assert "HuggingFace Hub" in body or "Hugging Face" in body
    assert "modelscope" not in body.lower()


def test_npu_smi_is_not_labelled(guide_text: str) -> None:
    for _line, _lang, _label, body in labelled_blocks(guide_text):
        assert "npu-smi" not in body


def _shell_blocks(text: str) -> list[tuple[int, str]]:
    return [
        (line, body)
        for line, lang, label, body in labelled_blocks(text)
        if label != "#test-result" and lang in SHELL_LANGS
    ]


def _python_blocks(text: str) -> list[tuple[int, str]]:
    return [
        (line, body)
        for line, lang, label, body in labelled_blocks(text)
        if label != "#test-result" and lang in PYTHON_LANGS
    ]


def test_parser_agrees_with_plan(plan: list[dict], guide_text: str) -> None:
    runnable = [(line, lang) for line, lang, label, _body in labelled_blocks(guide_text) if label != "#test-result"]
    assert runnable == [(b["line"], b["language"]) for b in plan]


def test_shell_blocks_pass_bash_n(guide_text: str, tmp_path: Path) -> None:
    blocks = _shell_blocks(guide_text)
    assert len(blocks) >= 14
    for line, body in blocks:
        script = tmp_path / f"block-{line}.sh"
        script.write_text(substitute(body) + "\n", encoding="utf-8")
        proc = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
        assert proc.returncode == 0, f"docs/specforge.md:{line}: {proc.stderr}"


def test_python_blocks_compile(guide_text: str) -> None:
    blocks = _python_blocks(guide_text)
    assert len(blocks) == 2
    for line, body in blocks:
        compile(substitute(body), f"docs/specforge.md:{line}", "exec")


def test_python_heredocs_compile(guide_text: str) -> None:
    count = 0
    for line, body in _shell_blocks(guide_text):
        for code in python_heredocs(substitute(body)):
            compile(code, f"docs/specforge.md:{line} (heredoc)", "exec")
            count += 1
    # the trainer's imports after the install, model download, the companion's anchored edits, data preparation
    assert count == 4


def test_multiline_python_c_compiles(guide_text: str) -> None:
    count = 0
    for line, body in _shell_blocks(guide_text):
        for code in python_c_strings(body):
            compile(code, f"docs/specforge.md:{line} (python -c)", "exec")
            count += 1
    assert count == 1  # the mooncake port probe


def test_one_line_python_c_compiles(guide_text: str) -> None:
    count = 0
    for line, body in _shell_blocks(guide_text):
        for m in re.finditer(r'\bpython3?\s+-c\s+"([^"\n]*)"', body):
            compile(m.group(1), f"docs/specforge.md:{line} (python -c)", "exec")
            count += 1
    assert count >= 6


def test_training_data_is_valid_json(guide_text: str) -> None:
    (code,) = [c for _line, body in _shell_blocks(guide_text) for c in python_heredocs(body) if "conversations" in c]
    (row_node,) = [
        node.value
        for node in ast.walk(ast.parse(code))
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "row" for t in node.targets)
    ]
    row = ast.literal_eval(row_node)
    assert [c["role"] for c in row["conversations"]] == ["user", "assistant"]
    assert len(row["conversations"][1]["content"]) > 1000
    json.dumps(row)


def test_model_download_prints_only_the_path(guide_text: str) -> None:
    """Everything the download prints goes to stderr, at the file descriptor (a client writing to fd 1 directly
    included); only the path is written, to fd 3, which the block sends to its stdout."""
    ((line, body),) = [(n, b) for n, b in _shell_blocks(guide_text) if "snapshot_download" in b]
    assert "python - \"$MODEL_ID\" 3>&1 1>&2 <<'PY'" in body, line
    (code,) = [c for c in python_heredocs(body) if "snapshot_download" in c]
    tree = ast.parse(code)
    (last,) = tree.body[-1:]
    assert isinstance(last, ast.With)
    assert ast.unparse(last.items[0]) == "open(3, 'w', encoding='utf-8') as out"
    assert ast.unparse(last.body[0]) == "print(path, file=out)"
    assert "print(path" not in ast.unparse(ast.Module(body=tree.body[:-1], type_ignores=[]))
