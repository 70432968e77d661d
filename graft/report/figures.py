"""Figures of the paper from a results tree: Figure 1 (complementarity over training), Figure 3a (score against
compute per method) and Figure 3b (stored vs online gains). PNG files, rendered without a display."""

from __future__ import annotations

import statistics
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from graft.report.load import read_metrics
from graft.report.paper import GPU_HOURS_PAIR1
from graft.report.stats import aggregate
from graft.report.tables import ReportContext
from graft.results import atomic_path, replay_cell


def _save(fig, path: Path) -> Path:
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=120, bbox_inches="tight")
    plt.close(fig)
    return path


def figure1(ctx: ReportContext, results: Path, seed: int, out: Path) -> Path:
    """Fraction of each receiver's all-fail prompts that its peer solved, per GRAFT step, per pair."""
    fig, axes = plt.subplots(1, max(len(ctx.pairs), 1), figsize=(4.2 * max(len(ctx.pairs), 1), 3.2), squeeze=False)
    for ax, (pair, members) in zip(axes[0], ctx.pairs.items(), strict=False):
        rows = read_metrics(results, "graft", pair, seed)
        for receiver in members:
            peer = next(m for m in members if m != receiver)
            points = [
                (r["step"], r["peer_solved_all_fail"] / r["all_fail"])
                for r in rows
                if r["model"] == receiver and r.get("all_fail")
            ]
            if not points:
                continue
            steps, fractions = zip(*points, strict=True)
            line = ax.plot(steps, fractions, marker="o", ms=3, label=f"{peer} solves {receiver}'s all-fail")[0]
            ax.axhline(statistics.fmean(fractions), ls=":", color=line.get_color())
        ax.set_title(f"{pair}: {' / '.join(members)}")
        ax.set_xlabel("training step")
        ax.set_ylabel("fraction of all-fail prompts")
        ax.set_ylim(0, 1)
        if ax.lines:
            ax.legend(fontsize=7)
        else:
            ax.text(0.5, 0.5, "no GRAFT metrics", ha="center", transform=ax.transAxes)
    fig.suptitle("Figure 1: complementary successes during GRAFT co-training", y=1.04)
    return _save(fig, out)


def _cost_to(rows: list[dict], step: int, model: str | None = None) -> float:
    """Hours spent on training steps before ``step`` (GPU-hours when the job had GPUs, else wall hours)."""
    seen, gpu, wall = set(), 0.0, 0.0
    for r in rows:
        if r["step"] < step and (model is None or r["model"] == model) and r["step"] not in seen:
            seen.add(r["step"])
            gpu += r.get("gpu_hours", 0.0)
            wall += r.get("step_time_s", 0.0) / 3600
    return gpu if gpu > 0 else wall


