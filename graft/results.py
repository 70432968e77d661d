"""The results tree, named in one place, and the one way files in it are written (atomically).

```
<results>/config.yaml, methods.yaml
<results>/runs/<method>/<cell>/seed<S>/      a training cell (RunDir)
    run.json, metrics.jsonl, done.json, pruned.json
    checkpoints/step_NNNNN/<model>/          from_pretrained directories (plus resume state in the newest while the
                                             run lasts); manifest.json alone once pruned after the evaluations
    trajectories/<model>/step_NNNNN.parquet  the step records, also the archive that replay reads
<results>/eval/<method>/<cell>/seed<S>/<model>/step_NNNNN.json
<results>/eval/base/<model>/seed0/<model>/step_00000.json
<results>/eval_selected/<method>/<cell>/seed<S>/<model>/selected.json, run_NN.json
                                             the selected checkpoint re-evaluated (eval.selection_runs)
<results>/report/                            tables/, figures/, summary.md
<results>/report_full/                       the same for every cell, where workflow.main_cells gives rule all fewer
```
A cell is a model name, a pair name, or ``<receiver>_from_<peer>`` for archive replay. Every write goes to a
temporary name beside its target and is renamed, so a reader (or a killed writer) never sees half a file; the
temporary names start with a dot or end in ``.tmp`` and no reader here lists them.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from graft.errors import ConfigError
from graft.paths import WriteFailed

TIMING_METRICS = frozenset(
    {"rollout_s", "reward_s", "scoring_s", "recompute_s", "update_s", "step_time_s", "gpu_hours"}
)
"""The fields of a ``metrics.jsonl`` row that the clock measures: they differ between two runs of the same cell,
everything else in the row must not."""
LAYOUT_METRICS = frozenset({"exchange_bytes"})
"""The fields that only the split placement writes (the bytes its groups send each other per step): the same run
placed otherwise has none."""

MANIFEST = "manifest.json"
"""A checkpoint's list of its files with their sizes and sha256, written last; it outlives the checkpoint's models
when they are pruned, so that an evaluation kept beside the run can still be matched to what it evaluated."""

RESUME_STATE = ("optimizer.pt", "sharded")
"""What a checkpoint's model directory holds for a resume only (``resume_state``): pruning removes it once the
run is done, and evaluation does not read it."""


def resume_state(ckpt: Path, model: str) -> tuple[Path, Path]:
    """Where a checkpoint keeps the state a resume needs: one process's ``optimizer.pt`` (with the float32 master
    weights when the model is exported in bfloat16), or the directory of a sharded run's model and optimizer
    shards."""
    optimizer, sharded = RESUME_STATE
    return ckpt / model / optimizer, ckpt / model / sharded


_STEP = re.compile(r"step_(\d{5})(?:\.json|\.parquet)?")


def step_name(step: int) -> str:
    return f"step_{step:05d}"


def parse_step(name: str) -> int | None:
    """The step of a ``step_NNNNN`` name (a checkpoint directory or ``.json``/``.parquet`` file), else None."""
    match = _STEP.fullmatch(Path(name).name)
    return int(match.group(1)) if match else None


def replay_cell(receiver: str, peer: str) -> str:
    """The cell name of ``receiver`` replaying ``peer``'s stored GRPO trajectories."""
    return f"{receiver}_from_{peer}"


@contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path beside ``path`` to write to; on success it replaces ``path``, on error it is gone.
    The temporary keeps the suffix, so writers that infer a format from it (matplotlib, pyarrow) still can."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.stem}.tmp{path.suffix}")
    try:
        yield tmp
        tmp.replace(path)
    finally:
        tmp.unlink(missing_ok=True)


def write_text(path: str | Path, text: str) -> Path:
    with atomic_path(path) as tmp:
        tmp.write_text(text)
    return Path(path)


def temp_dir(path: str | Path) -> Path:
    """Where ``begin_dir`` builds ``path``: ``<path>.tmp`` beside it."""
    return Path(path).with_name(Path(path).name + ".tmp")


def begin_dir(path: str | Path) -> Path:
    """An empty temporary directory ``<path>.tmp`` to fill; ``commit_dir`` then puts it in place of ``path``.
    Two calls rather than a context manager because a sharded run fills it from every process (the others
    find it with ``temp_dir``)."""
    tmp = temp_dir(path)
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    return tmp


def commit_dir(tmp: Path, path: str | Path) -> None:
    """Replace ``path`` by the filled temporary directory of ``begin_dir``, whole."""
    shutil.rmtree(path, ignore_errors=True)
    tmp.rename(path)


@contextmanager
def failed_write_removes(tmp: Path) -> Iterator[None]:
    """Around a library's write into ``tmp`` (a temporary of ``begin_dir`` or ``atomic_path``): a failure removes
    ``tmp`` whole, which would otherwise hold the space of a half-written checkpoint on a full disk, and is raised
    as an OSError naming it (``WriteFailed`` where the library raised another error: torch.save's RuntimeError when
    the disk is full), which the command line tells in one line."""
    try:
        yield
    except OSError:
        _remove(tmp)
        raise
    except Exception as err:
        failed = WriteFailed(tmp, err)  # the free space while the half-written files still hold theirs
        _remove(tmp)
        raise failed from err


