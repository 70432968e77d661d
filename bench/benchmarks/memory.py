"""Peak memory of scoring and of one update micro-batch at the paper's shapes, on the CPU.

Models of the paper's three architectures (SmolLM3, Qwen3, Llama for OctoThinker) with their real vocabularies
(128,256 / 151,936 / 128,256), two layers and a small width (hidden 64), so that the logits, which grow with the
vocabulary times the tokens, dominate as they do at scale while a 2-core machine computes them in seconds.

Phases, each in a fresh process (peak resident memory above the process's memory before the phase, read from
/proc/self/status VmHWM after resetting it; float32 throughout):
- score: 16 rows of 2,048 prompt + 4,096 response tokens, no gradient (``score_responses``' forward);
- update: one micro-batch of 36,864 tokens (6 rows of 6,144) with gradient checkpointing, forward and backward of
  the token-mean log-likelihood.
"after" is ``graft.engine.policy.response_logprobs`` at ``train.logits_chunk_mib`` (the default and a sweep);
"before" is the plain formula the package used until the chunking (log_softmax of the model's whole logits),
which at the full shapes needs far more than this machine has, so it is measured on 2 rows of 256 + 768 tokens
and projected to the full shapes by its measured bytes per logit element. The plan's prediction for the same
shapes (graft.planning.memory) stands beside each measurement.

Usage: python bench/benchmarks/memory.py [--arch qwen3 ...] [--threads 2]; writes bench/results/memory.json
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ARCHS = {
    "smollm3": ("SmolLM3Config", "SmolLM3ForCausalLM", 128_256),
    "qwen3": ("Qwen3Config", "Qwen3ForCausalLM", 151_936),
    "octothinker": ("LlamaConfig", "LlamaForCausalLM", 128_256),
}
WIDTH = {"hidden": 64, "intermediate": 256, "layers": 2, "heads": 2, "kv_heads": 1, "head_dim": 32}
FULL = {"score": (16, 2048, 4096), "update": (6, 2048, 4096)}
"""rows, prompt tokens, response tokens: paper.yaml's scoring micro-batch and its 36,864-token update budget."""
REDUCED = (2, 256, 768)
CHUNKS_MIB = (128, 512, 2048)


