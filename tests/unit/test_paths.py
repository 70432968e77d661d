"""Every command checks the paths it writes before any work (graft.paths): an output of the wrong kind, under a
file, where no file can be created, or one of the command's inputs is refused with exit code 2 and one line naming
the option and the path, and nothing changes on disk. What fails while a command works is one line too (exit code
1), and a checkpoint write that fails leaves no temporary behind. The targets fail for root as well, which passes
every permission bit: a path under a file, a directory given for a file, /proc and /sys, a read-only mount."""

from __future__ import annotations

import contextlib
import errno
import hashlib
import io
import os
import shutil
import subprocess
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import graft.cli
from graft.cli import main
from graft.paths import WriteFailed, describe
from graft.results import begin_dir, failed_write_removes

ROOT = Path(__file__).resolve().parents[2]


def command_sites(t: Path) -> dict[str, tuple[list[str], str, str | None]]:
    """Every output a command writes, in the tree ``t``: (its arguments, ``{}`` where the output goes; the kind it
    writes; an input of the same command, or None)."""
    config = ["--config", str(t / "c.yaml")]
    run, data = str(t / "run"), str(t / "data")
    return {
        "train --out": (["train", *config, "--method", "grpo_n8", "--models", "smol", "--seed", "0", "--out", "{}"],
                        "directory", None),
        "train --eval-dir": (["train", *config, "--method", "grpo_n8", "--models", "smol", "--seed", "0", "--out", run,
                              "--eval-dir", "{}"], "directory", run),
        "toy --out": (["toy", "data", *config, "--out", "{}"], "directory", None),
        "toy --summary": (["toy", "data", *config, "--out", str(t / "toy"), "--summary", "{}"], "file",
                          str(t / "c.yaml")),
        "report --out": (["report", *config, "--results", data, "--out", "{}"], "directory", data),
        "archive import --out": (["archive", "import", *config, "--format", "jsonl", "--model", "smol", "--in", data,
                                  "--out", "{}"], "directory", data),
        "evaluate --out": (["evaluate", *config, "--checkpoint", data, "--model", "smol", "--out", "{}"], "file",
                           str(t / "c.yaml")),
        "evaluate --out-dir": (["evaluate", *config, "--run", run, "--out-dir", "{}"], "directory", run),
        "reevaluate --out-dir": (["reevaluate", *config, "--run", run, "--evals", data, "--out-dir", "{}"],
                                 "directory", data),
        "methods --out": (["methods", *config, "--out", "{}"], "file", str(t / "c.yaml")),
        "complementarity --out": (["complementarity", *config, "--models", "smol,qwen", "--out", "{}"], "file",
                                  str(t / "c.yaml")),
        "fetch model --out": (["fetch", "model", "--hub-id", "x/y", "--out", "{}"], "directory", None),
        "fetch dataset --out": (["fetch", "dataset", "--name", "math500", "--out", "{}"], "file", None),
        "digest --write": (["digest", "--results", data, "--write", "{}"], "file", None),
    }  # fmt: skip


SITES = sorted(command_sites(Path("t")))


def tree(root: Path) -> dict[str, str]:
    """Every file and directory under ``root`` with its content's digest."""
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "dir"
        for p in sorted(root.rglob("*"))
    }


def make_tree(t: Path) -> None:
    """A config, a file, a data directory and a run directory: the inputs of every command site."""
    shutil.copy(ROOT / "config" / "smoke.yaml", t / "c.yaml")
    (t / "file").write_text("not a directory\n")
    (t / "data").mkdir()
    (t / "data" / "x.jsonl").write_text("{}\n")
    (t / "run").mkdir()


def run(argv: list[str]) -> tuple[int, str]:
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = main(argv)
    return code, err.getvalue()


def refused(site: str, target: str, t: Path) -> str:
    """Run ``site`` writing to ``target``: exit code 2, one line naming the option and the path, no change."""
    words, _, _ = command_sites(t)[site]
    before = tree(t)
    code, err = run([w.replace("{}", target) for w in words])
    option = site.split()[-1]
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    assert err.startswith(f"graft: error: {option}: {target!r}"), err
    assert tree(t) == before
    return err


_TAIL = st.lists(st.text("abcxyz019_-.", min_size=1, max_size=8).filter(lambda p: p not in (".", "..")), max_size=3)
"""A few path components below a bad place."""


def bad_targets(t: Path, kind: str) -> st.SearchStrategy[str]:
    """Paths that an output of ``kind`` cannot be written to, for root too: the other kind, anything under a file,
    under /proc/1 or /sys, or under a ``~`` that nothing expands."""
    other = str(t / ("file" if kind == "directory" else "data"))
    below = lambda top: _TAIL.map(lambda parts: os.path.join(top, "out", *parts))  # noqa: E731
    return st.one_of(st.just(other), below(str(t / "file")), below("/proc/1"), below("/sys"), below("~"))


