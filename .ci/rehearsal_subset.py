"""CI's subset of the dress rehearsal: config/rehearsal.yaml cut to what still runs every rule of its DAG but the
re-evaluation (toy_data, toy_model, resolve_methods, train, evaluate_base, evaluate_checkpoints, collect_evaluations,
prune_checkpoints, report) within CI's time: pair P2 only (Qwen3's and the Llama decoder's architectures; SmolLM3's
runs in vLLM's engine tests, tests/integration/test_vllm_engine.py), GRPO n=8 for each of its models and GRAFT on P2
(one seed), no baselines, replay or ablations (the same train rule with other switches, which the CPU tests cover),
no re-evaluation of selected checkpoints (the smoke config's re-evaluation jobs run through the same Slurm cluster),
and one evaluation job per cell.

Usage: python .ci/rehearsal_subset.py OUT.yaml [--config config/rehearsal.yaml]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import yaml


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--config", type=Path, default=Path("config/rehearsal.yaml"))
    args = parser.parse_args()
    config = yaml.safe_load(args.config.read_text())
    pair = config["pairs"]["P2"]
    config["pairs"] = {"P2": pair}
    for section in (config["models"], config["toy"]["models"], config["report"]["paper_models"]):
        for model in [m for m in section if m not in pair]:
            del section[model]
    config["workflow"].update(
        grpo=["grpo_n8"], pair_methods=["graft"], replay=False, ablations=[], main_seeds=[0], other_seeds=[0]
    )
    config["eval"]["selection_runs"] = 0  # re-evaluation jobs run through Slurm in the smoke config's CI case
    config["workflow"]["eval_checkpoints_per_job"] = None  # one evaluation job per cell (the CPU tests split them)
    args.out.write_text(yaml.safe_dump(config, sort_keys=False))


if __name__ == "__main__":
    main()