def _remove(path: Path) -> None:
    if path.is_dir():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def is_pruned(model_dir: str | Path) -> bool:
    """Whether a checkpoint's model directory was removed after its cell's evaluations (``graft prune``): absent,
    its checkpoint's manifest present."""
    model_dir = Path(model_dir)
    return not model_dir.exists() and (model_dir.parent / MANIFEST).is_file()


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def listed_files(ckpt: Path) -> dict[str, tuple[int, str]]:
    """Each file a checkpoint's manifest lists, relative to the checkpoint, with its size and sha256. A manifest
    that is missing or not one this project wrote is refused in one line naming it."""
    path = ckpt / MANIFEST
    try:
        files = json.loads(path.read_text())["files"]
        return {str(name): (int(want["size"]), str(want["sha256"])) for name, want in files.items()}
    except FileNotFoundError:
        raise ConfigError(f"{str(path)!r}: no such file; a checkpoint's {MANIFEST} is written last") from None
    except (UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError, ValueError, AttributeError) as err:
        raise ConfigError(
            f"{str(path)!r} is unreadable ({type(err).__name__}: {err}); it should be JSON of the form "
            '{"files": {"<model>/<file>": {"size": N, "sha256": "..."}}}'
        ) from None


def damage(ckpt: Path, model: str | None = None) -> str | None:
    """What is wrong with a checkpoint against its manifest (first problem found), or None when intact. Files of
    the resume state that pruning removed on purpose are not damage (a resume asks for those separately).
    ``model``: only that model's directory as evaluation reads it, its resume state left out."""
    if not (ckpt / MANIFEST).is_file():
        return f"no {MANIFEST}"
    try:
        wanted = listed_files(ckpt)
    except ConfigError:
        return f"{MANIFEST} is unreadable"
    for name, (size, sha256) in wanted.items():
        parts = Path(name).parts
        resume = len(parts) >= 2 and parts[1] in RESUME_STATE
        if model is not None and (parts[0] != model or resume):
            continue
        path = ckpt / name
        if not path.is_file():
            if resume:
                continue
            return f"{name} is missing"
        if path.stat().st_size != size:
            return f"{name} has {path.stat().st_size} bytes, the manifest says {size}"
        if sha256_file(path) != sha256:
            return f"{name} does not match its sha256"
    if model is not None and not any(Path(name).parts[0] == model for name in wanted):
        return f"{MANIFEST} lists no files of {model!r}"
    return None


def trajectory_file(directory: str | Path, step: int) -> Path:
    """One model's records of one step inside its trajectory directory."""
    return Path(directory) / f"{step_name(step)}.parquet"


def selection_run_file(directory: str | Path, model: str, run: int) -> Path:
    """One re-evaluation of a model's selected checkpoint inside a ``graft reevaluate --out-dir``."""
    return Path(directory) / model / f"run_{run:02d}.json"


def eval_file(directory: str | Path, model: str, step: int) -> Path:
    """One model's evaluation of one checkpoint inside an evaluation directory (``graft evaluate --out-dir``)."""
    return Path(directory) / model / f"{step_name(step)}.json"


def _step_dirs(root: Path) -> list[Path]:
    """The complete ``step_NNNNN`` directories under ``root``, oldest first."""
    return sorted(p for p in root.glob("step_*") if p.is_dir() and parse_step(p.name) is not None)


@dataclass(frozen=True)
class RunDir:
    """One training cell's directory: what ``graft train --out`` writes."""

    root: Path

    @property
    def run_json(self) -> Path:
        return self.root / "run.json"

    @property
    def metrics(self) -> Path:
        return self.root / "metrics.jsonl"

    @property
    def done(self) -> Path:
        return self.root / "done.json"

    @property
    def pruned(self) -> Path:
        """What ``graft prune`` removed from the finished, evaluated run and what it kept."""
        return self.root / "pruned.json"

    @property
    def failed(self) -> Path:
        """That the cell's training job failed on its last attempt, and when it first did (graft.workflow.failures);
        no output of any rule, so it stays when Snakemake removes the failed job's outputs."""
        return self.root / "failed.json"

    @property
    def checkpoint_root(self) -> Path:
        return self.root / "checkpoints"

    def checkpoint(self, step: int) -> Path:
        return self.checkpoint_root / step_name(step)

    def checkpoints(self) -> list[Path]:
        """Complete checkpoint directories, oldest first (temporaries of an interrupted save are skipped)."""
        return _step_dirs(self.checkpoint_root)

    @property
    def interim_root(self) -> Path:
        """Checkpoints saved by wall time (``train.checkpoint_minutes``): for a resume only, never evaluated."""
        return self.checkpoint_root / "interim"

    def interim_checkpoints(self) -> list[Path]:
        return _step_dirs(self.interim_root)

    def saved_checkpoints(self) -> list[Path]:
        """Every complete checkpoint, by step and wall time alike, oldest first: what a resume may start from."""
        return sorted([*self.checkpoints(), *self.interim_checkpoints()], key=lambda p: parse_step(p.name))

    def trajectories(self, model: str) -> Path:
        return self.root / "trajectories" / model

    def kept_evaluation(self, model: str, step: int, selection_run: int | None = None) -> Path:
        """A finished evaluation of one checkpoint (or re-evaluation ``selection_run`` of a selected one), kept
        beside the run where a retried evaluation job's output deletion does not reach it (``graft evaluate
        --run``, ``graft reevaluate``); its ``.key`` sibling says what it was computed from."""
        if selection_run is None:
            return eval_file(self.root / "evaluated", model, step)
        return self.root / "evaluated" / model / f"{step_name(step)}_selection_run_{selection_run:02d}.json"


