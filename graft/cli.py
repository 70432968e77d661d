"""The ``graft`` command line. Bad input exits with code 2 and one line on stderr (DESIGN.md section 9)."""

from __future__ import annotations

import argparse
import functools
import json
import sys
from pathlib import Path

import yaml

from graft.config import read_yaml
from graft.errors import ConfigError
from graft.methods import PRESETS, get_method


def _write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    tmp.replace(path)


def _cmd_methods(args: argparse.Namespace) -> int:
    custom = (read_yaml(args.config).get("methods") or {}) if args.config else {}
    if args.name:
        method = get_method(args.name, custom)
        print(yaml.safe_dump({args.name: method.to_dict()}, sort_keys=False), end="")
        return 0
    if args.out:
        # Resolving every preset validates the config's user presets before any compute.
        resolved = {name: get_method(name, custom).to_dict() for name in [*PRESETS, *custom]}
        _write_atomic(args.out, yaml.safe_dump(resolved, sort_keys=False))
        return 0
    width = max(len(name) for name in PRESETS)
    print(f"{'preset':<{width}}  table  label")
    for name, preset in PRESETS.items():
        print(f"{name:<{width}}  {preset.table:<5}  {preset.label}")
    return 0


def _cmd_train(args: argparse.Namespace) -> int:
    from graft.config import load_config
    from graft.trainer import Trainer, TrainRequest

    config = load_config(args.config)
    request = TrainRequest(
        config=config,
        method=get_method(args.method, config.methods),
        models=[m.strip() for m in args.models.split(",") if m.strip()],
        seed=args.seed,
        out=args.out,
        steps=args.steps if args.steps is not None else config.train.steps,
        peer_archive=args.peer_archive,
        resume=args.resume,
        eval_dir=args.eval_dir,
    )
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    from graft.distributed import close_world, init_world

    world = init_world()
    try:
        Trainer(request, world).run(log=lambda fields: _log_event("step", **fields))
    finally:
        close_world(world)
    return 0


def _log_event(event: str, **fields) -> None:
    """Progress as JSON Lines on stderr: a machine can read it and a person can follow it."""
    print(json.dumps({"event": event, **fields}), file=sys.stderr, flush=True)


def _log_warmup(model: str, step: int, loss: float) -> None:
    _log_event("warmup", model=model, step=step, loss=round(loss, 4))


def _toy_root(config, out: Path | None) -> Path:
    return out if out is not None else Path(config.results) / "toy"


def _require_toy(config):
    if config.toy is None:
        raise ConfigError("toy: this config has no 'toy:' section to build from")
    return config.toy


def _cmd_toy(args: argparse.Namespace) -> int:
    from graft.config import load_config
    from graft.toy.build import build_toy_model, read_problems, write_data

    config = load_config(args.config)
    toy = _require_toy(config)
    root = _toy_root(config, args.out)
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    summary: dict = {}
    if args.toy_command in ("data", "build"):
        summary["data"] = write_data(toy, root / "data")
        _log_event("toy_data", **summary["data"])
    if args.toy_command in ("model", "build"):
        names = [args.name] if args.toy_command == "model" else list(toy.models)
        for name in names:
            if name not in toy.models:
                raise ConfigError(f"--name: unknown toy model {name!r}; toy models: {', '.join(toy.models)}")
        warmup_file = root / "data" / "warmup.jsonl"
        if not warmup_file.is_file():
            raise ConfigError(f"toy model: {str(warmup_file)!r} is missing; run 'graft toy data' first")
        warmup = read_problems(warmup_file)
        for name in names:
            progress = functools.partial(_log_warmup, name)
            info = build_toy_model(
                name, toy.models[name], config.models[name], warmup, root / "models" / name, toy.seed, progress
            )
            summary[name] = info
            _log_event("toy_model", **info)
    if args.summary:
        _write_atomic(args.summary, json.dumps(summary, indent=2) + "\n")
    return 0


