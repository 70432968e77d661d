"""Helpers that turn the config into target paths; the cell list itself comes from graft.plan."""

import json

from graft.config import config_from_dict
from graft.plan import checkpoint_steps, training_cells

CFG = config_from_dict(config)
R = CFG.results
RUN_CONFIG = f"{R}/config.yaml"
CELLS = {(c.method, c.cell, c.seed): c for c in training_cells(CFG)}
STEPS = checkpoint_steps(CFG)
TOY = CFG.toy is not None
# Training and evaluation of real models run on GPUs: their conda environment takes the CUDA build of torch.
COMPUTE_ENV = "../envs/graft.yaml" if TOY else "../envs/graft-gpu.yaml"
EVAL_IN_TRAIN = CFG.workflow.eval_in_train
EVAL_DIR = f"{R}/eval/{{method}}/{{cell}}/seed{{seed}}"


wildcard_constraints:
    method="[a-z0-9_]+",
    cell="[A-Za-z0-9_]+",
    seed="[0-9]+",
    model="[A-Za-z0-9_]+",


def cell_of(wc):
    return CELLS[(wc.method, wc.cell, int(wc.seed))]


def model_dir(name):
    return CFG.models[name].path


def train_inputs(wc):
    c = cell_of(wc)
    inputs = {
        "config": ancient(RUN_CONFIG),
        "data": CFG.data.train,
        "models": [model_dir(m) for m in c.models],
    }
    if c.peer is not None:
        inputs["peer"] = f"{R}/runs/grpo_n8/{c.peer}/seed{c.seed}/done.json"
    return inputs


def all_eval_outputs():
    """The base model's evaluation per model and one evaluation directory per training cell."""
    files = [f"{R}/eval/base/{m}/seed0/{m}/step_00000.json" for m in CFG.models]
    return files + [
        f"{R}/eval/{c.method}/{c.cell}/seed{c.seed}" for c in CELLS.values()
    ]


def train_settings():
    """What a training cell depends on; a change here (not in comments or reports) reruns training."""
    sections = {
        "train": CFG.train,
        "models": CFG.models,
        "data": CFG.data,
        "reward": CFG.reward,
        "methods": CFG.methods,
        "scale": CFG.scale,
    }
    return json.dumps(sections, default=lambda o: o.__dict__, sort_keys=True)


def train_launcher():
    """`graft`, or torchrun with one process per GPU of the job when the config shards training."""
    n = CFG.scale.processes
    if n == 1:
        return "graft"
    return f"torchrun --standalone --nproc-per-node {n} -m graft.cli"


def eval_settings():
    return json.dumps(
        {"eval": CFG.eval, "reward": CFG.reward, "models": CFG.models},
        default=lambda o: o.__dict__,
        sort_keys=True,
    )


def report_files():
    tables = [
        "table1",
        "table2_ablations",
        "table_stored",
        "table_selection",
        "table_clipping",
    ]
    return {
        "tables": [
            f"{R}/report/tables/{t}.{ext}"
            for t in tables
            for ext in ("md", "csv", "tex")
        ],
        "figures": [
            f"{R}/report/figures/{f}.png"
            for f in (
                "fig1_complementarity",
                "fig3a_score_vs_cost",
                "fig3b_stored_vs_online",
            )
        ],
        "summary": f"{R}/report/summary.md",
    }


def all_targets():
    files = report_files()
    return [f"{R}/methods.yaml", files["summary"], *files["tables"], *files["figures"]]
