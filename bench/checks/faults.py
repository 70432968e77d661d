"""Fault campaign on the smoke toy: every fault is survived, nothing is lost, nothing hangs.

Each row injects one kind of fault into real ``graft train`` processes (or the grader, or the config loader) and
checks the outcome against an uninterrupted run of the same cell: *survived* means the run finished with metrics
and final weights identical to the uninterrupted run's (after ``--resume`` where the fault killed it), or was
refused with one clear line and exit code 2; *lost* counts trials after which a result differs, a finished file
changed, or a refusal was not one line; *hung* counts processes that outlived their deadline.

Kills inside checkpoint and record writes use a ``sitecustomize`` hook in the child (never in the package):
it pauses on the rename that commits a checkpoint or a Parquet record and signals the parent, which kills it
there. A full disk is an injected ``OSError(ENOSPC)`` at that rename.

Usage: python bench/checks/faults.py [--config config/smoke.yaml] [--trials 6]
Builds the smoke toy first when it is missing (graft toy build --config config/smoke.yaml).
Prints a table and writes bench/results/faults.json.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import dataclasses
import hashlib
import io
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/, for needs.py
from needs import toy_world

from graft.cli import main as graft_main
from graft.config import load_config
from graft.results import write_text

ROOT = Path(__file__).resolve().parents[2]
STEPS = 6
DEADLINE = 300
"""Seconds a training process may take before it counts as hung."""
TIMING = {"rollout_s", "reward_s", "scoring_s", "update_s", "recompute_s", "step_time_s", "gpu_hours"}

HOOK = """
import errno, os, time
_pause, _enospc, _marker = (os.environ.get(k) for k in ("FAULT_PAUSE", "FAULT_ENOSPC", "FAULT_MARKER"))
def _kind(dst):
    dst = str(dst)
    if "/checkpoints/step_" in dst and not dst.endswith(".tmp"):
        return "checkpoint"
    return "record" if dst.endswith(".parquet") and "/trajectories/" in dst else None
def _wrap(real):
    def commit(src, dst, *args, **kwargs):
        kind = _kind(dst)
        if kind is not None and kind == _enospc:
            raise OSError(errno.ENOSPC, "No space left on device", str(dst))
        if kind is not None and kind == _pause:
            open(_marker, "w").close()
            time.sleep(3)
        return real(src, dst, *args, **kwargs)
    return commit
if _pause or _enospc:
    os.rename, os.replace = _wrap(os.rename), _wrap(os.replace)