def _cmd_complementarity(args: argparse.Namespace) -> int:
    from graft.complementarity import analyse
    from graft.config import load_config
    from graft.data import load_problems
    from graft.policy import check_model_dir, load_policy
    from graft.reward import Grader

    config = load_config(args.config)
    names = [m.strip() for m in args.models.split(",")]
    if len(names) != 2 or len(set(names)) != 2:
        raise ConfigError(f"--models: expected two different models A,B, got {args.models!r}")
    for name in names:
        if name not in config.models:
            raise ConfigError(f"--models: unknown model {name!r}; models: {', '.join(config.models)}")
        check_model_dir(config.models[name].path, f"models.{name}.path")
    files = args.data or [Path(config.data.validation or config.data.train)]
    problems, sets = [], []
    for file in files:
        loaded = load_problems(file, "--data")[: args.prompts or None]
        problems += loaded
        sets += [file.stem] * len(loaded)
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    policies = [load_policy(name, config.models[name]) for name in names]
    with Grader(config.reward.kind, config.reward.timeout, config.reward.workers) as grader:
        report = analyse(
            policies,
            problems,
            grader,
            args.n,
            args.seed,
            config.train.max_response_tokens,
            config.train.temperature,
            config.train.top_p,
            args.delta,
            sets,
        )
    report["data"] = [str(f) for f in files]
    text = json.dumps(report, indent=2)
    if args.out:
        _write_atomic(args.out, text + "\n")
    print(text)
    return 0


def _cmd_evaluate(args: argparse.Namespace) -> int:
    from graft.config import load_config
    from graft.evaluate import checkpoint_step, evaluate_to_file, vllm_evaluator
    from graft.policy import check_model_dir, load_policy
    from graft.reward import Grader

    config = load_config(args.config)
    if config.eval is None:
        raise ConfigError("eval: this config has no 'eval:' section naming the benchmarks")
    if (args.checkpoint is None) == (args.run is None):
        raise ConfigError("evaluate: give either --checkpoint DIR with --model and --out, or --run DIR with --out-dir")
    if args.checkpoint is not None:
        if args.out is None or args.model is None:
            raise ConfigError("evaluate: --checkpoint needs --model and --out")
        jobs = [(args.model, check_model_dir(args.checkpoint, "--checkpoint"), args.out)]
    else:
        if args.out_dir is None:
            raise ConfigError("--out-dir: required with --run")
        run_meta = args.run / "run.json"
        if not run_meta.is_file():
            raise ConfigError(f"--run: {str(args.run)!r} is not a training run (no run.json)")
        models = [args.model] if args.model else json.loads(run_meta.read_text())["models"]
        jobs = []
        for model in models:
            found = sorted((args.run / "checkpoints").glob(f"step_*/{model}"))
            if not found:
                raise ConfigError(f"--run: {str(args.run)!r} has no checkpoints of model {model!r}")
            jobs += [
                (model, check_model_dir(c, "--run"), args.out_dir / model / f"{c.parent.name}.json") for c in found
            ]
    for model, _, _ in jobs:
        if model not in config.models:
            raise ConfigError(f"--model: unknown model {model!r}; models: {', '.join(config.models)}")
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    if config.scale.rollout == "vllm":
        from graft.rollout_vllm import check_available

        check_available()
    engines = {}  # one vLLM engine per model, reloaded per checkpoint
    with Grader(config.reward.kind, config.reward.timeout, config.reward.workers) as grader:
        for model, checkpoint, out in jobs:
            policy = load_policy(model, config.models[model], path=checkpoint)
            rollout = None
            if config.scale.rollout == "vllm":
                if model in engines:
                    engines[model].load_weights(policy.model.state_dict())
                else:
                    engines[model] = vllm_evaluator(config, model, checkpoint)
                rollout = engines[model]
            elif torch.cuda.is_available():
                policy.model.to("cuda")
            step = checkpoint_step(checkpoint)
            result = evaluate_to_file(config, policy, checkpoint, out, grader, step, args.seed, rollout)
            _log_event("evaluate", model=model, step=step, average=round(result["average"], 4))
    return 0


