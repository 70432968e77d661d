"""How a learner is built: float32 master weights whatever the process count, and the rollout engine started
before the trained model reaches the GPU (graft.train.learner.make_learner)."""

from __future__ import annotations

import json

import torch
import yaml

from graft.config import config_from_dict
from graft.engine.trajectory import Trajectory
from graft.methods import get_method
from graft.train import learner as learner_module
from graft.train.update import UpdateSettings, minibatch_update


def _config(forced_world, dtype: str, **scale):
    data = yaml.safe_load(forced_world["config"].read_text())
    for model in data["models"].values():
        model["dtype"] = dtype
    data["scale"] = scale
    return config_from_dict(data)


def test_one_process_trains_float32_masters_and_computes_in_bfloat16(forced_world):
    """A bfloat16 model on one process gets what the sharded path gets from FSDP2's mixed precision: float32
    parameters and AdamW moments (an AdamW step at lr 1e-6 on bfloat16 weights is mostly rounded away), and a
    forward in bfloat16."""
    torch.set_num_threads(1)
    learner = learner_module.make_learner("A", _config(forced_world, "bfloat16"), get_method("graft"))
    model = learner.policy.model
    assert {p.dtype for p in model.parameters()} == {torch.float32}
    prompt = learner.policy.tokenizer("1+1=")["input_ids"]
    row = Trajectory(prompt, prompt[:3], [-1.0, -1.0, -1.0], 1.0)
    settings = UpdateSettings(grad_clip=1.0, micro_batch=1, micro_batch_tokens=None)
    minibatch_update(get_method("graft"), learner.policy, learner.optimizer, [row], settings=settings)
    moments = [v for state in learner.optimizer.state.values() for v in state.values() if v.dim() > 0]
    assert moments and {m.dtype for m in moments} == {torch.float32}
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([prompt])).logits
    assert logits.dtype == torch.bfloat16


def test_the_rollout_engine_starts_before_the_model_reaches_the_gpu(forced_world, monkeypatch):
    """vLLM takes its share of the GPU's free memory when it starts: the engine is built while the trained model
    is still on the CPU, then the model moves (one process) or is sharded onto the GPUs (several)."""
    calls: list[str] = []
    real_backend = learner_module.rollout_backend

    def backend(name, cfg, policy, world):
        calls.append(f"engine on {next(policy.model.parameters()).device.type}")
        return real_backend(name, cfg, policy, world)

    real_to = torch.nn.Module.to

    def to(module, *args, **kwargs):
        if module is not None and hasattr(module, "generation_config"):  # the causal LM, not its submodules
            calls.append("model to device")
        return real_to(module, *args, **kwargs)

    monkeypatch.setattr(learner_module, "rollout_backend", backend)
    monkeypatch.setattr(torch.nn.Module, "to", to)
    monkeypatch.setattr(learner_module, "shard_model", lambda module, world, dtype: calls.append("model sharded"))
    cfg = _config(forced_world, "float32")
    learner_module.make_learner("A", cfg, get_method("graft"))
    assert calls == ["engine on cpu", "model to device"]
    calls.clear()
    two = learner_module.World(rank=0, size=2)  # the calls a sharded run makes; nothing collective runs here
    learner_module.make_learner("A", cfg, get_method("graft"), two)
    # the Hugging Face backend's unsharded sampling copy goes to the device whole; the trained model is sharded
    assert calls == ["engine on cpu", "model to device", "model sharded"]


def test_a_bfloat16_run_on_one_process_resumes_from_its_float32_masters(forced_world, tmp_path):
    """The checkpoint's Hugging Face copy is in bfloat16 (what evaluation reads); the resume state keeps the float32
    masters, so a run stopped after its step-2 checkpoint and resumed ends where the uninterrupted run ends."""
    from safetensors.torch import load_file

    from graft.cli import main

    torch.set_num_threads(1)
    data = yaml.safe_load(forced_world["config"].read_text())
    for model in data["models"].values():
        model["dtype"] = "bfloat16"
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(data))
    args = ["train", "--config", str(path), "--method", "graft_no_gate", "--models", "A,B", "--seed", "0"]
    whole, parts = tmp_path / "whole", tmp_path / "parts"
    assert main([*args, "--out", str(whole), "--steps", "3"]) == 0
    assert main([*args, "--out", str(parts), "--steps", "2"]) == 0
    assert main([*args, "--out", str(parts), "--steps", "3", "--resume"]) == 0

    def metrics(out):
        rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
        return [{k: v for k, v in r.items() if not k.endswith("_s") and k != "gpu_hours"} for r in rows]

    assert metrics(parts) == metrics(whole)
    for m in "AB":
        final = [load_file(out / "checkpoints" / "step_00003" / m / "model.safetensors") for out in (whole, parts)]
        assert {t.dtype for t in final[0].values()} == {torch.bfloat16}
        assert all(torch.equal(final[0][k], final[1][k]) for k in final[0])
        masters = torch.load(whole / "checkpoints" / "step_00003" / m / "optimizer.pt", weights_only=True)["masters"]
        assert {t.dtype for t in masters.values()} == {torch.float32}
