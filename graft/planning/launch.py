"""How a training job starts its processes (docs/design.md section 8).

One process: ``graft``. Several on one node: this module runs ``torchrun --standalone`` with ``scale.processes``
processes. Several nodes (``scale.nodes`` > 1, under Slurm): ``srun`` starts one task per node, with the CPUs each
task was given (since Slurm 22.05 ``srun`` no longer takes them from the job), and each task runs this module,
which starts that node's ``torchrun``; the torchruns meet by c10d rendezvous at the job's first node, whose task
says that it hosts the rendezvous store (rather than each guessing from host names), on a port derived from the
Slurm job id (so two jobs sharing a node do not collide), and number the nodes among themselves. ``python -m
graft.planning.launch --nodes N --processes P -- train ...`` with N > 1 outside a Slurm job says so in one line and
starts nothing. Either torchrun, on a signal, passes it to its processes and lets them save for ``STOP_GRACE_S``
(graft.train.stop).

torchrun runs inside this module's process, so that the job's status says what its processes said: torchrun itself
exits 1 for any failure, which would make a stopped job (graft.train.stop's ``EX_TEMPFAIL``: saved, resumes) look
like one that failed, and the last attempt of a preempted cell be recorded as failed for good
(graft.workflow.failures). A failure exits ``FAILED``, above a stop's status, so that srun, which reports the
highest status of its tasks, reports a node that failed over one that stopped.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys

from graft.config import ScaleSpec

RENDEZVOUS_PORTS = (20000, 12000)
"""The first port and how many (20000-31999): a job's rendezvous port is the first plus its job id modulo the count.
All lie below Linux's default ephemeral range (32768-60999, ``/proc/sys/net/ipv4/ip_local_port_range``), from which
the kernel takes the local ports of outgoing connections, so no connection on the first node holds the port by
chance when the store binds it."""

STOP_GRACE_S = 600
"""How long torchrun waits for its processes to save and exit after it has passed them SIGTERM before it kills them
(torch's default, 30 s, is short of a checkpoint at the paper's scale; ``TORCH_ELASTIC_SHUTDOWN_TIMEOUT`` in the
environment overrides it). Slurm's own grace after a SIGTERM (a partition's GraceTime, KillWait) bounds it too."""


FAILED = 100
"""A job's status where a process failed: above a stop's (``os.EX_TEMPFAIL``, 75), so that srun, which reports the
highest exit status of a job's tasks, does not report a stop where one node failed and srun ended the others; below
the statuses of a death by signal (128 and up)."""


def train_launcher(scale: ScaleSpec, cpus_per_task: int = 1, allocated_nodes: int | None = None) -> str:
    """The command that stands for ``graft`` in a training job's shell command. ``cpus_per_task``: the CPUs Slurm
    gave each of the job's tasks; ``allocated_nodes``: the job's nodes (``scale.nodes`` unless a test packs the
    tasks onto fewer). Both matter only with several nodes."""
    if scale.nodes > 1:
        nodes = allocated_nodes or scale.nodes
        return (
            f"srun --nodes {nodes} --ntasks {scale.nodes} --ntasks-per-node {-(-scale.nodes // nodes)} "
            f"--cpus-per-task {cpus_per_task} --kill-on-bad-exit=1 "
            f"python -m graft.planning.launch --nodes {scale.nodes} --processes {scale.processes} --"
        )
    if scale.processes > 1:
        return f"python -m graft.planning.launch --nodes 1 --processes {scale.processes} --"
    return "graft"


def first_node(nodelist: str) -> str:
    """The first host of a Slurm node list (``node[03-05],gpu7`` -> ``node03``), as ``scontrol`` expands it."""
    out = subprocess.run(["scontrol", "show", "hostnames", nodelist], capture_output=True, text=True, check=True)
    return out.stdout.split()[0]


def rendezvous_port(job_id: str) -> int:
    """The c10d rendezvous port of a Slurm job (``RENDEZVOUS_PORTS``)."""
    first, count = RENDEZVOUS_PORTS
    return first + int(job_id) % count


def torchrun_args(
    nodes: int, processes: int, args: list[str], head: str = "", job_id: str = "", is_host: bool = False
) -> list[str]:
    """One node's torchrun arguments: standalone on a single node; of a multi-node job, c10d rendezvous at
    ``head`` with the job id as the rendezvous id, ``is_host`` on the node whose task hosts the store."""
    if nodes == 1:
        rendezvous = ["--standalone"]
    else:
        rendezvous = [
            f"--nnodes={nodes}",
            "--rdzv-backend=c10d",
            f"--rdzv-endpoint={head}:{rendezvous_port(job_id)}",
            f"--rdzv-id={job_id}",
            f"--rdzv-conf=is_host={int(is_host)}",
        ]
    return [
        *rendezvous,
        f"--nproc-per-node={processes}",
        "-m",
        "graft.cli",
        *args,
    ]


def job_status(exit_codes: list[int]) -> int:
    """A training job's status from the exit codes of its processes that failed, first observed first: a stop's
    (``os.EX_TEMPFAIL``, graft.train.stop.EXIT_CODE) where the first stopped and the rest stopped too or ended by a
    signal (torchrun ends the others once one fails), else ``FAILED``."""
    stop = os.EX_TEMPFAIL
    if exit_codes and exit_codes[0] == stop and all(code == stop or code < 0 for code in exit_codes[1:]):
        return stop
    return FAILED


def run_torchrun(args: list[str]) -> int:
    """torchrun with ``args`` in this process (under torch's ``record``, as ``torchrun`` runs); returns the job's
    status (``job_status``). A signal to torchrun (Slurm's SIGTERM at a time limit or a preemption, which its
    processes get too) is a stop: torchrun passes it on and waits ``STOP_GRACE_S`` for them to save."""
    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError, record
    from torch.distributed.run import parse_args, run

    try:
        record(run)(parse_args(args))
    except ChildFailedError as err:
        print(err.format_msg(), file=sys.stderr)
        in_order = sorted(err.failures.values(), key=lambda failure: failure.timestamp)
        return job_status([failure.exitcode for failure in in_order])
    except SignalException as err:
        print(
            f"graft.planning.launch: torchrun stopped by {err.sigval.name}, passed to its processes to save; a "
            "retry resumes from the newest checkpoint",
            file=sys.stderr,
        )
        return os.EX_TEMPFAIL
    return 0


def _stopped_before_start(signum, frame) -> None:
    """SIGTERM before torchrun has started the processes (loading torch, a multi-node rendezvous): nothing to save,
    a stop all the same; torchrun installs its own handler as it starts them."""
    print(f"graft.planning.launch: {signal.Signals(signum).name} before the processes started", file=sys.stderr)
    os._exit(os.EX_TEMPFAIL)


def main(argv: list[str] | None = None) -> None:
    signal.signal(signal.SIGTERM, _stopped_before_start)
    parser = argparse.ArgumentParser(description="A node's torchrun of a training job (under srun with several).")
    parser.add_argument("--nodes", type=int, required=True)
    parser.add_argument("--processes", type=int, required=True)
    parser.add_argument("args", nargs=argparse.REMAINDER, help="-- then the graft command, e.g. -- train ...")
    ns = parser.parse_args(argv)
    args = ns.args[1:] if ns.args[:1] == ["--"] else ns.args
    os.environ.setdefault("TORCH_ELASTIC_SHUTDOWN_TIMEOUT", str(STOP_GRACE_S))
    if ns.nodes == 1:
        raise SystemExit(run_torchrun(torchrun_args(1, ns.processes, args)))
    job_id, nodelist, task = (os.environ.get(k) for k in ("SLURM_JOB_ID", "SLURM_JOB_NODELIST", "SLURM_PROCID"))
    if not job_id or not nodelist or task is None:
        print(
            f"graft.planning.launch: scale.nodes: {ns.nodes} needs a Slurm job step (srun sets SLURM_JOB_ID, "
            "SLURM_JOB_NODELIST and SLURM_PROCID); run it through the Slurm profile, or set scale.nodes: 1",
            file=sys.stderr,
        )
        raise SystemExit(2)
    # srun puts task 0 on the job's first node: that task hosts the store the others reach there
    node_args = torchrun_args(ns.nodes, ns.processes, args, first_node(nodelist), job_id, is_host=task == "0")
    raise SystemExit(run_torchrun(node_args))


if __name__ == "__main__":
    main()