def _cmd_report(args: argparse.Namespace) -> int:
    from graft.config import load_config
    from graft.figures import figure1, figure3a, figure3b
    from graft.report import ReportContext, collect, table1, table2, table_clipping, table_selection, table_stored

    config = load_config(args.config)
    results = args.results or Path(config.results)
    if not results.is_dir():
        raise ConfigError(f"--results: no such directory {str(results)!r}")
    benchmarks = list(config.eval.benchmarks) if config.eval else []
    ctx = ReportContext(
        collect(results),
        list(config.models),
        config.pairs,
        config.report.paper_models,
        benchmarks,
        config.report.selection,
    )
    seeds = sorted(set(config.workflow.main_seeds) | set(config.workflow.other_seeds))
    tables = [table1(ctx), table2(ctx), table_stored(ctx), table_selection(ctx), table_clipping(ctx, results, seeds)]
    out = args.out
    summary = []
    for table in tables:
        if table is not None:
            table.write(out / "tables")
            summary.append(table.markdown())
    seed = config.workflow.main_seeds[0]
    figure1(ctx, results, seed, out / "figures" / "fig1_complementarity.png")
    figure3a(ctx, results, seed, out / "figures" / "fig3a_score_vs_cost.png")
    figure3b(ctx, out / "figures" / "fig3b_stored_vs_online.png")
    header = f"Checkpoint selection: {config.report.selection}; scores are pass@1 (%), mean ± std over seeds.\n\n"
    _write_atomic(out / "summary.md", header + "\n".join(summary))
    _log_event("report", runs=len(ctx.runs), out=str(out))
    return 0


def _cmd_fetch(args: argparse.Namespace) -> int:
    from graft.fetch import fetch_dataset, fetch_model

    path = fetch_model(args.hub_id, args.out) if args.fetch_command == "model" else fetch_dataset(args.name, args.out)
    _log_event("fetched", path=str(path))
    return 0


