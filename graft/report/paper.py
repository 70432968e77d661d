"""The paper's reported five-benchmark averages (arXiv 2609.37868), printed beside ours in every report.

Keys: (paper model, method preset, peer paper model or None). Paper models: "smollm3", "qwen3", "octothinker".
Values are the "Avg." columns: Table 1 (co-training and GRPO baselines), Table 2a/2b and Table 7 (Pair 1
ablations, the delta sweep), and the stored-trajectory results (Figure 3b, Appendix E).
"""

from __future__ import annotations

import functools

PAPER_MODELS: dict[str, str] = {
    "smollm3": "SmolLM3-3B-Base",
    "qwen3": "Qwen3-1.7B-Base",
    "octothinker": "OctoThinker-3B-Hybrid-Base",
}

_GRPO = {
    # grpo_n8_ds: "GRPO (n=8) + Dynamic Sampling", Table 5 (Pair 1 models only)
    "smollm3": {"grpo_n8": 32.60, "grpo_n16": 33.38, "grpo_n32": 35.71, "grpo_n8_ds": 34.99},
    "qwen3": {"grpo_n8": 31.20, "grpo_n16": 32.15, "grpo_n32": 32.43, "grpo_n8_ds": 32.59},
    "octothinker": {"grpo_n8": 21.18, "grpo_n16": 22.40, "grpo_n32": 23.39},
}

# (updated model, peer) -> method -> average
_CROSS = {
    ("smollm3", "qwen3"): {"hacpo": 31.51, "sgt": 34.88, "graft": 37.06, "replay": 35.28},
    ("smollm3", "octothinker"): {"hacpo": 28.43, "sgt": 32.07, "graft": 33.26, "replay": 34.66},
    ("qwen3", "smollm3"): {"hacpo": 27.24, "sgt": 31.24, "graft": 33.44, "replay": 33.01},
    ("qwen3", "octothinker"): {"hacpo": 28.42, "sgt": 31.00, "graft": 32.78, "replay": 32.63},
    ("octothinker", "qwen3"): {"hacpo": 20.89, "sgt": 21.93, "graft": 23.47, "replay": 23.08},
    ("octothinker", "smollm3"): {"hacpo": 21.89, "sgt": 22.51, "graft": 22.60, "replay": 21.98},
}

# Pair 1 ablations (Tables 2a, 2b, 7): preset -> (SmolLM3, Qwen3)
_ABLATIONS = {
    "graft_no_gate": (28.70, 30.93),
    "graft_no_floor": (35.17, 29.88),
    "graft_unbalanced": (35.06, 32.96),
    "graft_seq_ratio": (35.21, 32.99),
    "graft_random_prompts": (34.66, 31.86),
    "graft_random_admission": (35.20, 32.35),
    "graft_peer_first": (34.61, 31.73),
    "graft_uniform": (33.49, 32.41),
    "graft_delta07": (34.17, 32.90),
    "graft_delta09": (36.14, 31.90),
    "graft_pooled": (33.07, 30.78),
    "graft_success_only": (29.22, 29.51),
    "graft_success_only_no_floor": (32.14, 29.85),
    "graft_hacpo_update": (28.97, 27.79),
    "graft_sgt_update": (34.08, 31.89),
    "graft_luffy_update": (32.51, 31.41),
}

# Table 4 (Appendix C): mean and sample std over three training runs of the five-benchmark average.
# (updated model, peer or None for GRPO n=8) -> (mean, std)
_TABLE4 = {
    ("smollm3", None): (32.15, 1.48),
    ("qwen3", None): (31.38, 0.16),
    ("octothinker", None): (21.14, 0.22),
    ("smollm3", "qwen3"): (36.12, 0.85),
    ("qwen3", "smollm3"): (33.24, 0.33),
    ("octothinker", "qwen3"): (23.19, 0.24),
    ("qwen3", "octothinker"): (32.37, 0.41),
    ("smollm3", "octothinker"): (33.06, 0.31),
    ("octothinker", "smollm3"): (22.56, 1.07),
}

# GPU-hours to the selected checkpoints of both Pair 1 models (Section 6, Table 5 "Both models / Best ckpt").
GPU_HOURS_PAIR1 = {
    "grpo_n8": 28.6,
    "grpo_n16": 43.1,
    "grpo_n32": 92.0,
    "grpo_n8_ds": 50.8,
    "hacpo": 44.0,
    "sgt": 46.2,
    "graft": 40.9,
    "replay": 23.2,
}


def _rows() -> list[dict]:
    rows = [
        {"model": model, "method": method, "peer": None, "average": value}
        for model, methods in _GRPO.items()
        for method, value in methods.items()
    ]
    rows += [
        {"model": model, "method": method, "peer": peer, "average": value}
        for (model, peer), methods in _CROSS.items()
        for method, value in methods.items()
    ]
    pair1 = (("smollm3", "qwen3"), ("qwen3", "smollm3"))
    rows += [
        {"model": model, "method": method, "peer": peer, "average": values[i]}
        for method, values in _ABLATIONS.items()
        for i, (model, peer) in enumerate(pair1)
    ]
    return rows


@functools.cache
def paper_table():
    """Every five-benchmark average the paper reports as a DataFrame: one row per (paper model, method, peer); the
    peer is None for single-model GRPO runs. Built on first use, so that validating a config (which reads
    ``PAPER_MODELS``) does not import pandas."""
    import pandas as pd

    return pd.DataFrame(_rows())


def paper_average(model: str | None, method: str, peer: str | None = None) -> float | None:
    """The paper's average for (paper model, method[, peer]), or None where the paper reports none. GRPO runs
    have no peer, so a peer given for them is ignored."""
    if model is None:
        return None
    paper = paper_table()
    rows = paper[(paper.model == model) & (paper.method == method)]
    rows = rows[rows.peer.isna() | (rows.peer == peer)]
    return float(rows.average.iloc[0]) if len(rows) else None


def paper_table4(model: str | None, method: str, peer: str | None = None) -> tuple[float, float] | None:
    """The paper's Table 4 (mean, sample std over three training runs) for GRPO n=8 or GRAFT; None elsewhere."""
    if model is None or method not in ("grpo_n8", "graft"):
        return None
    return _TABLE4.get((model, None if method == "grpo_n8" else peer))
