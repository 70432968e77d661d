"""The ``graft`` command line. Bad input exits with code 2 and one line on stderr (DESIGN.md section 9)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import yaml

from graft.errors import ConfigError
from graft.methods import PRESETS, get_method


def _load_yaml(path: Path) -> dict:
    if not path.is_file():
        raise ConfigError(f"--config: no such file {str(path)!r}")
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark else ""
        raise ConfigError(f"--config: {str(path)!r} is not valid YAML{where}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"--config: {str(path)!r} must hold a mapping of settings")
    return data


def _write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    tmp.replace(path)


def _cmd_methods(args: argparse.Namespace) -> int:
    custom = (_load_yaml(args.config).get("methods") or {}) if args.config else {}
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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="graft", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    methods = sub.add_parser("methods", help="list the method presets, or print one preset's switches")
    methods.add_argument("name", nargs="?", help="a preset name: print its switches as YAML")
    methods.add_argument("--config", type=Path, help="workflow config whose 'methods:' adds user presets")
    methods.add_argument("--out", type=Path, help="write every resolved preset to this YAML file")
    methods.set_defaults(func=_cmd_methods)
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