@dataclass(frozen=True)
class ResultsTree:
    """A results directory. Methods take strings as well as numbers, so Snakemake can ask for wildcard patterns
    (``tree.run("{method}", "{cell}", "{seed}")``)."""

    root: Path

    def __init__(self, root: str | Path):
        object.__setattr__(self, "root", Path(root))

    @property
    def config(self) -> Path:
        return self.root / "config.yaml"

    def config_snapshot(self, digest: str) -> Path:
        """The merged config that one workflow invocation planned its jobs with, named by its content: never
        rewritten, so a pending job or its retry reads the config it was planned with."""
        return self.root / "configs" / f"{digest}.yaml"

    @property
    def methods(self) -> Path:
        return self.root / "methods.yaml"

    @property
    def report(self) -> Path:
        return self.root / "report"

    @property
    def report_full(self) -> Path:
        """The report of every cell, where ``workflow.main_cells`` gives rule ``all`` fewer."""
        return self.root / "report_full"

    @property
    def toy(self) -> Path:
        return self.root / "toy"

    def run(self, method: str, cell: str, seed: int | str) -> RunDir:
        return RunDir(self.root / "runs" / method / cell / f"seed{seed}")

    def archive(self, peer: str, seed: int | str) -> Path:
        """The stored trajectories that archive replay reads: the peer's own GRPO n=8 run with the same seed."""
        return self.run("grpo_n8", peer, seed).trajectories(peer)

    @property
    def eval_root(self) -> Path:
        return self.root / "eval"

    def eval_dir(self, method: str, cell: str, seed: int | str) -> Path:
        return self.eval_root / method / cell / f"seed{seed}"

    def eval_file(self, method: str, cell: str, seed: int | str, model: str, step: int) -> Path:
        return eval_file(self.eval_dir(method, cell, seed), model, step)

    def eval_part_dir(self, method: str, cell: str, seed: int | str, part: int | str) -> Path:
        """What one evaluation job of a training cell writes (a group of its checkpoints); the cell's evaluation
        directory collects the groups."""
        return self.root / "eval_parts" / method / cell / f"seed{seed}" / f"part{part}"

    def selected_eval_dir(self, method: str, cell: str, seed: int | str) -> Path:
        """A training cell's selected checkpoints, re-evaluated ``eval.selection_runs`` times each."""
        return self.root / "eval_selected" / method / cell / f"seed{seed}"

    def selected_eval_files(self) -> Iterator[tuple[str, str, int, str, int, Path]]:
        """(method, cell, seed, model, run, path) of every re-evaluation JSON, sorted by path."""
        for path in sorted((self.root / "eval_selected").glob("*/*/seed*/*/run_*.json")):
            model, seed_dir, cell, method = (path.parents[i].name for i in range(4))
            run = path.stem.removeprefix("run_")
            if run.isdigit():
                yield method, cell, int(seed_dir.removeprefix("seed")), model, int(run), path

    def base_eval(self, model: str, seed: int | str) -> Path:
        """The model before any RL (step 0), evaluated with sampling seed ``seed``. The workflow evaluates it
        once per main seed, so a difference against the base model averages as many evaluations on each side."""
        return self.eval_file("base", model, seed, model, 0)

    def metrics_files(self) -> Iterator[tuple[str, str, int, Path]]:
        """(method, cell, seed, path) of every training cell's metrics, sorted by path."""
        for path in sorted((self.root / "runs").glob("*/*/seed*/metrics.jsonl")):
            seed_dir, cell, method = (path.parents[i].name for i in range(3))
            yield method, cell, int(seed_dir.removeprefix("seed")), path

    def eval_files(self) -> Iterator[tuple[str, str, int, str, Path]]:
        """(method, cell, seed, model, path) of every evaluation JSON, sorted by path."""
        for path in sorted(self.eval_root.glob("*/*/seed*/*/step_*.json")):
            model, seed_dir, cell, method = (path.parents[i].name for i in range(4))
            if parse_step(path.name) is not None:
                yield method, cell, int(seed_dir.removeprefix("seed")), model, path
