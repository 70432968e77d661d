"""The rollout engines' weight sync for a model of Qwen3-1.7B's shapes (random weights): the host's part, the node's
files written to /dev/shm and one engine's read of them, per tensor (the writer before) against bucketed.

per tensor: one file, each tensor cast to the engine's dtype, bf16, on the host and written with a call of its own
(what the writer before did on a GPU node too: its blocking copy off the GPU moved float32 and cast on the host);
bucketed: graft.engine.weight_sync.node_files, a file per thread (``--threads``) written at once, each through
host buckets, a bucket per system call, a host tensor already in bf16 written where it lies.

Each from float32 masters on the CPU (the cast runs on the host: a CPU-only run's sync) and from the model in bf16:
on a GPU node the sync casts each shard before its gather and the bytes reach the host's pinned buckets by DMA, so
the bucketed writer from bf16 is that node's host path, the figure behind ``workflow.sync_gb_per_s``'s default (the
gathers and the device copies are the GPU check's to measure). Read: graft.engine.weight_sync.read_weights,
memory-mapped, every tensor touched (summed) as an engine's load touches it.

Measured in one process (no gather to do): seconds, bytes of the files, and the peak resident memory the write adds;
of ``--repeats`` runs, the writers taking turns, the one with the least write and read together and the median,
since the machine may be shared (its load average is recorded), and the CPU seconds of each part, which the load
does not stretch.

Usage: python bench/benchmarks/weight_sync.py [--threads 2] [--repeats 3]; writes bench/results/weight_sync.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import tempfile
import time
from pathlib import Path

import torch
from transformers import Qwen3Config, Qwen3ForCausalLM

from graft.config import ModelSizes
from graft.engine.distributed import SINGLE
from graft.engine.weight_sync import (
    ALIASES_KEY,
    WeightStream,
    node_files,
    read_weights,
    safetensors_header,
    sync_bytes,
    sync_directory,
)
from graft.planning.memory import parameters

QWEN3_17B = ModelSizes(layers=28, hidden=2048, intermediate=6144, heads=16, kv_heads=8, head_dim=128, vocab=151936)
ENGINE = torch.bfloat16


def _status(key: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(f"{key}:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(key)


def cpu_seconds() -> float:
    """CPU time of this process, every thread's, user and system: the work, which a shared machine's load does not
    stretch as it stretches the seconds that pass."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


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


def per_tensor(model: torch.nn.Module, directory: Path) -> Path:
    """The writer before the buckets: the header, then each tensor cast to bf16 on the host, made contiguous and
    written with a call of its own."""
    weights = WeightStream(model, unique=True)
    header, _ = safetensors_header(weights.entries(), ENGINE, {ALIASES_KEY: json.dumps(weights.aliases())})
    path = directory / "per-tensor.safetensors"
    with open(path, "wb") as f:
        f.write(header)
        for _, tensor in weights.tensors():
            data = tensor.detach().to("cpu", ENGINE).contiguous().reshape(-1)
            f.write(memoryview(data.view(torch.uint8).numpy()))
    return path


def read_seconds(paths: list[Path]) -> tuple[float, float]:
    """One engine's read of the files, every tensor touched: seconds and CPU seconds."""
    start, cpu = time.perf_counter(), cpu_seconds()
    for _, tensor in read_weights(paths):
        tensor.sum()
    return time.perf_counter() - start, cpu_seconds() - cpu


def once(writer: str, model: torch.nn.Module, directory: Path) -> tuple[float, float, int, int, float, float]:
    """Seconds to write and to read, the files' bytes, the peak memory the write adds, CPU seconds of each."""
    Path("/proc/self/clear_refs").write_text("5")  # the peak (VmHWM) from here
    rss = _status("VmRSS")
    start, cpu = time.perf_counter(), cpu_seconds()
    if writer == "per tensor":
        path = per_tensor(model, directory)
        write_s, write_cpu, peak = time.perf_counter() - start, cpu_seconds() - cpu, _status("VmHWM") - rss
        size, (read_s, read_cpu) = path.stat().st_size, read_seconds([path])
        path.unlink()
    else:
        with node_files(WeightStream(model), SINGLE, ENGINE, directory) as paths:
            write_s, write_cpu, peak = time.perf_counter() - start, cpu_seconds() - cpu, _status("VmHWM") - rss
            size, (read_s, read_cpu) = sum(p.stat().st_size for p in paths), read_seconds(paths)
    return write_s, read_s, size, peak, write_cpu, read_cpu


