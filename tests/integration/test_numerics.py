"""The CPU numerics pin (graft.numerics): the same toy build and training steps under two kernel dispatches that
any x86-64 machine with AVX2 supports (ATen's and MKL's plain code against their AVX2 code) give different bytes
with the pin off and identical bytes with it on, which is what makes an AVX2-only machine and an AVX-512 one
agree."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from graft.errors import ConfigError
from graft.numerics import PIN_VARIABLE, PINS, check_mode, pin_cpu_numerics

ROOT = Path(__file__).resolve().parents[2]
TIMING = {"rollout_s", "reward_s", "scoring_s", "update_s", "step_time_s", "gpu_hours", "recompute_s"}

# Kernel dispatches of one machine, as different machines would choose them: plain code, AVX2 code, what an
# AVX2-only CPU's MKL would run (MKL_ENABLE_INSTRUCTIONS caps its dispatch), and this machine's own choice.
DISPATCHES = {
    "plain": {"ATEN_CPU_CAPABILITY": "default", "MKL_CBWR": "COMPATIBLE", "ONEDNN_MAX_CPU_ISA": "SSE41"},
    "avx2": {"ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX2"},
    "avx2_only_cpu": {"ATEN_CPU_CAPABILITY": "avx2", "MKL_ENABLE_INSTRUCTIONS": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX2"},
    "this_machine": {},
}


def build_and_train(tmp: Path, mode: str, dispatch: str) -> dict[str, str]:
    """Digests of the smoke world's model weights and of two GRPO steps' metrics (timings left out)."""
    config = yaml.safe_load((ROOT / "config" / "smoke.yaml").read_text())
    config["results"] = str(tmp / "results")
    path = tmp / "config.yaml"
    tmp.mkdir(parents=True)
    path.write_text(yaml.safe_dump(config))
    env = {**os.environ, **DISPATCHES[dispatch], PIN_VARIABLE: mode}
    graft = [str(Path(sys.executable).parent / "graft")]
    build = [*graft, "toy", "build", "--config", path, "--threads", "1"]
    subprocess.run(build, env=env, check=True, cwd=ROOT, timeout=1800)
    run = tmp / "run"
    train = ["train", "--config", path, "--method", "grpo_n8", "--models", "smol", "--seed", "0", "--out", run]
    subprocess.run([*graft, *train, "--threads", "1"], env=env, check=True, cwd=ROOT, timeout=1800)
    digests = {
        name: hashlib.sha256((tmp / "results" / "toy" / "models" / name / "model.safetensors").read_bytes()).hexdigest()
        for name in ("smol", "qwen")
    }
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    metrics = json.dumps([{k: v for k, v in r.items() if k not in TIMING} for r in rows], sort_keys=True)
    digests["metrics"] = hashlib.sha256(metrics.encode()).hexdigest()
    digests["capability"] = json.loads((run / "run.json").read_text())["numerics"]["torch_cpu_capability"]
    return digests


@pytest.mark.parametrize("mode", ["native", "avx2"])
def test_two_kernel_dispatches_differ_without_the_pin_and_agree_with_it(tmp_path, mode):
    plain = build_and_train(tmp_path / "plain", mode, "plain")
    avx2 = build_and_train(tmp_path / "avx2", mode, "avx2")
    print(mode, {"plain": plain, "avx2": avx2})  # the two-dispatch output, for the record (pytest -s)
    if mode == "native":
        assert plain["capability"] == "DEFAULT" and avx2["capability"] == "AVX2"
        assert plain["qwen"] != avx2["qwen"] or plain["smol"] != avx2["smol"], "the dispatches gave the same bits"
    else:
        assert plain == avx2  # every model byte and every metric
        for dispatch in ("avx2_only_cpu", "this_machine"):
            other = build_and_train(tmp_path / dispatch, mode, dispatch)
            print(mode, dispatch, other)
            assert other == avx2, dispatch


def test_the_pin_overrides_the_environment_and_native_leaves_it():
    env = {"ATEN_CPU_CAPABILITY": "default"}
    assert pin_cpu_numerics(env) == PINS["avx2"] and env["ATEN_CPU_CAPABILITY"] == "avx2"
    env = {"ATEN_CPU_CAPABILITY": "default", PIN_VARIABLE: "native"}
    assert pin_cpu_numerics(env) == {} and env["ATEN_CPU_CAPABILITY"] == "default"
    with pytest.raises(ConfigError, match="GRAFT_CPU_NUMERICS: 'fast' is not allowed; expected one of avx2, native"):
        check_mode({PIN_VARIABLE: "fast"})
