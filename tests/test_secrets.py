"""Secrets for any guide: the named ones, picked out of a job's secrets, reach the blocks masked; no other does."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from ci.github.secrets import pick_secrets, secret_name_problem, split_names

FENCE = "```"
NAMED = "idx-pa55w0rd-4f9c2e"  # PRIVATE_INDEX_AUTH: not secret by its name, so only --secret masks it
UNNAMED = "other-t0ken-77aa31"
JOB_SECRETS = {"github_token": "ghs_job_token_value_1", "PRIVATE_INDEX_AUTH": NAMED, "OTHER_TOKEN": UNNAMED}
GUIDE = f"""
    {FENCE}shell #test-setup id="show"
    env | grep -E '^(PRIVATE_INDEX_AUTH|OTHER_TOKEN|GUIDE_SECRETS|github_token)=' | sort
    printf '%s\\n' "$PRIVATE_INDEX_AUTH" > kept.txt
    {FENCE}
    """


def read_env_file(path: Path) -> dict[str, str]:
    """The variables a $GITHUB_ENV file sets, as the runner reads it (NAME=VALUE, or NAME<<DELIMITER lines)."""
    found, lines = {}, iter(path.read_text(encoding="utf-8").splitlines())
    for line in lines:
        name, heredoc, delimiter = line.partition("<<")
        if heredoc:
            value = []
            for inner in lines:
                if inner == delimiter:
                    break
                value.append(inner)
            found[name] = "\n".join(value)
        else:
            name, _, found[name] = line.partition("=")
    return found


def test_only_the_named_secrets_reach_the_blocks_masked_in_every_report(run_harness, guide_runner, tmp_path) -> None:
    env_file = tmp_path / "github-env"
    env_file.write_text("EARLIER=kept\n", encoding="utf-8")
    picked = run_harness(
        "PRIVATE_INDEX_AUTH,MISSING_ONE",
        "--from-env",
        "GUIDE_SECRETS",
        "--env-file",
        str(env_file),
        module="ci.github.secrets",
        env={"GUIDE_SECRETS": json.dumps(JOB_SECRETS)},
    )
    assert picked.returncode == 0, picked.stdout + picked.stderr
    assert picked.stdout.splitlines() == [
        "secrets for the blocks: PRIVATE_INDEX_AUTH",
        "not among the job's secrets, or empty: MISSING_ONE (the guide's run says more)",
    ]
    # what the later steps get: the named secret alone, beside what the file held
    exported = read_env_file(env_file)
    assert exported == {"EARLIER": "kept", "PRIVATE_INDEX_AUTH": NAMED}
    # the step that runs the guide: the job's environment with those variables, and never the JSON
    run = guide_runner(GUIDE, "--secret", "PRIVATE_INDEX_AUTH", "--mask-files", "--junit", "junit.xml", env=exported)
    assert run.returncode == 0, run.stdout + run.stderr
    assert (run.output_dir / "blocks" / "001-show.stdout.txt").read_text() == "PRIVATE_INDEX_AUTH=***\n"
    assert (tmp_path / "kept.txt").read_text() == f"{NAMED}\n"  # the block had the value itself
    reports = [run.stdout, run.stderr, (tmp_path / "junit.xml").read_text()]
    reports += [path.read_text(errors="replace") for path in run.output_dir.rglob("*") if path.is_file()]
    assert not [text for text in reports if NAMED in text or UNNAMED in text]
    assert "secret" not in run.stderr  # nothing missing, nothing said


def test_without_secret_the_same_value_is_not_masked(guide_runner, tmp_path) -> None:
    # what --secret adds: PRIVATE_INDEX_AUTH is not secret by its name alone
    run = guide_runner(GUIDE, env={"PRIVATE_INDEX_AUTH": NAMED})
    assert (run.output_dir / "blocks" / "001-show.stdout.txt").read_text() == f"PRIVATE_INDEX_AUTH={NAMED}\n"


def test_a_missing_secret_is_a_warning_and_under_strict_an_error(guide_runner, tmp_path) -> None:
    run = guide_runner(GUIDE, "--secret", "PRIVATE_INDEX_AUTH", env={"PRIVATE_INDEX_AUTH": ""})
    assert run.returncode == 0, run.stdout + run.stderr
    [warning] = [line for line in run.stderr.splitlines() if "PRIVATE_INDEX_AUTH" in line]
    assert warning.startswith("warning: secret PRIVATE_INDEX_AUTH is named for the guide's blocks but is not set")
    assert "Secrets and variables > Actions" in warning and "secrets: inherit" in warning
    strict = guide_runner(GUIDE, "--secret", "PRIVATE_INDEX_AUTH", "--strict")
    assert strict.returncode == 2
    assert "[ERROR] secret PRIVATE_INDEX_AUTH is named for the guide's blocks but is not set" in strict.stderr
    assert "[ERROR] --strict: a missing secret is an error; nothing was run" in strict.stderr
    assert strict.stdout == ""  # no block ran


def test_a_secret_name_that_is_no_variable_name_is_a_usage_error(guide_runner, run_harness) -> None:
    for name, said in [("GITHUB_TOKEN", "GitHub reserves GITHUB_ names"), ("1ABC", "not a variable name")]:
        run = guide_runner(GUIDE, "--secret", name)
        assert run.returncode == 2 and said in run.stderr, run.stderr
        picked = run_harness(name, "--from-env", "S", "--env-file", "f", module="ci.github.secrets", env={"S": "{}"})
        assert picked.returncode == 2 and said in picked.stderr, picked.stderr


def test_a_secret_name_that_would_steer_every_later_step_is_refused_before_any_is_written(
    run_harness, tmp_path
) -> None:
    env_file = tmp_path / "github-env"
    secrets = '{"HF_TOKEN": "a", "BASH_ENV": "b"}'
    picked = run_harness(
        "HF_TOKEN,BASH_ENV",
        "--from-env",
        "S",
        "--env-file",
        str(env_file),
        module="ci.github.secrets",
        env={"S": secrets},
    )
    said = "the secrets named (the action's `secrets` input, a registry entry's `secrets`): secret 'BASH_ENV' would set"
    assert picked.returncode == 2 and said in picked.stderr, picked.stderr
    assert 'export BASH_ENV="$GUIDE_BASH_ENV"' in picked.stderr and not env_file.exists()


STEERING = [
    # name, the rule the refusal names
    ("NODE_TLS_REJECT_UNAUTHORIZED", "NODE_*"),
    ("NODE_EXTRA_CA_CERTS", "NODE_*"),
    ("node_options", "NODE_*"),
    ("NPM_CONFIG_CAFILE", "NPM_CONFIG_*"),
    ("OPENSSL_CONF", "OPENSSL_*"),
    ("OPENSSL_MODULES", "OPENSSL_*"),
    ("SSLKEYLOGFILE", "SSL*"),
    ("SSL_CERT_FILE", "SSL*"),
    ("GLIBC_TUNABLES", "GLIBC_*"),
    ("MALLOC_PERTURB_", "MALLOC_*"),
    ("JDK_JAVA_OPTIONS", "JDK_JAVA_OPTIONS"),
    ("RES_OPTIONS", "RES_OPTIONS"),
    ("PATH", "PATH"),
    ("LD_PRELOAD", "LD_*"),
]


def test_names_that_steer_later_steps_tls_and_loaders_are_refused_by_their_family(run_harness, tmp_path) -> None:
    for name, rule in STEERING:
        problem = secret_name_problem(name)
        assert problem is not None and f"no secret may be named {rule} (" in problem, (name, problem)
        assert f'export {name}="$GUIDE_{name}"' in problem
    # the name the refusal suggests is one of the secret's own, and names that hand a value pass
    assert [secret_name_problem(name) for name in ("GUIDE_NODE_OPTIONS", "HF_TOKEN", "NPM_TOKEN")] == [None] * 3
    # what guide-guard-secrets says, before it writes anything
    env_file = tmp_path / "github-env"
    picked = run_harness(
        "HF_TOKEN NODE_TLS_REJECT_UNAUTHORIZED",
        "--from-env",
        "S",
        "--env-file",
        str(env_file),
        module="ci.github.secrets",
        env={"S": '{"HF_TOKEN": "a", "NODE_TLS_REJECT_UNAUTHORIZED": "0"}'},
    )
    assert picked.returncode == 2 and not env_file.exists()
    assert (
        "secret 'NODE_TLS_REJECT_UNAUTHORIZED' would set NODE_TLS_REJECT_UNAUTHORIZED for every later step of the"
        " job, and no secret may be named NODE_* (what code a runtime loads and with which options, in the action's"
        " own JavaScript steps too: docs/ci.md lists the rules)"
    ) in picked.stderr, picked.stderr


def test_the_job_secrets_that_are_no_json_object_are_refused_without_being_quoted(run_harness, tmp_path) -> None:
    env_file = tmp_path / "github-env"
    for given, said in [
        ('{"A_TOKEN": "s3cr3t-v4lue', "--from-env S: not JSON ("),
        ('["s3cr3t-v4lue"]', "--from-env S: not a JSON object"),
    ]:
        picked = run_harness(
            "A_TOKEN", "--from-env", "S", "--env-file", str(env_file), module="ci.github.secrets", env={"S": given}
        )
        assert picked.returncode == 2 and said in picked.stderr and "s3cr3t" not in picked.stderr, picked.stderr
    unset = run_harness("A_TOKEN", "--from-env", "S", "--env-file", str(env_file), module="ci.github.secrets")
    assert unset.returncode == 2 and "--from-env S: the variable is not set" in unset.stderr
    assert not env_file.exists()


def test_names_are_picked_as_github_names_secrets_case_insensitively() -> None:
    secrets = {"HF_TOKEN": "a", "modelscope_api_token": "b", "EMPTY_TOKEN": "", "Exact": "c", "EXACT": "d"}
    picked = pick_secrets(secrets, ["MODELSCOPE_API_TOKEN", "EMPTY_TOKEN", "Exact", "HF_TOKEN", "NONE", "HF_TOKEN"])
    assert picked.found == {"MODELSCOPE_API_TOKEN": "b", "Exact": "c", "HF_TOKEN": "a"}
    assert list(picked.found) == ["MODELSCOPE_API_TOKEN", "Exact", "HF_TOKEN"]
    assert picked.missing == ("EMPTY_TOKEN", "NONE")
    assert split_names(" HF_TOKEN,MODELSCOPE_API_TOKEN\n  X ") == ["HF_TOKEN", "MODELSCOPE_API_TOKEN", "X"]
    assert secret_name_problem("github_pat") is not None and secret_name_problem("A-B") is not None
    assert secret_name_problem("_PRIVATE_1") is None
    assert re.search(r"GITHUB_", secret_name_problem("GITHUB_X") or "")
    # names that would change how every later step runs, once $GITHUB_ENV sets them; a token's name passes
    for steering in ("PATH", "BASH_ENV", "ENV", "ld_preload", "PYTHONSTARTUP", "RUNNER_TEMP", "https_proxy"):
        assert "would set" in (secret_name_problem(steering) or ""), steering
    assert secret_name_problem("ENVIRONMENT_TOKEN") is None and secret_name_problem("GUIDE_PATH") is None


def test_the_entrys_secrets_reach_the_action_and_its_run_step_gets_only_the_named_ones(tmp_path) -> None:
    from workflows import ACTION, GUIDE_RUN, ROOT, WORKFLOWS, action_step, run_step_script, step_env

    # the registry's matrix key -> guides.yml's call -> guide-run.yml's input -> the action's inputs
    call = WORKFLOWS["guides.yml"].jobs["run"]
    assert (call["with"]["secrets"], call["secrets"]) == ("${{ matrix.secrets }}", "inherit")
    assert "secrets" in WORKFLOWS[GUIDE_RUN].doc["on"]["workflow_call"]["inputs"]
    given = action_step(WORKFLOWS[GUIDE_RUN].jobs["run"])["with"]
    assert (given["secrets"], given["secrets-json"]) == ("${{ inputs.secrets }}", "${{ toJSON(secrets) }}")
    # in the action: the JSON goes to the hand-over step alone, which comes before the run step
    steps = {name: step for _, name, step in ACTION.steps()}
    holding = [name for name, step in steps.items() if "inputs.secrets-json" in json.dumps(step)]
    assert holding == ["Hand the named secrets to the guide's run"]
    assert list(steps).index(holding[0]) < list(steps).index("Run the guide")
    # an input's description is text: an expression there stops the action from loading (as act reports it)
    assert not [name for name, spec in ACTION.doc["action"]["inputs"].items() if "${{" in spec["description"]]
    # the two steps' real scripts: the hand-over with this checkout's harness, the run with a stand-in for the
    # harness's command that keeps its arguments and environment
    harness = tmp_path / "harness" / "bin"
    harness.mkdir(parents=True)
    (harness / "guide-guard").write_text('#!/bin/sh\nprintf \'%s\\n\' "$@" > "$0.args"\nenv > "$0.env"\n')
    (harness / "guide-guard").chmod(0o755)
    env_file = tmp_path / "github-env"
    env_file.touch()
    around = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "GITHUB_ENV": str(env_file)}
    around["GITHUB_ACTION_PATH"] = str(ROOT)
    known = {"inputs.secrets": "PRIVATE_INDEX_AUTH", "inputs.secrets-json": json.dumps(JOB_SECRETS)}
    known["steps.install.outputs.venv"] = str(Path(sys.executable).parent.parent)  # this checkout's harness
    hand_over = steps[holding[0]]
    done = run_step_script(
        hand_over, tmp_path, {**around, **step_env(ACTION, "action", hand_over, {}, known)}, "action", ACTION
    )
    assert done.returncode == 0 and "secrets for the blocks: PRIVATE_INDEX_AUTH" in done.stdout, (
        done.stdout + done.stderr
    )
    exported = read_env_file(env_file)
    assert exported == {"PRIVATE_INDEX_AUTH": NAMED}
    run_step = steps["Run the guide"]
    known = {f"inputs.{name}": str(spec.get("default", "")) for name, spec in ACTION.doc["action"]["inputs"].items()}
    known |= {
        "inputs.guide": "guide.md",
        "inputs.secrets": "PRIVATE_INDEX_AUTH",
        "steps.install.outputs.venv": str(harness.parent),
    }
    values = {"KEEP_GOING": "", "MASK_FILES": "yes", "STRICT": "yes"}
    done = run_step_script(
        run_step,
        tmp_path,
        {**around, **exported, **step_env(ACTION, "action", run_step, values, known)},
        "action",
        ACTION,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "--secret=PRIVATE_INDEX_AUTH" in (harness / "guide-guard.args").read_text().splitlines()
    seen = (harness / "guide-guard.env").read_text()
    assert f"PRIVATE_INDEX_AUTH={NAMED}\n" in seen
    assert UNNAMED not in seen and "GUIDE_GUARD_JOB_SECRETS" not in seen and "github_token" not in seen