def _cmd_plan(args: argparse.Namespace) -> int:
    from collections import Counter

    from graft.config import load_config
    from graft.plan import checkpoint_steps, estimate_gpu_hours, training_cells

    config = load_config(args.config)
    cells = training_cells(config)
    by_method = Counter(c.method for c in cells)
    evaluations = sum(len(c.models) for c in cells) * len(checkpoint_steps(config)) + len(config.models)
    print(f"config {args.config}: {len(cells)} training cells, {evaluations} checkpoint evaluations")
    print(f"{'method':<30} {'cells':>5}")
    for method, count in by_method.items():
        print(f"{method:<30} {count:>5}")
    hours = estimate_gpu_hours(config, cells)
    if hours:
        print(
            f"estimated training GPU-hours: {hours:,.0f} (workflow.gpu_hours_per_step = "
            f"{config.workflow.gpu_hours_per_step} per n=8 model-step)"
        )
    else:
        print("estimated training GPU-hours: 0 (a CPU configuration; set workflow.gpu_hours_per_step to estimate)")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="graft", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    methods = sub.add_parser("methods", help="list the method presets, or print one preset's switches")
    methods.add_argument("name", nargs="?", help="a preset name: print its switches as YAML")
    methods.add_argument("--config", type=Path, help="workflow config whose 'methods:' adds user presets")
    methods.add_argument("--out", type=Path, help="write every resolved preset to this YAML file")
    methods.set_defaults(func=_cmd_methods)

    train = sub.add_parser(
        "train",
        help="GRPO, co-training or archive replay of one cell",
        description="GRPO, co-training or archive replay of one cell. Under torchrun (torchrun --nproc-per-node N "
        "-m graft.cli train ...) both models are sharded over the N processes (config scale.processes).",
    )
    train.add_argument("--config", type=Path, required=True, help="the workflow's YAML config")
    train.add_argument("--method", required=True, help="a method preset (graft methods lists them)")
    train.add_argument("--models", required=True, help="A for one model, A,B for a co-trained pair")
    train.add_argument("--seed", type=int, required=True)
    train.add_argument("--out", type=Path, required=True, help="run directory: metrics, trajectories, checkpoints")
    train.add_argument("--steps", type=int, help="override train.steps")
    train.add_argument("--peer-archive", type=Path, help="trajectory directory of the peer's GRPO run (replay)")
    train.add_argument("--resume", action="store_true", help="continue from the last complete checkpoint")
    train.add_argument("--threads", type=int, help="torch CPU threads")
    train.add_argument("--eval-dir", type=Path, help="evaluate each checkpoint as it is saved, into this directory")
    train.set_defaults(func=_cmd_train)

    toy = sub.add_parser("toy", help="build the embedded default's toy world")
    toy_sub = toy.add_subparsers(dest="toy_command", required=True)
    for name, text in (
        ("data", "the task's splits"),
        ("model", "one warmed-up model"),
        ("build", "data and every model"),
    ):
        cmd = toy_sub.add_parser(name, help=text)
        cmd.add_argument("--config", type=Path, required=True)
        cmd.add_argument("--out", type=Path, help="toy root (default: <results>/toy)")
        cmd.add_argument("--summary", type=Path, help="write a JSON summary here")
        cmd.add_argument("--threads", type=int, help="torch CPU threads")
        if name == "model":
            cmd.add_argument("--name", required=True, help="which toy model")
        cmd.set_defaults(func=_cmd_toy)

    ev = sub.add_parser("evaluate", help="pass@1 of one checkpoint on the configured benchmarks")
    ev.add_argument("--config", type=Path, required=True)
    ev.add_argument("--model", help="which model of the config (default with --run: every model of the run)")
    ev.add_argument("--checkpoint", type=Path, help="a from_pretrained directory (with --out)")
    ev.add_argument("--out", type=Path, help="result JSON for --checkpoint")
    ev.add_argument("--run", type=Path, help="a training run: evaluate each of its checkpoints (with --out-dir)")
    ev.add_argument("--out-dir", type=Path, help="<model>/step_NNNNN.json per checkpoint of --run")
    ev.add_argument("--seed", type=int, default=0, help="sampling seed (one per evaluation repeat)")
    ev.add_argument("--threads", type=int)
    ev.set_defaults(func=_cmd_evaluate)

    plan = sub.add_parser("plan", help="cells, evaluations and estimated GPU-hours of a config, before submitting")
    plan.add_argument("--config", type=Path, required=True)
    plan.set_defaults(func=_cmd_plan)

    rep = sub.add_parser("report", help="tables (Markdown, CSV, LaTeX) and figures (PNG) from a results tree")
    rep.add_argument("--config", type=Path, required=True)
    rep.add_argument("--results", type=Path, help="results tree (default: the config's results)")
    rep.add_argument("--out", type=Path, required=True, help="report directory")
    rep.set_defaults(func=_cmd_report)

    fetch = sub.add_parser("fetch", help="download a model snapshot or a dataset from the Hugging Face hub")
    fetch_sub = fetch.add_subparsers(dest="fetch_command", required=True)
    fm = fetch_sub.add_parser("model", help="snapshot a model repository (safetensors only)")
    fm.add_argument("--hub-id", required=True)
    fm.add_argument("--out", type=Path, required=True)
    fm.set_defaults(func=_cmd_fetch)
    fd = fetch_sub.add_parser("dataset", help="a benchmark or math_train, as normalised JSON Lines")
    fd.add_argument("--name", required=True)
    fd.add_argument("--out", type=Path, required=True)
    fd.set_defaults(func=_cmd_fetch)

    comp = sub.add_parser("complementarity", help="Figure 1 analysis and pre-flight check for a model pair")
    comp.add_argument("--config", type=Path, required=True)
    comp.add_argument("--models", required=True, help="A,B")
    comp.add_argument(
        "--data", type=Path, action="append", help="prompt file, repeatable (default: data.validation or data.train)"
    )
    comp.add_argument("--prompts", type=int, help="use the first N prompts of each file")
    comp.add_argument("--n", type=int, default=8, help="samples per prompt and model")
    comp.add_argument("--seed", type=int, default=0)
    comp.add_argument("--delta", type=float, default=0.8, help="compatibility floor")
    comp.add_argument("--out", type=Path, help="write the report as JSON here")
    comp.add_argument("--threads", type=int)
    comp.set_defaults(func=_cmd_complementarity)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except ConfigError as err:
        print(f"graft: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
