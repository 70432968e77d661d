"""Where a run's models live (graft.engine.placement), how a training job starts its processes (graft.planning.launch),
and what the placement does to graft plan's memory and job lengths."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import pytest

from graft.config import config_from_dict, read_yaml
from graft.engine.distributed import SINGLE, World
from graft.engine.placement import place
from graft.errors import ConfigError
from graft.planning.job_lengths import job_kinds
from graft.planning.launch import FAILED, RENDEZVOUS_PORTS, job_status, rendezvous_port, torchrun_args, train_launcher
from graft.planning.launch import main as launch_main
from graft.planning.memory import GB, NCCL_COMMUNICATOR_BYTES, cell_phases, shards_per_model
from graft.planning.plan import base_evaluations, check_memory, checkpoint_steps, training_cells
from graft.train.stop import EXIT_CODE
from graft.train.trainer import job_gpus

ROOT = Path(__file__).resolve().parents[3]


def _config(path: str, **scale):
    data = read_yaml(ROOT / path)
    return config_from_dict({**data, "scale": {**data["scale"], **scale}})


def test_one_process_holds_every_model_under_either_placement():
    for placement in ("colocated", "split"):
        p = place(["A", "B"], SINGLE, placement, node_processes=1)
        assert list(p.homes) == ["A", "B"] and not p.split and p.publishes("A") and p.publishes("B")


def test_split_needs_an_equal_share_of_the_processes_for_each_model():
    with pytest.raises(ConfigError, match="expected a multiple of 2"):
        _config("config/paper.yaml", placement="split", processes=3)
    _config("config/paper.yaml", placement="split", processes=3, nodes=2)  # 6 processes, 3 each


def test_deepspeed_shards_over_the_whole_job_only():
    with pytest.raises(ConfigError, match=r"scale.engine: fsdp2"):
        _config("config/paper.yaml", placement="split", engine="deepspeed")


def test_launchers_for_one_process_one_node_and_several_nodes():
    cfg = _config("config/paper.yaml")
    assert train_launcher(dataclasses.replace(cfg.scale, processes=1)) == "graft"
    assert train_launcher(cfg.scale) == "python -m graft.planning.launch --nodes 1 --processes 4 --"
    assert torchrun_args(1, 4, ["train"]) == ["--standalone", "--nproc-per-node=4", "-m", "graft.cli", "train"]
    # several nodes: one task per node with the CPUs sbatch gave each task, which srun no longer takes from the job
    two = dataclasses.replace(cfg.scale, nodes=2)
    assert train_launcher(two, cpus_per_task=64) == (
        "srun --nodes 2 --ntasks 2 --ntasks-per-node 1 --cpus-per-task 64 --kill-on-bad-exit=1 "
        "python -m graft.planning.launch --nodes 2 --processes 4 --"
    )
    # CI's one-node cluster packs the two tasks onto its node
    assert "--nodes 1 --ntasks 2 --ntasks-per-node 2 " in train_launcher(two, 1, allocated_nodes=1)
    args = ["train", "--seed", "0"]
    host, other = (torchrun_args(2, 4, args, "gpu07", "123456", is_host) for is_host in (True, False))
    assert host[:5] == ["--nnodes=2", "--rdzv-backend=c10d", "--rdzv-endpoint=gpu07:23456", "--rdzv-id=123456",
                         "--rdzv-conf=is_host=1"]  # fmt: skip
    assert other[:5] == [*host[:4], "--rdzv-conf=is_host=0"]  # node 0 alone says it hosts the store
    assert host[-4:] == ["graft.cli", "train", "--seed", "0"]


def test_a_job_whose_first_failed_process_stopped_keeps_the_stop_s_status():
    """torchrun reports the processes that failed, those it ended with a signal once one had failed among them; the
    job is a stop where the first stopped and none of the rest failed otherwise."""
    stop = EXIT_CODE
    assert stop == os.EX_TEMPFAIL
    assert job_status([stop]) == job_status([stop, stop]) == job_status([stop, -15, -9]) == stop
    assert job_status([stop, 1]) == job_status([-15, stop]) == job_status([1, stop]) == job_status([]) == FAILED
    assert stop < FAILED < 128  # srun's highest status: a failed node outranks a stopped one, a signal both


def test_a_sigterm_before_torchrun_starts_the_processes_is_a_stop():
    """Slurm's SIGTERM while the launcher loads torch or waits at a multi-node rendezvous: nothing to save, and the
    job's status is a stop's, not a death by signal that the last attempt would record as failed for good."""
    script = (
        "import os, signal, time\n"
        "from graft.planning import launch\n"
        "def starting(args):\n"
        "    os.kill(os.getpid(), signal.SIGTERM)\n"
        "    time.sleep(30)\n"
        "launch.run_torchrun = starting\n"
        "launch.main(['--nodes', '1', '--processes', '2', '--', 'train'])\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == os.EX_TEMPFAIL and "SIGTERM before the processes started" in done.stderr, done.stderr


def test_the_rendezvous_port_lies_below_the_ephemeral_ports():
    """A port the kernel may give an outgoing connection can be taken before the store binds it: every job's port
    lies below Linux's default ephemeral range (32768-60999) and this machine's."""
    first, count = RENDEZVOUS_PORTS
    ports = {rendezvous_port(str(job)) for job in range(3 * count)}
    assert ports == set(range(first, first + count))
    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    assert max(ports) < min(32768, low)


def test_the_gpu_hours_count_every_node_s_gpus():
    """One GPU per process of the whole job (a node's device count would give one node's share), none on a CPU."""
    assert job_gpus(World(rank=5, size=8, device_name="cuda:1", local_rank=1)) == 8
    assert job_gpus(World(rank=1, size=2)) == 0 and job_gpus(SINGLE) == 0


def test_the_multi_node_launcher_outside_slurm_says_so_in_one_line(monkeypatch, capsys):
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    monkeypatch.delenv("SLURM_JOB_NODELIST", raising=False)
    with pytest.raises(SystemExit) as stop:
        launch_main(["--nodes", "2", "--processes", "1", "--", "train"])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and "needs a Slurm job" in err and err.count("\n") == 1


def test_split_memory_is_the_neediest_model_alone_on_its_share_of_the_gpus():
    split = _config("config/paper.yaml", placement="split")
    colocated = _config("config/paper.yaml", processes=2)
    pair = ("smollm3", "qwen3")
    assert shards_per_model(split, pair) == 2 and shards_per_model(split, ("qwen3",)) == 4
    alone = [cell_phases(colocated, (m,)) for m in pair]  # each model alone on 2 GPUs
    for i, phase in enumerate(cell_phases(split, pair)):
        # and two more NCCL communicators, the model's group and the mesh it is sharded over
        assert phase.gb == pytest.approx(max(a[i].gb for a in alone) + 2 * NCCL_COMMUNICATOR_BYTES / GB)
    # hybrid sharding over two nodes shards within a node only
    assert shards_per_model(_config("config/paper.yaml", nodes=2, sharding="hybrid"), pair) == 4
    assert shards_per_model(_config("config/paper.yaml", nodes=2), pair) == 8


def test_the_larger_pair_plans_split_over_two_nodes_and_is_refused_on_one_gpu_each():
    cfg = _config("config/pair-8b.yaml")
    cells = training_cells(cfg)
    check_memory(cfg, cells)
    assert cfg.scale.nodes == 2 and cfg.scale.placement == "split"
    train = job_kinds(cfg, cells, checkpoint_steps(cfg), base_evaluations(cfg))[0]
    assert train.gpus == 8
    tight = _config("config/pair-8b.yaml", nodes=1, processes=2)  # one GPU per model
    with pytest.raises(ConfigError, match=r"memory: the rollout phase of qwen3_8b needs"):
        check_memory(tight, training_cells(tight))