def figure3a(ctx: ReportContext, results: Path, seed: int, out: Path) -> Path:
    """Pair 1: pair-mean score of the selected checkpoints against the cost of obtaining both models."""
    fig, ax = plt.subplots(figsize=(5, 3.6))
    if ctx.pairs:
        pair, (a, b) = next(iter(ctx.pairs.items()))
        points = {}
        for method in ("grpo_n8", "grpo_n16", "grpo_n32"):
            sel = [ctx.runs.get((method, m, seed, m)) for m in (a, b)]
            if all(s is not None and s.select(ctx.rule) for s in sel):
                cost = sum(
                    _cost_to(read_metrics(results, method, m, seed), s.select(ctx.rule).step)
                    for m, s in zip((a, b), sel, strict=True)
                )
                points[method] = (cost, statistics.fmean(s.select(ctx.rule).average for s in sel))
        for method in ("graft", "hacpo", "sgt"):
            sel = [ctx.runs.get((method, pair, seed, m)) for m in (a, b)]
            if all(s is not None and s.select(ctx.rule) for s in sel):
                last = max(s.select(ctx.rule).step for s in sel)  # the joint run up to the later checkpoint
                cost = _cost_to(read_metrics(results, method, pair, seed), last)
                points[method] = (cost, statistics.fmean(s.select(ctx.rule).average for s in sel))
        stored = [ctx.runs.get(("replay", replay_cell(m, p), seed, m)) for m, p in ((a, b), (b, a))]
        if all(s is not None and s.select(ctx.rule) for s in stored):
            cost = sum(
                _cost_to(read_metrics(results, "replay", replay_cell(m, p), seed), s.select(ctx.rule).step)
                for (m, p), s in zip(((a, b), (b, a)), stored, strict=True)
            )
            points["replay"] = (cost, statistics.fmean(s.select(ctx.rule).average for s in stored))
        # tiny CPU runs take minutes, not hours: plot minutes so the axis stays readable
        minutes = bool(points) and max(x for x, _ in points.values()) < 1.0
        if minutes:
            points = {m: (60 * x, y) for m, (x, y) in points.items()}
        ax.set_xlabel(
            "minutes to the selected checkpoints (wall clock)"
            if minutes
            else "hours to the selected checkpoints (GPU-hours; wall hours on CPU)"
        )
        grpo = [points[m] for m in ("grpo_n8", "grpo_n16", "grpo_n32") if m in points]
        if grpo:
            ax.plot(*zip(*grpo, strict=True), ls="--", color="grey", label="GRPO n=8/16/32")
        for method, (x, y) in points.items():
            ax.scatter([x], [y], label=method, zorder=3)
        ax.set_title(f"Figure 3a: {pair} pair-mean score vs cost (seed {seed})")
        paper = ", ".join(f"{m} {h}" for m, h in GPU_HOURS_PAIR1.items())
        fig.text(0.01, -0.04, f"paper, Pair 1 GPU-hours to the selected checkpoints: {paper}", fontsize=7)
    ax.set_ylabel("pair-mean average pass@1 (%)")
    if ax.collections:
        ax.legend(fontsize=7)
    else:
        ax.text(0.5, 0.5, "no runs to plot", ha="center", transform=ax.transAxes)
    return _save(fig, out)


def figure3b(ctx: ReportContext, out: Path) -> Path:
    """Gain over GRPO n=8 of online GRAFT and of stored-trajectory replay, per model block."""
    labels, online, stored = [], [], []
    for model in ctx.models:
        base = aggregate(ctx.runs, "grpo_n8", model, model, ctx.rule).mean
        for peer in ctx.models:
            pair = ctx.pair_of(model, peer) if peer != model else None
            if pair is None:
                continue
            on = aggregate(ctx.runs, "graft", pair, model, ctx.rule).mean
            st = aggregate(ctx.runs, "replay", replay_cell(model, peer), model, ctx.rule).mean
            labels.append(f"{model}\n← {peer}")
            online.append(None if on is None or base is None else on - base)
            stored.append(None if st is None or base is None else st - base)
    fig, ax = plt.subplots(figsize=(max(4, 1.1 * len(labels)), 3.4))
    xs = range(len(labels))
    ax.bar([x - 0.2 for x in xs], [v if v is not None else 0 for v in online], 0.4, label="online GRAFT")
    ax.bar([x + 0.2 for x in xs], [v if v is not None else 0 for v in stored], 0.4, label="stored trajectories")
    for x, (on, st) in enumerate(zip(online, stored, strict=True)):
        for dx, v in ((-0.2, on), (0.2, st)):
            if v is None:
                ax.text(x + dx, 0, "missing", rotation=90, ha="center", va="bottom", fontsize=7)
    ax.axhline(0, color="black", lw=0.8)
    ax.set_xticks(list(xs), labels, fontsize=7)
    ax.set_ylabel("Δ average vs GRPO n=8 (points)")
    ax.set_title("Figure 3b: stored vs online gains")
    ax.legend(fontsize=7)
    return _save(fig, out)
