"""The design loop of the miniature, on validation prompts only: the test families are never read.

A candidate toy world is a copy of the config with other ``toy:`` or ``train:`` settings. This script builds it
into a directory of its own, probes it, trains GRPO n=8 and GRAFT cells of one pair and scores every checkpoint
on each family's validation problems, so that a design is chosen on validation prompts of
development toy seeds, then confirmed on toy seeds that played no part.

  build    the toy world (``--reuse DIR``: copy data and the models whose settings are unchanged from DIR)
  probe    per family at T = 1 with n = 8: success and all-fail share of each model; per direction:
           candidates, selected after balancing, gate pass rate of correct and of wrong peer responses
  facts    in a world with wrong digit facts (toy.models.<m>.wrong_facts): per model at T = 1 with n = 8, success
           and all-fail prompts among the validation prompts that use none of the pair's wrong facts, only its
           own, only the peer's, or both; and how many of its all-fail prompts the peer solves
  cells    GRPO n=8 of both models and each pair method of --methods (default: GRAFT) on the pair, for each
           --seeds; appends one JSON row per (method, model, seed) to DIR/cells.jsonl with the validation score
           of every checkpoint
  exposure per run of --methods (default: GRAFT) and receiver: the peer's correct responses on Eq. 4 candidate
           prompts (receiver 0 of n, peer 1 to n-1; before balancing and the gate), per family, and, in a world
           with wrong digit facts, on prompts that use each of the receiver's wrong facts: how many updates could
           carry each skill
  summary  each method - GRPO n=8 at the final checkpoint per model, mean over the seeds present
  transfers  per exchange cell and receiver, summed over the run: its all-fail prompts, how many of them the peer
           solved at least once (the paper's Figure 1) and all n times (not Eq. 4 candidates; "-" under SGT's
           rule), the candidates, the prompts selected after balancing, the peer responses admitted and the correct
           among them

Usage: python bench/miniature_dev.py build|probe|facts|cells|exposure|summary|transfers --config C --out DIR [--pair P1]
           [--seeds 0 1] [--methods graft hacpo sgt graft_no_gate]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import yaml

from graft.methods import get_method
from graft.results import RunDir, parse_step
from graft.toy.task import DEFAULT_FAMILIES


def world_families(cfg: dict) -> list[str]:
    """The task families of a config's toy world (the ``toy.families`` default when it names none)."""
    return cfg["toy"].get("families") or list(DEFAULT_FAMILIES)


def dev_config(config: Path, out: Path) -> Path:
    """The config with results in ``out`` and the per-family validation files as its benchmarks."""
    cfg = yaml.safe_load(config.read_text())
    cfg["results"] = str(out.resolve())
    cfg["eval"]["benchmarks"] = {f: str((out / "validation" / f"{f}.jsonl").resolve()) for f in world_families(cfg)}
    cfg["eval"].pop("validation", None)
    path = out / "dev_config.yaml"
    out.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path