"""


class Campaign:
    def __init__(self, config_path: Path, work: Path, trials: int, seed: int):
        self.work, self.trials = work, trials
        self.rng = random.Random(seed)
        cfg = yaml.safe_load(config_path.read_text())
        cfg["results"] = str((ROOT / cfg["results"]).resolve())
        # damaged checkpoints are staged from a finished run, which then must keep its resume state
        cfg["train"].update(steps=STEPS, checkpoint_every=2, keep_resume_state=True)
        self.config = work / "config.yaml"
        self.config.write_text(yaml.safe_dump(cfg))
        self.hook = work / "hook"
        self.hook.mkdir()
        (self.hook / "sitecustomize.py").write_text(HOOK)
        self.models = next(iter(cfg["pairs"].values()))
        self.rows: list[dict] = []

    # -- processes ---------------------------------------------------------------------------------------------
    def command(self, out: Path, *extra: str, method: str = "graft", models: list[str] | None = None) -> list[str]:
        models = models or self.models
        return [
            sys.executable, "-m", "graft.cli", "train", "--config", str(self.config), "--method", method,
            "--models", ",".join(models), "--seed", "0", "--out", str(out), "--threads", "1", *extra,
        ]  # fmt: skip

    def start(self, cmd: list[str], **fault: str) -> subprocess.Popen:
        env = {**os.environ, "OMP_NUM_THREADS": "1"}
        if fault:
            env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(self.hook), env.get("PYTHONPATH")]))
            env.update({f"FAULT_{k.upper()}": v for k, v in fault.items()})
        return subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)

    def finish(self, proc: subprocess.Popen) -> tuple[int | None, str]:
        """Exit code (None: hung, killed at the deadline) and stderr."""
        try:
            _, err = proc.communicate(timeout=DEADLINE)
            return proc.returncode, err
        except subprocess.TimeoutExpired:
            proc.kill()
            return None, proc.communicate()[1]

    def resume_until_done(self, out: Path) -> bool | None:
        """Rerun with --resume until the run finishes; None if a process hung."""
        for _ in range(3):
            code, _ = self.finish(self.start(self.command(out, "--resume")))
            if code is None:
                return None
            if code == 0:
                return True
        return False

    # -- outcomes ----------------------------------------------------------------------------------------------
    @staticmethod
    def outputs(out: Path) -> dict:
        """What an identical run must reproduce: metric rows (timings aside) and the final weights' hashes."""
        if not (out / "done.json").is_file():
            return {}
        rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
        final = sorted((out / "checkpoints").iterdir())[-1]
        weights = {
            str(f.relative_to(final)): hashlib.sha256(f.read_bytes()).hexdigest()
            for f in sorted(final.rglob("model.safetensors"))
        }
        return {"metrics": [{k: v for k, v in r.items() if k not in TIMING} for r in rows], "weights": weights}

    @staticmethod
    def snapshot(directory: Path) -> dict[str, str]:
        return {
            str(f.relative_to(directory)): hashlib.sha256(f.read_bytes()).hexdigest()
            for f in sorted(directory.rglob("*"))
            if f.is_file()
        }

    def record(self, fault: str, outcomes: list[str], seconds: float, note: str = "") -> None:
        row = {
            "fault": fault,
            "trials": len(outcomes),
            "survived": outcomes.count("survived"),
            "lost": outcomes.count("lost"),
            "hung": outcomes.count("hung"),
            "seconds": round(seconds, 1),
            "note": note,
        }
        self.rows.append(row)
        print(json.dumps(row), file=sys.stderr, flush=True)

    def fresh(self, name: str) -> Path:
        out = self.work / name
        shutil.rmtree(out, ignore_errors=True)
        return out

    # -- the faults --------------------------------------------------------------------------------------------
    def reference(self) -> None:
        t0 = time.monotonic()
        out = self.fresh("reference")
        code, err = self.finish(self.start(self.command(out)))
        if code != 0:
            raise SystemExit(f"faults: the uninterrupted reference run failed:\n{err}")
        self.ref_seconds = time.monotonic() - t0
        self.ref_dir = out
        self.ref = self.outputs(out)

    def after_resume(self, out: Path) -> str:
        done = self.resume_until_done(out)
        if done is None:
            return "hung"
        return "survived" if done and self.outputs(out) == self.ref else "lost"

    def kill_at_random(self) -> None:
        t0, outcomes, killed = time.monotonic(), [], 0
        for k in range(self.trials):
            out = self.fresh(f"kill_random_{k}")
            proc = self.start(self.command(out))
            time.sleep(self.rng.uniform(1.0, self.ref_seconds))
            killed += proc.poll() is None
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            outcomes.append(self.after_resume(out))
        note = f"{killed} of {self.trials} killed before they finished"
        self.record("SIGKILL at a random moment", outcomes, time.monotonic() - t0, note)

    def kill_inside(self, window: str) -> None:
        t0, outcomes, killed = time.monotonic(), [], 0
        trials = max(2, self.trials // 2)
        for k in range(trials):
            out = self.fresh(f"kill_{window}_{k}")
            marker = self.work / f"marker_{window}_{k}"
            marker.unlink(missing_ok=True)
            proc = self.start(self.command(out), pause=window, marker=str(marker))
            skip = self.rng.randrange(2)  # the first or the second such write
            while proc.poll() is None:
                if marker.exists():
                    if skip == 0:
                        proc.send_signal(signal.SIGKILL)
                        killed += 1
                        break
                    skip -= 1
                    marker.unlink()
                time.sleep(0.02)
            proc.wait()
            outcomes.append(self.after_resume(out))
        note = f"{killed} of {trials} killed between writing and renaming"
        self.record(f"SIGKILL inside a {window} write", outcomes, time.monotonic() - t0, note)

    def damaged_checkpoint(self) -> None:
        def truncate(path: Path) -> None:
            path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])

        model = self.models[0]
        damages = {
            "truncated model weights": lambda c: truncate(c / model / "model.safetensors"),
            "deleted optimizer state": lambda c: (c / model / "optimizer.pt").unlink(),
            "deleted state.json": lambda c: (c / "state.json").unlink(),
            "truncated tokenizer file": lambda c: truncate(c / model / "tokenizer.json"),
        }
        t0, outcomes = time.monotonic(), []
        for damage in damages.values():
            out = self.fresh("damaged")
            shutil.copytree(self.ref_dir, out)
            newest = sorted((out / "checkpoints").iterdir())[-1]
            damage(newest)
            # as a run killed after its last checkpoint: not yet recorded as finished (graft.train.run_state)
            (out / "done.json").unlink()
            record = json.loads((out / "run.json").read_text())
            record.pop("finished", None)
            (out / "run.json").write_text(json.dumps(record))
            code, err = self.finish(self.start(self.command(out, "--resume")))
            if code is None:
                outcomes.append("hung")
                continue
            said = "falling back to" in err and newest.name in err
            outcomes.append("survived" if code == 0 and said and self.outputs(out) == self.ref else "lost")
        self.record("truncated or deleted file in the newest checkpoint", outcomes, time.monotonic() - t0)

    def refused(self, proc: subprocess.Popen, expect: str, untouched: dict[Path, dict]) -> str:
        code, err = self.finish(proc)
        if code is None:
            return "hung"
        lines = [line for line in err.splitlines() if line.startswith("graft: error:")]
        clean = code == 2 and len(lines) == 1 and expect in lines[0] and "Traceback" not in err
        kept = all(self.snapshot(d) == before for d, before in untouched.items())
        return "survived" if clean and kept else "lost"

    def truncated_record(self) -> None:
        """Archive replay over a stored GRPO run whose step-3 Parquet file was cut in half."""
        receiver, peer = self.models
        archive_run = self.fresh("archive")
        code, err = self.finish(self.start(self.command(archive_run, method="grpo_n8", models=[peer])))
        if code != 0:
            raise SystemExit(f"faults: the archive run failed:\n{err}")
        t0, outcomes = time.monotonic(), []
        for k in range(2):
            archive = self.fresh(f"archive_copy_{k}")
            shutil.copytree(archive_run / "trajectories" / peer, archive)
            damaged = archive / f"step_{k + 2:05d}.parquet"
            damaged.write_bytes(damaged.read_bytes()[: damaged.stat().st_size // 2])
            before = self.snapshot(archive)
            out = self.fresh(f"replay_{k}")
            cmd = self.command(out, "--peer-archive", str(archive), method="replay", models=[receiver])
            outcomes.append(self.refused(self.start(cmd), f"step {k + 2}", {archive: before}))
        self.record("truncated Parquet record (replay)", outcomes, time.monotonic() - t0)

    def concurrent(self) -> None:
        t0, outcomes = time.monotonic(), []
        for k in range(max(2, self.trials // 2)):
            out = self.fresh(f"concurrent_{k}")
            procs = [self.start(self.command(out)) for _ in range(2)]
            results = [self.finish(p) for p in procs]
            codes = sorted(c if c is not None else -1 for c, _ in results)
            if -1 in codes:
                outcomes.append("hung")
                continue
            refusal = [e for c, e in results if c == 2]
            one_line = len(refusal) == 1 and refusal[0].count("graft: error:") == 1 and "in use by" in refusal[0]
            ok = codes == [0, 2] and one_line and self.outputs(out) == self.ref
            outcomes.append("survived" if ok else "lost")
        self.record("a second trainer on the same directory", outcomes, time.monotonic() - t0, "refused with exit 2")

    def disk_full(self) -> None:
        t0, outcomes = time.monotonic(), []
        for k in range(2):
            out = self.fresh(f"disk_full_{k}")
            window = ("checkpoint", "record")[k % 2]
            code, err = self.finish(self.start(self.command(out), enospc=window))
            if code is None:
                outcomes.append("hung")
                continue
            line_ok = code == 1 and err.count("graft: error: no space left") == 1 and "Traceback" not in err
            outcomes.append(self.after_resume(out) if line_ok else "lost")
        self.record("full disk (ENOSPC) during a checkpoint or record", outcomes, time.monotonic() - t0)

    def grader_flood(self) -> None:
        from graft.engine.reward import Grader

        hostile = [
            "\\boxed{" + "{" * 5000 + "1" + "}" * 5000 + "}",
            "\\boxed{9^{9^{9^{9^{9}}}}}",
            "\\boxed{(10^{10^{10}})!}",
            "\\boxed{" + "1+" * 50_000 + "1}",
            "\\boxed{" + "\\frac{1}{" * 300 + "2" + "}" * 300 + "}",
            "\\boxed{10^{100000}}",
            "\\boxed{" + "x" * 900 + "}",
            "\\boxed{" + "\\sqrt{" * 30 + "2" + "}" * 30 + "}",
            "no box " * 10_000,
            "\\boxed{\\frac{1}{2}",
        ]
        answers = [hostile[i % len(hostile)] for i in range(1000)]
        grader = Grader("math", timeout=5.0, workers=2)
        peak = {"children": 0}
        stop = threading.Event()

        def watch() -> None:
            me = Path(f"/proc/{os.getpid()}/task/{os.getpid()}/children")
            while not stop.is_set():
                with contextlib.suppress(OSError):
                    peak["children"] = max(peak["children"], len(me.read_text().split()))
                time.sleep(0.05)

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        t0 = time.monotonic()
        grades = grader.grade(answers, ["1"] * len(answers))
        seconds = time.monotonic() - t0
        grader.close()
        stop.set()
        watcher.join()
        bound = grader.timeout * (len(answers) / grader.workers + 1)
        ok = grades.rewards == [0.0] * len(answers) and seconds < bound and peak["children"] <= grader.workers + 1
        note = (
            f"{seconds:.1f} s for 1,000 (deadline {bound:.0f} s); {grades.refused} refused unparsed, "
            f"{grades.timeouts} timeouts; at most {peak['children']} child processes"
        )
        self.record("grader flood (1,000 hostile answers)", ["survived" if ok else "lost"], seconds, note)

    def config_mutations(self, count: int = 200) -> None:
        base = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
        values = [None, -1, 0, 0.5, 1e9, "x", "", True, [], {}, [1, 2], {"a": 1}, "results/../../etc", 3]
        t0, outcomes, refused = time.monotonic(), [], 0
        for k in range(count):
            cfg = copy.deepcopy(base)
            self._mutate(cfg, values)
            path = self.work / "mutated.yaml"
            if k % 20 == 19:  # now and then a broken file rather than a broken field
                path.write_text(yaml.safe_dump(cfg)[: self.rng.randrange(1, 200)] + "\n  : [")
            else:
                path.write_text(yaml.safe_dump(cfg))
            err = io.StringIO()
            try:
                with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
                    code = graft_main(["plan", "--config", str(path)])
            except Exception as exc:  # a traceback: the config was neither accepted nor refused cleanly
                print(f"config mutation {k}: {type(exc).__name__}: {exc}", file=sys.stderr)
                outcomes.append("lost")
                continue
            lines = err.getvalue().strip().splitlines()
            refused += code == 2
            ok = code == 0 or (code == 2 and len(lines) == 1 and lines[0].startswith("graft: error:"))
            outcomes.append("survived" if ok else "lost")
        note = f"{refused} refused with exit 2 and one line, {count - refused} valid"
        self.record("random mutation of config/config.yaml", outcomes, time.monotonic() - t0, note)

    def _mutate(self, cfg: dict, values: list) -> None:
        """Replace, delete or add one field somewhere in the tree."""
        node, path = cfg, []
        while isinstance(node, dict) and node and self.rng.random() < 0.7:
            key = self.rng.choice(list(node))
            if not isinstance(node[key], dict):
                break
            node, path = node[key], [*path, key]
        if not isinstance(node, dict) or not node:
            return
        key = self.rng.choice(list(node))
        action = self.rng.random()
        if action < 0.6:
            node[key] = self.rng.choice(values)
        elif action < 0.8:
            del node[key]
        else:
            node[f"unknown_{self.rng.randrange(100)}"] = self.rng.choice(values)

    def leak_check(self, steps: int = 100) -> None:
        """Resident memory of a GRPO training process over 100 steps: the last ten against steps 10-19."""
        from graft.methods import get_method
        from graft.train.request import TrainRequest
        from graft.train.trainer import Trainer

        config = load_config(self.config)
        config = dataclasses.replace(
            config, train=dataclasses.replace(config.train, steps=steps, checkpoint_every=steps)
        )
        rss: list[float] = []

        def log(_fields: dict) -> None:
            for line in Path("/proc/self/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    rss.append(int(line.split()[1]) / 1024)

        t0 = time.monotonic()
        req = TrainRequest(config, get_method("grpo_n8"), [self.models[0]], 0, self.fresh("leak"), steps)
        Trainer(req).run(log=log)
        early, late = sum(rss[10:20]) / 10, sum(rss[-10:]) / 10
        growth = late - early
        ok = growth < max(0.05 * early, 16.0)
        note = f"RSS {early:.0f} MiB at steps 10-19, {late:.0f} MiB at steps {steps - 10}-{steps - 1}"
        self.record(f"memory over {steps} training steps", ["survived" if ok else "lost"], time.monotonic() - t0, note)


def table(rows: list[dict]) -> str:
    columns = ("fault", "trials", "survived", "lost", "hung", "seconds", "note")
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(str(r[c]) for c in columns) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", type=Path, default=ROOT / "config" / "smoke.yaml")
    parser.add_argument("--trials", type=int, default=6, help="trials of the random-kill row (others scale)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "faults.json")
    args = parser.parse_args()
    os.chdir(ROOT)
    toy_world(args.config)
    with tempfile.TemporaryDirectory(prefix="graft-faults-") as tmp:
        campaign = Campaign(args.config, Path(tmp), args.trials, args.seed)
        campaign.reference()
        campaign.kill_at_random()
        campaign.kill_inside("checkpoint")
        campaign.kill_inside("record")
        campaign.damaged_checkpoint()
        campaign.truncated_record()
        campaign.concurrent()
        campaign.disk_full()
        campaign.grader_flood()
        campaign.config_mutations()
        campaign.leak_check()
        rows = campaign.rows
    print(table(rows), end="")
    write_text(args.out, json.dumps({"config": str(args.config), "trials": args.trials, "rows": rows}, indent=2) + "\n")
    bad = [r["fault"] for r in rows if r["lost"] or r["hung"]]
    print(f"lost or hung: {', '.join(bad) if bad else 'none'}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