def best(runs: list[tuple[float, float, int, int, float, float]], loads: list[float]) -> dict:
    """The run with the least write and read together, the median of the totals beside it, and the least CPU
    seconds of a write and of a read."""
    write_s, read_s, size, *_ = min(runs, key=lambda r: r[0] + r[1])
    totals = sorted(r[0] + r[1] for r in runs)
    return {
        "write_s": round(write_s, 3),
        "read_s": round(read_s, 3),
        "gb_per_s": round(size / 1e9 / (write_s + read_s), 3),
        "median_gb_per_s": round(size / 1e9 / statistics.median(totals), 3),
        "write_cpu_s": round(min(r[4] for r in runs), 3),
        "read_cpu_s": round(min(r[5] for r in runs), 3),
        "file_bytes": size,
        "peak_added_bytes": max(r[3] for r in runs),
        "write_s_runs": [round(r[0], 3) for r in runs],
        "read_s_runs": [round(r[1], 3) for r in runs],
        "load_average_1min_runs": [round(x, 2) for x in loads],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--dir", type=Path, default=None, help="where the files are written (default: /dev/shm)")
    parser.add_argument("--out", type=Path, default=Path(__file__).parents[1] / "results" / "weight_sync.json")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    model = build()
    where = args.dir or sync_directory(sync_bytes(WeightStream(model), ENGINE), None)
    directory = Path(tempfile.mkdtemp(dir=where))
    rows: dict[str, dict] = {}
    writers = ("per tensor", "bucketed")
    print(
        f"{'from':<9} {'writer':<11} {'write s':>8} {'read s':>7} {'GB/s':>6} {'median':>7} {'CPU s w+r':>10}"
        f" {'peak added GB':>14}"
    )
    for source in ("float32", "bf16"):
        if source == "bf16":
            model.to(ENGINE)  # what a GPU node's host receives: the sync casts before the gather
        runs: dict[str, list] = {w: [] for w in writers}
        loads: dict[str, list] = {w: [] for w in writers}
        for _ in range(args.repeats):  # the writers take turns, so that both meet the same load
            for writer in writers:
                loads[writer].append(os.getloadavg()[0])
                runs[writer].append(once(writer, model, directory))
        for writer in writers:
            r = rows[f"{source}, {writer}"] = best(runs[writer], loads[writer])
            print(
                f"{source:<9} {writer:<11} {r['write_s']:>8.2f} {r['read_s']:>7.2f} {r['gb_per_s']:>6.2f}"
                f" {r['median_gb_per_s']:>7.2f} {r['write_cpu_s']:>5.2f}+{r['read_cpu_s']:<4.2f}"
                f" {r['peak_added_bytes'] / 1e9:>14.2f}",
                flush=True,
            )
    os.rmdir(directory)
    host_path = rows["bf16, bucketed"]["gb_per_s"]
    settings = {
        "model": "Qwen3-1.7B shapes, random weights, float32 masters (then the same in bf16), bf16 engine",
        "parameters": parameters(QWEN3_17B),
        "threads": args.threads,
        "repeats": args.repeats,
        "figures": "the repeat with the least write_s + read_s (the writers in turn); gb_per_s: bytes over that sum",
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "torch": torch.__version__,
        "directory": str(where),
    }
    summary = {
        "host_path_gb_per_s": host_path,
        "host_path": "bf16, bucketed: what a GPU node's host does once the sync casts before the gather",
    }
    args.out.write_text(json.dumps({"settings": settings, "results": rows, "summary": summary}, indent=1) + "\n")
    print(f"host path {host_path:.2f} GB/s; wrote {args.out}")


if __name__ == "__main__":
    main()