def split_validation(out: Path) -> None:
    rows = [json.loads(line) for line in (out / "toy/data/validation.jsonl").read_text().splitlines() if line]
    (out / "validation").mkdir(exist_ok=True)
    for family in world_families(yaml.safe_load((out / "dev_config.yaml").read_text())):
        chosen = [r for r in rows if r["family"] == family]
        (out / "validation" / f"{family}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in chosen))


def build(args) -> None:
    dev = dev_config(args.config, args.out)
    spec = yaml.safe_load(dev.read_text())["toy"]
    todo = list(spec["models"])
    if args.reuse:
        old = yaml.safe_load((args.reuse / "dev_config.yaml").read_text())["toy"]
        same_data = {k: v for k, v in old.items() if k != "models"} == {k: v for k, v in spec.items() if k != "models"}
        if not same_data:
            sys.exit("--reuse: the toy task settings differ, so the data (and every model) must be rebuilt")
        shutil.copytree(args.reuse / "toy/data", args.out / "toy/data", dirs_exist_ok=True)
        for name in [m for m in todo if old["models"].get(m) == spec["models"][m]]:
            shutil.copytree(args.reuse / "toy/models" / name, args.out / "toy/models" / name, dirs_exist_ok=True)
            todo.remove(name)
    else:
        _graft("toy", "data", "--config", dev, "--out", args.out / "toy")
    for name in todo:
        start = time.time()
        _graft("toy", "model", "--config", dev, "--name", name, "--out", args.out / "toy", "--threads", args.threads)
        print(f"built {name} in {time.time() - start:.0f} s")
    split_validation(args.out)


def probe(args) -> None:
    import torch

    from graft.config import load_config
    from graft.eval.complementarity import complementarity

    torch.set_num_threads(2)
    cfg = load_config(dev_config(args.config, args.out))
    split_validation(args.out)
    pair = list(cfg.pairs[args.pair])
    families = list(cfg.eval.benchmarks)
    files = [args.out / "validation" / f"{f}.jsonl" for f in families]
    report = complementarity(cfg, pair, files, prompts=None, n=8, seed=0, delta=0.8)
    for name in pair:
        cells = [f"{f} {100 * report['accuracy_by_set'][f][name]:.0f}" for f in families]
        print(f"{name}: success at T=1 (%): " + ", ".join(cells))
    for direction, d in report["directions"].items():
        print(
            f"{direction}: all-fail {d['all_fail']}, candidates {d['candidates']}, selected "
            f"{d['selected_after_balancing']}, gate pass correct {d['gate_pass_rate_correct']}, "
            f"wrong {d['gate_pass_rate_incorrect']}"
        )
    (args.out / f"probe_{args.pair}.json").write_text(json.dumps(report, indent=1))


def facts(args) -> None:
    import torch

    from graft.config import load_config
    from graft.engine.policy import load_policy
    from graft.engine.reward import last_boxed
    from graft.engine.rollout import HFRollout
    from graft.toy.build import model_wrong_facts, read_problems
    from graft.toy.task import facts_used

    torch.set_num_threads(2)
    cfg = load_config(dev_config(args.config, args.out))
    pair = list(cfg.pairs[args.pair])
    problems = read_problems(args.out / "toy/data/validation.jsonl")
    uses, solved, n = {}, {}, 8
    for name in pair:
        wrong = model_wrong_facts(name, cfg.toy)
        uses[name] = [bool(facts_used(p, wrong)) for p in problems]
        policy = load_policy(name, cfg.models[name])
        prompts = [policy.encode(policy.prompt_text(p.problem)) for p in problems]
        groups = HFRollout(policy, cfg.train.max_response_tokens, 1.0, 1.0).generate(prompts, n, seed=0)
        solved[name] = [sum(last_boxed(s.text) == p.answer for s in g) for g, p in zip(groups, problems, strict=True)]
    print("model | prompts using: none / own only / peer's only / both: count, success %, all-fail | peer solves")
    for name, peer in (pair, pair[::-1]):
        cells = []
        for own, theirs in ((False, False), (True, False), (False, True), (True, True)):
            chosen = [i for i in range(len(problems)) if (uses[name][i], uses[peer][i]) == (own, theirs)]
            success = 100 * sum(solved[name][i] for i in chosen) / max(n * len(chosen), 1)
            cells.append(f"{len(chosen)}, {success:.0f}%, {sum(solved[name][i] == 0 for i in chosen)}")
        failed = [i for i in range(len(problems)) if solved[name][i] == 0]
        rescued = sum(solved[peer][i] > 0 for i in failed)
        print(f"{name} | " + " / ".join(cells) + f" | {rescued} of {len(failed)} all-fail")


def cells(args) -> None:
    dev = dev_config(args.config, args.out)
    split_validation(args.out)
    pair = yaml.safe_load(dev.read_text())["pairs"][args.pair]
    for seed in args.seeds:
        jobs = [("grpo_n8", [m]) for m in pair] + [(method, pair) for method in args.methods]
        procs = []
        for method, models in jobs:
            run = _run_dir(args.out, method, models, seed)
            if run.done.exists():
                continue
            run.root.parent.mkdir(parents=True, exist_ok=True)
            cmd = ["train", "--config", dev, "--method", method, "--models", ",".join(models), "--seed", str(seed)]
            cmd += ["--out", run.root, "--threads", "1", "--eval-dir", run.root / "eval"]
            with open(run.root.parent / f"seed{seed}.log", "w") as log:  # the child keeps its own descriptor
                procs.append(subprocess.Popen([sys.executable, "-m", "graft.cli", *map(str, cmd)], stderr=log))
            if len(procs) == 2:  # two cores
                _wait(procs)
        _wait(procs)
        for method, models in jobs:
            run = _run_dir(args.out, method, models, seed)
            for model in models:
                row = _row(run, method, model, seed)
                with open(args.out / "cells.jsonl", "a") as f:
                    f.write(json.dumps(row) + "\n")
                scores = " ".join(f"{s}:{v:.1f}" for s, v in row["average"].items())
                print(f"{method} {model} seed {seed}: {scores} | final {row['final_by_family']}")


def _run_dir(out: Path, method: str, models: list[str], seed: int) -> RunDir:
    return RunDir(out / "runs" / method / "_".join(models) / f"seed{seed}")


def _row(run: RunDir, method: str, model: str, seed: int) -> dict:
    evals = sorted((run.root / "eval" / model).glob("step_*.json"), key=lambda p: parse_step(p.name))
    average, final = {}, {}
    for path in evals:
        e = json.loads(path.read_text())
        average[e["step"]] = 100 * e["average"]
        final = {k: round(100 * v["pass@1"], 1) for k, v in e["benchmarks"].items()}
    totals = _run_totals(run, model, ("admitted", "correct_admitted"))
    return {
        "method": method,
        "model": model,
        "seed": seed,
        "average": average,
        "final_by_family": final,
        "admitted": totals["admitted"],
        "admitted_correct": totals["correct_admitted"],
    }


def _run_totals(run: RunDir, model: str, keys: tuple[str, ...]) -> dict[str, int]:
    """Each per-step metric in ``keys`` of ``model``, summed over the run (a step without it counts 0)."""
    metrics = [json.loads(line) for line in run.metrics.read_text().splitlines()]
    return {k: sum(m.get(k) or 0 for m in metrics if m["model"] == model) for k in keys}


def summary(args) -> None:
    rows = [json.loads(line) for line in (args.out / "cells.jsonl").read_text().splitlines()]
    final = {}
    for r in rows:
        final[(r["method"], r["model"], r["seed"])] = list(r["average"].values())[-1]
    methods = sorted({m for (m, _, _) in final} - {"grpo_n8"})
    for model in sorted({r["model"] for r in rows}):
        for method in methods:
            seeds = sorted({s for (m, mo, s) in final if (m, mo) == (method, model) and ("grpo_n8", model, s) in final})
            if not seeds:
                continue
            diffs = [final[(method, model, s)] - final[("grpo_n8", model, s)] for s in seeds]
            grpo = statistics.mean(final[("grpo_n8", model, s)] for s in seeds)
            print(
                f"{model}: GRPO n=8 {grpo:.1f}, {method} - GRPO {statistics.mean(diffs):+.2f} over seeds {seeds} "
                f"({', '.join(f'{d:+.1f}' for d in diffs)})"
            )


_TRANSFER_KEYS = ("all_fail", "peer_solved_all_fail", "candidates", "selected", "admitted", "correct_admitted")


def transfers(args) -> None:
    cfg = yaml.safe_load((args.out / "dev_config.yaml").read_text())
    pair = cfg["pairs"][args.pair]
    print(
        "method | seed | receiver | all-fail | peer solved (%) | peer n/n | candidates | selected | admitted (correct)"
    )
    for method in sorted(d.name for d in (args.out / "runs").iterdir() if d.name != "grpo_n8"):
        # candidates follow Eq. 4 (peer 1..n-1) under every rule but SGT's, whose candidates take n of n too
        eq4 = get_method(method, cfg.get("methods")).select != "any_success"
        for seed in args.seeds:
            run = _run_dir(args.out, method, pair, seed)
            if not run.done.exists():
                continue
            for model in pair:
                t = _run_totals(run, model, _TRANSFER_KEYS)
                solved = t["peer_solved_all_fail"]
                full = solved - t["candidates"] if eq4 else "-"
                share = 100 * solved / max(t["all_fail"], 1)
                print(
                    f"{method} | {seed} | {model} | {t['all_fail']} | {solved} ({share:.0f}) | {full} | "
                    f"{t['candidates']} | {t['selected']} | {t['admitted']} ({t['correct_admitted']})"
                )


def exposure(args) -> None:
    import pandas as pd

    from graft.config import load_config
    from graft.toy.build import model_wrong_facts, read_problems
    from graft.toy.task import facts_used, format_facts

    cfg = load_config(args.out / "dev_config.yaml")
    pair = list(cfg.pairs[args.pair])
    print("method | seed | receiver | candidates | peer correct | by family | by wrong fact, descending")
    problems = {p.id: p for p in read_problems(args.out / "toy/data/train.jsonl")}
    for method in args.methods:
        n = get_method(method, cfg.methods).n
        for seed in args.seeds:
            run = _run_dir(args.out, method, pair, seed)
            if not run.done.exists():
                continue
            solved = {
                m: pd.concat(pd.read_parquet(f) for f in sorted(run.trajectories(m).glob("*.parquet")))
                .groupby(["step", "prompt_id"])
                .reward.sum()
                for m in pair
            }
            for receiver, peer in (pair, pair[::-1]):
                both = pd.concat([solved[receiver].rename("own"), solved[peer].rename("peer")], axis=1).dropna()
                cand = both[(both.own == 0) & (both.peer > 0) & (both.peer < n)].reset_index()
                by_family, by_fact = {}, {}
                wrong = model_wrong_facts(receiver, cfg.toy)
                uses = {pid: facts_used(problems[pid], wrong) for pid in set(cand.prompt_id)} if wrong else {}
                for pid, correct in zip(cand.prompt_id, cand.peer, strict=True):
                    family = problems[pid].family
                    by_family[family] = by_family.get(family, 0) + int(correct)
                    for fact in uses.get(pid, []):
                        by_fact[fact] = by_fact.get(fact, 0) + int(correct)
                families = ", ".join(f"{f} {c}" for f, c in sorted(by_family.items(), key=lambda x: -x[1]))
                line = f"{method} | {seed} | {receiver} | {len(cand)} | {int(cand.peer.sum())} | {families}"
                if wrong:
                    counts = sorted((by_fact.get(f, 0) for f in format_facts(wrong)), reverse=True)
                    line += f" | {' '.join(map(str, counts))}"
                print(line)


def _wait(procs: list) -> None:
    for p in procs:
        if p.wait() != 0:
            sys.exit(f"a training run failed (exit {p.returncode}); see its log beside the run")
    procs.clear()


def _graft(*args) -> None:
    subprocess.run([sys.executable, "-m", "graft.cli", *map(str, args)], check=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = {
        "build": build,
        "probe": probe,
        "facts": facts,
        "cells": cells,
        "exposure": exposure,
        "summary": summary,
        "transfers": transfers,
    }
    parser.add_argument("command", choices=list(commands))
    parser.add_argument("--config", type=Path, default=Path("config/config.yaml"))
    parser.add_argument("--out", type=Path, required=True, help="the candidate world's directory")
    parser.add_argument("--reuse", type=Path, help="build: a world whose data and unchanged models to copy")
    parser.add_argument("--pair", default="P1")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--methods", nargs="+", default=["graft"], help="cells: the pair methods beside GRPO n=8")
    parser.add_argument("--threads", default="2", help="build: threads per warm-up (1: two worlds at once)")
    args = parser.parse_args()
    commands[args.command](args)


if __name__ == "__main__":
    main()
