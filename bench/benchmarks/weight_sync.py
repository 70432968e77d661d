"""The rollout engines' weight sync for a model of Qwen3-1.7B's shapes (random weights), before and after streaming.

before: every process gathers the whole model in float32, copies it to the CPU in the engine's dtype, bf16, and
writes its own safetensors file (a tied embedding under both names) for its engines, which load it whole;
after: graft.engine.weight_sync.node_file (one tensor gathered at a time, each tensor once, one file per node in
/dev/shm, written by the node's first process), which each engine reads tensor by tensor, memory-mapped
(graft.engine.weight_sync.read_weights).

Measured in one process on the CPU (no gather to do, so the seconds are the copy and the write; on a GPU node the
gathers add NCCL time, the same in both): seconds, bytes of the file, and the peak resident memory the sync adds.
Bytes per node and step are the file times the processes that write one (config/paper.yaml: 4 processes per node,
each writing a file before; one after), projected to SmolLM3-3B by its parameter count (graft.planning.memory).

Usage: python bench/benchmarks/weight_sync.py [--threads 2]; writes bench/results/weight_sync.json
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file
from transformers import Qwen3Config, Qwen3ForCausalLM

from graft.config import ModelSizes
from graft.engine.distributed import SINGLE
from graft.engine.weight_sync import WeightStream, node_file, read_weights, sync_bytes, sync_directory
from graft.planning.memory import parameters

QWEN3_17B = ModelSizes(layers=28, hidden=2048, intermediate=6144, heads=16, kv_heads=8, head_dim=128, vocab=151936)
SMOLLM3_3B = ModelSizes(layers=36, hidden=2048, intermediate=11008, heads=16, kv_heads=4, head_dim=128, vocab=128256)
PROCESSES_PER_NODE = 4


def _hwm() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("VmHWM")


def _rss() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("VmRSS")


def build() -> torch.nn.Module:
    s = QWEN3_17B
    config = Qwen3Config(
        vocab_size=s.vocab,
        hidden_size=s.hidden,
        intermediate_size=s.intermediate,
        num_hidden_layers=s.layers,
        num_attention_heads=s.heads,
        num_key_value_heads=s.kv_heads,
        head_dim=s.head_dim,
        tie_word_embeddings=True,
    )
    with torch.device("meta"):
        model = Qwen3ForCausalLM(config)
    model.to_empty(device="cpu")
    model.tie_weights()  # to_empty gives the output projection storage of its own
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0, 0.02, generator=g)
    return model


def before(model: torch.nn.Module, path: Path) -> None:
    """The whole model gathered (here: already whole), copied to the CPU in bf16, one file per process."""
    named, seen = {}, set()
    for name, tensor in model.state_dict().items():
        copy = tensor.detach().to("cpu", torch.bfloat16).contiguous()
        named[name] = copy.clone() if copy.data_ptr() in seen else copy
        seen.add(copy.data_ptr())
    save_file(named, str(path))


def _read(what: str, path: Path) -> float:
    """Seconds of one engine's read of the file, every tensor touched as a load does: whole (before) or tensor by
    tensor (after). Both map the file; neither copies it into the process's own memory."""
    start = time.perf_counter()
    if what == "before":
        for tensor in load_file(path).values():
            tensor.sum()
    else:
        for _, tensor in read_weights([path]):
            tensor.sum()
    return time.perf_counter() - start


def measure(what: str, model: torch.nn.Module, directory: Path) -> dict:
    Path("/proc/self/clear_refs").write_text("5")
    start_rss = _rss()
    start = time.perf_counter()
    if what == "before":
        path = directory / "weights.safetensors"
        before(model, path)
        write_s, size, peak = time.perf_counter() - start, path.stat().st_size, _hwm() - start_rss
        read_s = _read(what, path)
        path.unlink()
    else:
        with node_file(WeightStream(model), SINGLE, torch.bfloat16, directory) as path:
            write_s, size, peak = time.perf_counter() - start, path.stat().st_size, _hwm() - start_rss
            read_s = _read(what, path)
    files_per_node = PROCESSES_PER_NODE if what == "before" else 1
    return {
        "seconds": round(write_s, 2),
        "file_bytes": size,
        "bytes_per_node_step": size * files_per_node,
        "peak_added_bytes": peak,
        "read_seconds": round(read_s, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--dir", type=Path, default=None, help="where the files are written (default: /dev/shm)")
    parser.add_argument("--out", type=Path, default=Path(__file__).parents[1] / "results" / "weight_sync.json")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    model = build()
    where = args.dir or sync_directory(sync_bytes(WeightStream(model), torch.bfloat16), None)
    directory = Path(tempfile.mkdtemp(dir=where))
    scale = parameters(SMOLLM3_3B) / parameters(QWEN3_17B)
    rows = {}
    header = f"{'sync':<8} {'s':>7} {'file GB':>8} {'GB/node/step':>13} {'peak added GB':>14}"
    print(header + f" {'read s':>7} {'SmolLM3-3B GB/node/step':>24}")
    for what in ("before", "after"):
        r = measure(what, model, directory)
        r["smollm3_bytes_per_node_step"] = r["bytes_per_node_step"] * scale
        r["smollm3_seconds"] = r["seconds"] * scale
        rows[what] = r
        print(
            f"{what:<8} {r['seconds']:>7.1f} {r['file_bytes'] / 1e9:>8.2f} {r['bytes_per_node_step'] / 1e9:>13.2f}"
            f" {r['peak_added_bytes'] / 1e9:>14.2f} {r['read_seconds']:>7.1f}"
            f" {r['smollm3_bytes_per_node_step'] / 1e9:>24.2f}",
            flush=True,
        )
    os.rmdir(directory)
    settings = {
        "model": "Qwen3-1.7B shapes, random weights, float32 masters, bf16 engine",
        "parameters": parameters(QWEN3_17B),
        "processes_per_node": PROCESSES_PER_NODE,
        "threads": args.threads,
        "smollm3_scale": scale,
        "directory": str(where),
    }
    args.out.write_text(json.dumps({"settings": settings, "results": rows}, indent=1) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
