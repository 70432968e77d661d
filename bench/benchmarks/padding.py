"""Padding in scoring and the update at the paper's length mix, and what ``train.packing`` saves, on the CPU.

The length mix. No published histogram of these three models' responses under the paper's recipe (MATH, 4,096
tokens, n = 8) was found, so the mix is a stated model with its grounds, and the shares are also given for a
shorter and a longer mix. Per prompt a pass rate p ~ Uniform(0, 1) (an assumption: a mean of one half, groups
from all wrong to all right); each of its 8 responses is right with probability p. A right response's length is
log-normal with median 600 tokens (sigma 0.6), a wrong one's three times longer (median 1,800, sigma 0.8):
DeepScaleR's published observation that wrong responses run about three times as long as right ones (Luo et al.,
"DeepScaleR: Surpassing O1-Preview with a 1.5B Model by Scaling RL", 2025). Lengths are cut at the 4,096-token
limit, the cut mass landing on the limit (truncated responses). The prompt, a MATH problem through a chat
template, is log-normal with median 120 tokens (sigma 0.5). Rows arrive in groups, prompt by prompt, as a step's
rollouts do.

1. Padding, counted without a model, at config/paper.yaml's budgets (16 rows and 36,864 tokens a pass, 4
   processes) over steps of 128 prompts x 8: scoring (the old log-probs' recompute, all 1,024 responses) and the
   update (4 minibatches of 256 rows). Before: the plans until ``train.packing`` (scoring's rows strided over the
   processes, the update's balanced by tokens; each process's rows padded in arrival order). After: packed passes
   filled by tokens longest first, rows balanced by tokens. For each: the share of computed tokens that are
   padding, the passes of the busiest process, and the critical path (the sum over passes of the busiest
   process's tokens, which the sharded collectives wait on), at 16 and at 64 rows a pass.
2. CPU time. The probe that first measured the padding's cost: ``score_responses`` on a 2-layer, hidden-1,024
   Qwen3-architecture model with Qwen3's 151,936-token vocabulary, 32 rows of 64 + 128 tokens against 28 of them
   and 4 of 64 + 1,920 (16 rows and 32,768 tokens a pass), padded and packed; on the second batch also the two
   other CPU paths packing could take: transformers' own SDPA over the packed rows (a dense block-diagonal mask,
   its cost the packed length squared) and padded passes of rows sorted by length. Then one process's 16 rows of
   the mix (two prompts' groups) scored and updated (forward and backward with gradient checkpointing), padded
   and packed, on the same body with a 1,024-token vocabulary: the output projection runs over the same response
   positions either way, so its cost at a real vocabulary, measured per response position and printed, adds the
   same seconds to both sides. Each figure is the least of ``--repeats`` rounds, the cases taking turns; the CPU
   seconds (this process's threads together) are the figure to read on a machine shared with other work.

Usage: python bench/benchmarks/padding.py [--threads 2] [--steps 20] [--repeats 2] [--no-time]; writes
bench/results/padding.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

import torch

from graft.engine.batching import pack_micro_batches, plan_passes

LIMIT = 4096
"""config/paper.yaml's train.max_response_tokens."""
GROUP = 8
PROMPTS = 128
PROCESSES = 4
MINIBATCHES = 4
BUDGET = (16, 36_864)
"""config/paper.yaml's train.micro_batch and train.micro_batch_tokens before packing; packed passes are also
counted at 64 rows, its micro_batch since."""
MIXES = {
    "paper": {"right": (600, 0.6), "wrong": (1800, 0.8)},
    "shorter": {"right": (300, 0.6), "wrong": (900, 0.8)},
    "longer": {"right": (1200, 0.6), "wrong": (3600, 0.8)},
}
"""Median tokens and sigma of a right and a wrong response's log-normal length."""
PROMPT = (120, 0.5)


def lognormal(g: torch.Generator, median: float, sigma: float, n: int) -> torch.Tensor:
    return median * torch.exp(sigma * torch.randn(n, generator=g, dtype=torch.float64))


def draw_step(g: torch.Generator, mix: dict, prompts: int = PROMPTS) -> tuple[list[int], list[int]]:
    """(prompt tokens, response tokens) of a step's rows, group by group."""
    prompt_len, response_len = [], []
    for _ in range(prompts):
        p = float(torch.rand(1, generator=g, dtype=torch.float64))
        right = torch.rand(GROUP, generator=g, dtype=torch.float64) < p
        lengths = torch.where(right, lognormal(g, *mix["right"], GROUP), lognormal(g, *mix["wrong"], GROUP))
        prompt = int(lognormal(g, *PROMPT, 1).clamp(20, 2048).round())
        prompt_len += [prompt] * GROUP
        response_len += lengths.round().clamp(1, LIMIT).long().tolist()
    return prompt_len, response_len