def _rss(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(field)


def build(arch: str):
    import torch
    import transformers

    config_cls, model_cls, vocab = ARCHS[arch]
    torch.manual_seed(0)
    w = WIDTH
    config = getattr(transformers, config_cls)(
        vocab_size=vocab,
        hidden_size=w["hidden"],
        intermediate_size=w["intermediate"],
        num_hidden_layers=w["layers"],
        num_attention_heads=w["heads"],
        num_key_value_heads=w["kv_heads"],
        head_dim=w["head_dim"],
        max_position_embeddings=8192,
        tie_word_embeddings=True,
    )
    return getattr(transformers, model_cls)(config).eval()


def plain_logprobs(model, prompts, responses):
    """The formula before chunking: log_softmax over the whole [B, L, V] float32 logits."""
    import torch

    from graft.engine.policy import pad_right

    ids, attn = pad_right([p + r for p, r in zip(prompts, responses, strict=True)], 0)
    logits = model(input_ids=ids, attention_mask=attn.long(), use_cache=False).logits[:, :-1].float()
    token_logp = torch.log_softmax(logits, dim=-1).gather(-1, ids[:, 1:].unsqueeze(-1)).squeeze(-1)
    start = len(prompts[0]) - 1
    return token_logp[:, start : start + len(responses[0])]


def worker(arch: str, phase: str, rows: int, prompt: int, response: int, chunk_mib: float | None) -> dict:
    """One measurement in this process; ``chunk_mib`` None: the plain formula."""
    import torch

    from graft.engine.distributed import enable_gradient_checkpointing
    from graft.engine.policy import response_logprobs

    model = build(arch)
    vocab = ARCHS[arch][2]
    g = torch.Generator().manual_seed(1)
    prompts = [torch.randint(1, vocab, (prompt,), generator=g).tolist() for _ in range(rows)]
    responses = [torch.randint(1, vocab, (response,), generator=g).tolist() for _ in range(rows)]
    if phase == "update":
        enable_gradient_checkpointing(model)

    def run():
        if chunk_mib is None:
            return plain_logprobs(model, prompts, responses)
        return response_logprobs(model, prompts, responses, 0, logits_chunk_mib=chunk_mib)[0]

    Path("/proc/self/clear_refs").write_text("5")  # resets VmHWM to the current resident size
    before = _rss("VmRSS")
    start = time.perf_counter()
    if phase == "score":
        with torch.no_grad():
            run()
    else:
        logp = run()
        (-logp.mean()).backward()
    seconds = time.perf_counter() - start
    return {"peak_bytes": _rss("VmHWM") - before, "seconds": round(seconds, 2)}


def measure(arch: str, phase: str, shape: tuple[int, int, int], chunk_mib: float | None, threads: int) -> dict:
    args = [arch, phase, *map(str, shape), "plain" if chunk_mib is None else str(chunk_mib)]
    cmd = [sys.executable, __file__, "--worker", *args, "--threads", str(threads)]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    rows, prompt, response = shape
    result.update(arch=arch, phase=phase, rows=rows, prompt=prompt, response=response, chunk_mib=chunk_mib)
    return result


def predicted(arch: str, phase: str, shape: tuple[int, int, int], chunk_mib: float | None) -> float:
    """The plan's activation + log-prob terms for this measurement (graft.planning.memory), float32 compute."""
    from graft.config import ModelSizes
    from graft.planning.memory import forward_bytes

    w = WIDTH
    sizes = ModelSizes(
        layers=w["layers"],
        hidden=w["hidden"],
        intermediate=w["intermediate"],
        heads=w["heads"],
        kv_heads=w["kv_heads"],
        head_dim=w["head_dim"],
        vocab=ARCHS[arch][2],
        tied=True,
    )
    rows, prompt, response = shape
    grad = phase == "update"
    if chunk_mib is None:
        return float("nan")
    return forward_bytes(sizes, rows * (prompt + response), rows * response, chunk_mib, grad, 4)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arch", nargs="*", default=list(ARCHS), choices=list(ARCHS))
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", type=Path, default=Path(__file__).parents[1] / "results" / "memory.json")
    parser.add_argument("--worker", nargs=6, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        import torch

        torch.set_num_threads(args.threads)
        arch, phase, rows, prompt, response, chunk = args.worker
        chunk_mib = None if chunk == "plain" else float(chunk)
        print(json.dumps(worker(arch, phase, int(rows), int(prompt), int(response), chunk_mib)))
        return

    from graft.config import TrainSpec

    default = TrainSpec.logits_chunk_mib
    cases = []
    for arch in args.arch:
        for phase in ("score", "update"):
            cases.append((arch, phase, REDUCED, None))
            cases.append((arch, phase, REDUCED, default))
            cases.append((arch, phase, FULL[phase], default))
    cases += [("qwen3", "score", FULL["score"], c) for c in CHUNKS_MIB if c != default and "qwen3" in args.arch]
    results = []
    header = f"{'arch':<12} {'phase':<7} {'rows x (prompt + response)':<27} {'chunk MiB':>9} {'peak GiB':>9}"
    header += f" {'plan GiB':>9} {'logits GiB':>10} {'s':>7}"
    print(header)
    for arch, phase, shape, chunk in cases:
        r = measure(arch, phase, shape, chunk, args.threads)
        rows, prompt, response = shape
        r["logits_copy_bytes"] = rows * (prompt + response) * ARCHS[arch][2] * 4
        r["plan_bytes"] = predicted(arch, phase, shape, chunk)
        if chunk is None:
            # bytes per float32 logit element held at the peak, projected to the full shapes
            per_element = r["peak_bytes"] / r["logits_copy_bytes"]
            full_rows, full_prompt, full_response = FULL[phase]
            full_copy = full_rows * (full_prompt + full_response) * ARCHS[arch][2] * 4
            r["copies"] = round(per_element, 2)
            r["projected_full_bytes"] = per_element * full_copy
        results.append(r)
        gib = 2**30
        label = "plain" if chunk is None else f"{chunk:g}"
        print(
            f"{arch:<12} {phase:<7} {f'{rows} x ({prompt} + {response})':<27} {label:>9} "
            f"{r['peak_bytes'] / gib:>9.2f} {r['plan_bytes'] / gib:>9.2f} {r['logits_copy_bytes'] / gib:>10.2f}"
            f" {r['seconds']:>7.1f}",
            flush=True,
        )
        if chunk is None:
            print(
                f"{'':<12} {'':<7} {'projected to the full shape':<27} {'plain':>9} "
                f"{r['projected_full_bytes'] / gib:>9.1f} ({r['copies']} logits copies)",
                flush=True,
            )
    meta = {
        "width": WIDTH,
        "threads": args.threads,
        "dtype": "float32",
        "machine": "CPU, peak RSS above the phase's start",
    }
    args.out.write_text(json.dumps({"settings": meta, "results": results}, indent=1) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
