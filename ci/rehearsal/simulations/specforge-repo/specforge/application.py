"""[simulation] What `specforge train` resolves and runs: the model and data it is given, the producer's capture."""

# The real `specforge train` imports specforge.application (and specforge.launch_plan) before it starts
# any worker; a dependency that `pip install --no-deps` left out fails there.

from __future__ import annotations

import json
import urllib.request
from typing import Any

from rehearsal_simulation import broken, say

from specforge import checks, config

if broken("specforge-missing-dep"):
    say("REHEARSAL_BREAK=specforge-missing-dep: specforge.application needs yunchang, which --no-deps left out")
    # yunchang is one of SpecForge's declared dependencies; raised here whatever this machine has installed
    raise ModuleNotFoundError("No module named 'yunchang'", name="yunchang")


def check_inputs(cfg: dict[str, Any]) -> None:
    """The model's embedding tensor (named and shaped as its text config says) and the JSONL conversations."""
    model_path = config.get(cfg, "model.target_model_path")
    shapes = checks.model_tensors(model_path)
    key = config.get(cfg, "model.embedding_key")
    if key not in shapes:
        raise KeyError(f"model.embedding_key {key!r} is not a tensor of the target model: {sorted(shapes)}")
    text = checks.text_config(model_path)
    expected = [text.get("vocab_size"), text.get("hidden_size")]
    if shapes[key] != expected:
        raise ValueError(f"{key} has shape {shapes[key]}, the text config says [vocab_size, hidden_size] = {expected}")
    rows = checks.conversations(config.get(cfg, "data.train_data_path"))
    print(f"train: {len(rows)} conversation(s)", flush=True)


def produce(cfg: dict[str, Any]) -> None:
    """Producer: send the first prompt to the capture server, which captures its hidden states."""
    url = config.get(cfg, "deployment.disaggregated.server_urls")[0].rstrip("/") + "/generate"
    row = checks.conversations(config.get(cfg, "data.train_data_path"))[0]
    prompt = next(turn["content"] for turn in row["conversations"] if turn["role"] == "user")
    body = json.dumps({"text": prompt, "sampling_params": {"max_new_tokens": 0}, "spec_capture": True}).encode()
    request = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        answer = json.loads(response.read())
    captured = answer.get("meta_info", {}).get("spec_capture")
    if not captured:
        raise RuntimeError(f"producer: {url} captured nothing; is the spec-capture patch applied? ({answer})")
    print(f"producer: sample {row.get('id')} captured by {url} ({captured})", flush=True)