def strided_plan(lengths: list[int], processes: int, max_rows: int, max_tokens: int) -> list[list[list[int]]]:
    """Scoring's plan before packing: every ``processes``-th row from the process's rank, padded in that order."""
    plan = [
        pack_micro_batches(list(range(r, len(lengths), processes)), lengths, max_rows, max_tokens)
        for r in range(processes)
    ]
    most = max(len(m) for m in plan)
    return [m + [[] for _ in range(most - len(m))] for m in plan]


def plan_cost(plan: list[list[list[int]]], lengths: list[int], packed: bool) -> dict:
    """Tokens computed by a plan (an empty pass is a one-row pass of row 0), and its critical path."""

    def computed(rows: list[int]) -> int:
        rows = rows or [0]
        return sum(lengths[i] for i in rows) if packed else len(rows) * max(lengths[i] for i in rows)

    per_pass = [[computed(rows) for rows in per_rank] for per_rank in plan]
    return {
        "computed": sum(map(sum, per_pass)),
        "critical": sum(max(col) for col in zip(*per_pass, strict=True)),
        "passes": len(plan[0]),
    }


def add(totals: dict, key: str, cost: dict, real: int) -> None:
    t = totals.setdefault(key, {"real": 0, "computed": 0, "critical": 0, "passes": 0})
    t["real"] += real
    for k in ("computed", "critical", "passes"):
        t[k] += cost[k]


def padding_shares(steps: int, seed: int = 0) -> dict:
    """Part 1: the padding of each phase and plan, summed over ``steps`` drawn steps of each mix."""
    out = {}
    for name, mix in MIXES.items():
        g = torch.Generator().manual_seed(seed)
        totals: dict[str, dict[str, float]] = {}
        stats = {"responses": 0, "response_tokens": 0, "at_limit": 0}

        for _ in range(steps):
            prompts, responses = draw_step(g, mix)
            lengths = [p + r for p, r in zip(prompts, responses, strict=True)]
            stats["responses"] += len(responses)
            stats["response_tokens"] += sum(responses)
            stats["at_limit"] += sum(r == LIMIT for r in responses)
            for rows in (BUDGET[0], 64):
                budget = (rows, BUDGET[1])
                add(
                    totals,
                    f"scoring before, {rows} rows",
                    plan_cost(strided_plan(lengths, PROCESSES, *budget), lengths, packed=False),
                    sum(lengths),
                )
                add(
                    totals,
                    f"scoring after, {rows} rows",
                    plan_cost(plan_passes(lengths, PROCESSES, *budget, True), lengths, packed=True),
                    sum(lengths),
                )
                per_minibatch = len(lengths) // MINIBATCHES
                for m in range(MINIBATCHES):
                    part = lengths[m * per_minibatch : (m + 1) * per_minibatch]
                    for packed, when in ((False, "before"), (True, "after")):
                        plan = plan_passes(part, PROCESSES, *budget, packed)
                        add(totals, f"update {when}, {rows} rows", plan_cost(plan, part, packed), sum(part))
        for t in totals.values():
            t["padding_share"] = round(1 - t["real"] / t["computed"], 4)
            t["critical_over_ideal"] = round(t["critical"] / (t["real"] / PROCESSES), 3)
            t["passes_per_step"] = round(t["passes"] / steps, 1)
        out[name] = {
            "mean_response_tokens": round(stats["response_tokens"] / stats["responses"], 1),
            "share_at_limit": round(stats["at_limit"] / stats["responses"], 4),
            "plans": totals,
        }
    return out


def qwen3(vocab: int):
    from transformers import Qwen3Config, Qwen3ForCausalLM

    torch.manual_seed(0)
    config = Qwen3Config(
        vocab_size=vocab,
        hidden_size=1024,
        intermediate_size=3072,
        num_hidden_layers=2,
        num_attention_heads=16,
        num_key_value_heads=8,
        head_dim=64,
        max_position_embeddings=8192,
        tie_word_embeddings=True,
    )
    return Qwen3ForCausalLM(config).eval()


