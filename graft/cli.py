"""The ``graft`` command line. Bad input exits with code 2 and one line on stderr (DESIGN.md section 9)."""

from __future__ import annotations

import argparse
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
    )
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    Trainer(request).run(log=lambda line: print(line, file=sys.stderr, flush=True))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="graft", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    methods = sub.add_parser("methods", help="list the method presets, or print one preset's switches")
    methods.add_argument("name", nargs="?", help="a preset name: print its switches as YAML")
    methods.add_argument("--config", type=Path, help="workflow config whose 'methods:' adds user presets")
    methods.add_argument("--out", type=Path, help="write every resolved preset to this YAML file")
    methods.set_defaults(func=_cmd_methods)

    train = sub.add_parser("train", help="GRPO, co-training or archive replay of one cell")
    train.add_argument("--config", type=Path, required=True, help="the workflow's YAML config")
    train.add_argument("--method", required=True, help="a method preset (graft methods lists them)")
    train.add_argument("--models", required=True, help="A for one model, A,B for a co-trained pair")
    train.add_argument("--seed", type=int, required=True)
    train.add_argument("--out", type=Path, required=True, help="run directory: metrics, trajectories, checkpoints")
    train.add_argument("--steps", type=int, help="override train.steps")
    train.add_argument("--peer-archive", type=Path, help="trajectory directory of the peer's GRPO run (replay)")
    train.add_argument("--resume", action="store_true", help="continue from the last complete checkpoint")
    train.add_argument("--threads", type=int, help="torch CPU threads")
    train.set_defaults(func=_cmd_train)
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