@pytest.mark.parametrize("site", SITES)
@settings(max_examples=12, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_an_output_that_cannot_be_written_is_refused_before_any_work(site, data, tmp_path_factory, monkeypatch):
    t = tmp_path_factory.mktemp("tree")
    make_tree(t)
    monkeypatch.chdir(t)  # a relative path the command wrote to would land in the tree compared
    refused(site, data.draw(bad_targets(t, command_sites(t)[site][1])), t)


@pytest.mark.parametrize("site", [s for s in SITES if command_sites(Path("t"))[s][2] is not None])
def test_an_output_that_is_one_of_the_commands_inputs_is_refused(site, tmp_path, monkeypatch):
    make_tree(tmp_path)
    monkeypatch.chdir(tmp_path)
    _, kind, given_input = command_sites(tmp_path)[site]
    err = refused(site, given_input, tmp_path)
    assert "an input of this command" in err or ("is a directory" in err and kind == "file"), err


@pytest.fixture
def tmpfs(tmp_path):
    """``tmpfs(options)``: a small tmpfs mounted under ``tmp_path``, unmounted after the test; skipped where this
    process may not mount (not root, or no mount namespace of its own)."""
    mounted = []

    def mount(options: str) -> Path:
        where = tmp_path / f"mount{len(mounted)}"
        where.mkdir()
        command = ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(where)]
        if os.geteuid() != 0 or subprocess.run(command, capture_output=True).returncode != 0:
            pytest.skip("mounting a tmpfs needs root where mounts are allowed")
        mounted.append(where)
        return where

    yield mount
    for where in mounted:
        # lazily: torch's failed writer holds its file open until it is collected
        subprocess.run(["umount", "--lazy", str(where)], check=True)


@pytest.mark.parametrize("site", SITES)
def test_an_output_on_a_read_only_file_system_is_refused(site, tmp_path, tmpfs, monkeypatch):
    make_tree(tmp_path)
    monkeypatch.chdir(tmp_path)
    target = str(tmpfs("ro,size=64k") / "out")
    assert "Read-only file system" in refused(site, target, tmp_path)


IMPORT = [
    "archive",
    "import",
    "--config",
    "c.yaml",
    "--format",
    "jsonl",
    "--model",
    "smol",
    "--in",
    "data",
    "--out",
    "o",
]
TRAIN = ["train", "--config", "c.yaml", "--method", "grpo_n8", "--models", "smol", "--seed", "0", "--out", "run"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["digest", "--results", "data", "--check", "data"], "--check: 'data' is a directory; expected a file"),
        (
            [*IMPORT, "--source-model", "file"],
            "--source-model: 'file' is a file; expected a directory",
        ),
        (
            [*IMPORT, "--source-model", "missing"],
            "--source-model: 'missing': no such directory",
        ),
        (
            [*TRAIN, "--peer-archive", "file"],
            "--peer-archive: 'file' is a file; expected a directory",
        ),
    ],
)
def test_an_input_of_the_wrong_kind_is_refused_in_one_line(argv, message, tmp_path, monkeypatch):
    make_tree(tmp_path)
    monkeypatch.chdir(tmp_path)
    before = tree(tmp_path)
    assert run(argv) == (2, f"graft: error: {message}\n")
    assert tree(tmp_path) == before


@pytest.mark.parametrize(
    ("err", "line"),
    [
        (OSError(errno.EROFS, "Read-only file system", "r/report/summary.md"), "'r/report/summary.md': Read-only"),
        (OSError(errno.EACCES, "Permission denied", "r/x"), "'r/x': Permission denied"),
        (OSError(errno.ENOTDIR, "Not a directory", "r/x"), "'r/x': Not a directory"),
        (OSError(errno.EISDIR, "Is a directory", "r/x"), "'r/x': Is a directory"),
        (OSError(errno.EEXIST, "File exists", "a", None, "b"), "'a' -> 'b': File exists"),
        (OSError(errno.ENOSPC, "No space left on device", "r/x"), "no space left on the device writing r/x; free"),
        (WriteFailed(Path("r/step_00001.tmp"), RuntimeError("unexpected pos 576 vs 534\nat ...")), "write failed"),
    ],
)
def test_an_os_error_while_a_command_works_is_one_line_with_exit_code_1(err, line, monkeypatch):
    def fails(args):
        raise err

    monkeypatch.setattr(graft.cli, "_cmd_plan", fails)
    code, stderr = run(["plan", "--config", "c.yaml"])
    assert code == 1 and stderr.count("\n") == 1 and stderr.startswith("graft: error: ") and line in stderr, stderr


def test_a_checkpoint_write_on_a_full_disk_removes_its_temporary_and_names_it(tmpfs):
    """torch.save reports a full disk as a RuntimeError; the temporary directory held the space."""
    tmp = begin_dir(tmpfs("size=256k") / "step_00001")
    with pytest.raises(WriteFailed) as err, failed_write_removes(tmp):
        torch.save({"optimizer": torch.zeros(1_000_000)}, tmp / "optimizer.pt")
    assert not tmp.exists() and err.value.filename == str(tmp)
    assert "\n" not in describe(err.value) and "GB free on its file system" in describe(err.value)


def test_a_failed_write_that_raises_an_os_error_removes_its_temporary_too(tmp_path):
    tmp = begin_dir(tmp_path / "step_00001")
    (tmp / "half").write_text("x")
    with pytest.raises(OSError, match="No space"), failed_write_removes(tmp):
        raise OSError(errno.ENOSPC, "No space left on device", str(tmp / "half"))
    assert not tmp.exists()