def policy_of(model):
    from types import SimpleNamespace

    from graft.engine.policy import Policy
    from graft.engine.prompts import PromptFormat

    return Policy("bench", model, SimpleNamespace(pad_token_id=0, eos_token_id=1), PromptFormat())


def random_rows(g: torch.Generator, vocab: int, prompts: list[int], responses: list[int]):
    return (
        [torch.randint(2, vocab, (n,), generator=g).tolist() for n in prompts],
        [torch.randint(2, vocab, (n,), generator=g).tolist() for n in responses],
    )


def timed(fn, repeats: int = 1) -> dict:
    """The least wall and CPU seconds (this process's threads together) of ``repeats`` calls: on a machine
    shared with other work the CPU seconds move far less than the wall seconds."""
    wall, cpu = [], []
    for _ in range(repeats):
        start, start_cpu = time.perf_counter(), time.process_time()
        fn()
        wall.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    return {"wall_s": round(min(wall), 2), "cpu_s": round(min(cpu), 2)}


def least(runs: list[dict]) -> dict:
    return {k: min(r[k] for r in runs) for k in runs[0]}


def alternated(cases: dict, repeats: int) -> dict:
    """Each case's least seconds over ``repeats`` rounds, the cases taking turns within a round, so that a
    stretch of load from other work falls on both sides of a comparison."""
    runs: dict[str, list[dict]] = {name: [] for name in cases}
    for _ in range(repeats):
        for name, fn in cases.items():
            runs[name].append(timed(fn))
            print(f"  {name}: {runs[name][-1]}", flush=True)
    return {name: least(r) for name, r in runs.items()}


def probe_times(repeats: int) -> dict:
    """Part 2a: the issue's probe, padded and packed, and the other two CPU paths on its long batch."""
    from graft.engine.packing import pack_rows
    from graft.engine.policy import pad_right
    from graft.engine.scoring import ScoringSettings, score_responses

    vocab = 151_936
    model = qwen3(vocab)
    policy = policy_of(model)
    g = torch.Generator().manual_seed(1)
    batches = {"32 x 128": [128] * 32, "28 x 128 + 4 x 1,920": [128] * 28 + [1920] * 4}
    rows = {name: random_rows(g, vocab, [64] * len(r), r) for name, r in batches.items()}
    score_responses(policy, [[2] * 8], [[3] * 8], ScoringSettings())  # thread pools and allocator warmed
    cases = {}
    for name, (prompts, responses) in rows.items():
        for packed in (False, True):
            settings = ScoringSettings(micro_batch=16, micro_batch_tokens=32_768, packing=packed)
            cases[f"{name}, {'packed' if packed else 'padded'}"] = lambda p=prompts, r=responses, s=settings: (
                score_responses(policy, p, r, s)
            )
    out = {"tokens": {name: sum(map(len, p)) + sum(map(len, r)) for name, (p, r) in rows.items()}}
    out["seconds"] = alternated(cases, repeats)
    # the other CPU paths, the body alone (the head is the same for all): the long batch's rows
    prompts, responses = rows["28 x 128 + 4 x 1,920"]
    full = [p + r for p, r in zip(prompts, responses, strict=True)]
    ids, inputs = pack_rows(full, torch.device("cpu"))
    order = sorted(range(len(full)), key=lambda i: len(full[i]))
    passes = pack_micro_batches(order, [len(r) for r in full], 16, 32_768)

    def body(implementation: str, **kwargs) -> None:
        model.config._attn_implementation = implementation
        model.model(input_ids=ids, use_cache=False, **kwargs)

    def sorted_padded() -> None:
        model.config._attn_implementation = "sdpa"
        for part in passes:
            part_ids, mask = pad_right([full[i] for i in part], 0)
            model.model(input_ids=part_ids, attention_mask=mask.long(), use_cache=False)

    with torch.no_grad():
        out["body_seconds"] = alternated(
            {
                "packed, attention row by row": lambda: body("graft_rows", **inputs),
                "packed, dense block-diagonal mask": lambda: body("sdpa", position_ids=inputs["position_ids"]),
                "padded, rows sorted by length": sorted_padded,
            },
            1,
        )
    return out


def mix_times(repeats: int) -> dict:
    """Part 2b: one process's 16 rows of the paper's mix, scored and updated, padded and packed."""
    from graft.engine.distributed import enable_gradient_checkpointing
    from graft.engine.logprobs import chunk_positions, chunked_token_logprobs
    from graft.engine.scoring import ScoringSettings, score_responses
    from graft.engine.trajectory import Trajectory
    from graft.methods import get_method
    from graft.train.update import UpdateSettings, minibatch_update

    g = torch.Generator().manual_seed(2)
    prompts, responses = draw_step(g, MIXES["paper"], prompts=2)
    vocab = 1024
    prompt_ids, response_ids = random_rows(g, vocab, prompts, responses)
    lengths = [p + r for p, r in zip(prompts, responses, strict=True)]
    padded_passes = pack_micro_batches(list(range(len(lengths))), lengths, *BUDGET)
    out = {
        "rows": len(prompts),
        "tokens": sum(lengths),
        "response_tokens": sum(responses),
        "padded_tokens": sum(len(p) * max(lengths[i] for i in p) for p in padded_passes),
        "lengths": lengths,
    }
    method = get_method("grpo_n8")
    rows = [
        Trajectory(p, r, [-1.0] * len(r), advantage=1.0 if i % 2 else -1.0)
        for i, (p, r) in enumerate(zip(prompt_ids, response_ids, strict=True))
    ]
    scoring, updates = {}, {}
    for packed in (False, True):
        when = "packed" if packed else "padded"
        model = qwen3(vocab)
        policy = policy_of(model)
        settings = ScoringSettings(micro_batch=BUDGET[0], micro_batch_tokens=BUDGET[1], packing=packed)
        score_responses(policy, [[2] * 8], [[3] * 8], settings)  # warm-up
        scoring[when] = lambda p=policy, s=settings: score_responses(p, prompt_ids, response_ids, s)
        trained = policy_of(qwen3(vocab))
        enable_gradient_checkpointing(trained.model)
        optimizer = torch.optim.AdamW(trained.model.parameters(), lr=1e-6)
        update = UpdateSettings(grad_clip=1.0, micro_batch=BUDGET[0], micro_batch_tokens=BUDGET[1], packing=packed)
        updates[when] = lambda p=trained, o=optimizer, u=update: minibatch_update(method, p, o, rows, settings=u)
    out["scoring_seconds"] = alternated(scoring, repeats)
    out["update_seconds"] = alternated(updates, repeats)
    # the output projection at Qwen3's vocabulary, per response position, without and with gradient
    chunk = chunk_positions(151_936, 512)
    hidden = torch.randn(chunk, 1024)
    weight = torch.randn(151_936, 1024) * 0.02
    targets = torch.randint(0, 151_936, (chunk,))
    with torch.no_grad():
        head_score = timed(lambda: chunked_token_logprobs(hidden, weight, None, targets, 1.0, chunk))
    hidden.requires_grad_()
    weight.requires_grad_()
    head_update = timed(lambda: chunked_token_logprobs(hidden, weight, None, targets, 1.0, chunk).sum().backward())
    out["head_at_151936_for_these_rows"] = {
        "scoring": {k: round(v / chunk * sum(responses), 1) for k, v in head_score.items()},
        "update": {k: round(v / chunk * sum(responses), 1) for k, v in head_update.items()},
    }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--steps", type=int, default=20, help="drawn steps per mix for the padding shares")
    parser.add_argument("--no-time", action="store_true", help="the padding shares only")
    parser.add_argument("--repeats", type=int, default=2, help="rounds of each timing; the least is kept")
    parser.add_argument("--out", type=Path, default=Path(__file__).parents[1] / "results" / "padding.json")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    results = {
        "machine": {
            "cpu": platform.processor() or platform.machine(),
            "threads": args.threads,
            "load_average": os.getloadavg(),
        },
        "budget": {"micro_batch": BUDGET[0], "micro_batch_tokens": BUDGET[1], "processes": PROCESSES},
        "padding": padding_shares(args.steps),
    }
    for name, mix in results["padding"].items():
        print(
            f"mix {name}: mean response {mix['mean_response_tokens']} tokens, {mix['share_at_limit']:.1%} at the limit"
        )
        for plan, t in mix["plans"].items():
            print(
                f"  {plan:<26} padding {t['padding_share']:6.1%}  passes/step {t['passes_per_step']:6.1f}  "
                f"critical path / ideal {t['critical_over_ideal']:.2f}"
            )
    args.out.write_text(json.dumps(results, indent=1) + "\n")
    if not args.no_time:  # each part written as soon as it is measured: a crash keeps the ones before
        for part, measure in (("probe", probe_times), ("mix", mix_times)):
            results[part] = measure(args.repeats)
            results["machine"][f"load_average_after_{part}"] = os.getloadavg()
            args.out.write_text(json.dumps(results, indent=1) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
