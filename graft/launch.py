"""How a training job starts its processes (docs/design.md section 8).

One process: ``graft``. One node: ``torchrun --standalone`` with ``scale.processes`` processes. Several nodes
(``scale.nodes`` > 1, under Slurm): ``srun`` starts one task per node and each task runs this module, which
starts that node's ``torchrun``; the torchruns meet by c10d rendezvous on the job's first node (its TCP store
on a port derived from the Slurm job id, so two jobs sharing a node do not collide) and number the nodes among
themselves. ``python -m graft.launch --nodes N --processes P -- train ...`` outside a Slurm job says so in one
line and starts nothing.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

from graft.config import ScaleSpec

RENDEZVOUS_PORTS = (29500, 20000)
"""The first port and how many: a job's rendezvous port is the first plus its job id modulo the count."""


def train_launcher(scale: ScaleSpec) -> str:
    """The command that stands for ``graft`` in a training job's shell command."""
    if scale.nodes > 1:
        return (
            f"srun --ntasks {scale.nodes} --kill-on-bad-exit=1 python -m graft.launch "
            f"--nodes {scale.nodes} --processes {scale.processes} --"
        )
    if scale.processes > 1:
        return f"torchrun --standalone --nproc-per-node {scale.processes} -m graft.cli"
    return "graft"


def first_node(nodelist: str) -> str:
    """The first host of a Slurm node list (``node[03-05],gpu7`` -> ``node03``), as ``scontrol`` expands it."""
    out = subprocess.run(["scontrol", "show", "hostnames", nodelist], capture_output=True, text=True, check=True)
    return out.stdout.split()[0]


def torchrun_command(nodes: int, processes: int, head: str, job_id: str, args: list[str]) -> list[str]:
    """One node's torchrun of a multi-node job: c10d rendezvous at ``head``, the job id as the rendezvous id."""
    first, count = RENDEZVOUS_PORTS
    port = first + int(job_id) % count
    return [
        sys.executable,
        "-m",
        "torch.distributed.run",
        f"--nnodes={nodes}",
        f"--nproc-per-node={processes}",
        "--rdzv-backend=c10d",
        f"--rdzv-endpoint={head}:{port}",
        f"--rdzv-id={job_id}",
        "-m",
        "graft.cli",
        *args,
    ]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="One node's torchrun of a multi-node training job (under srun).")
    parser.add_argument("--nodes", type=int, required=True)
    parser.add_argument("--processes", type=int, required=True)
    parser.add_argument("args", nargs=argparse.REMAINDER, help="-- then the graft command, e.g. -- train ...")
    ns = parser.parse_args(argv)
    args = ns.args[1:] if ns.args[:1] == ["--"] else ns.args
    job_id, nodelist = os.environ.get("SLURM_JOB_ID"), os.environ.get("SLURM_JOB_NODELIST")
    if not job_id or not nodelist:
        print(
            f"graft.launch: scale.nodes: {ns.nodes} needs a Slurm job (srun sets SLURM_JOB_ID and "
            "SLURM_JOB_NODELIST); run it through the Slurm profile, or set scale.nodes: 1",
            file=sys.stderr,
        )
        raise SystemExit(2)
    command = torchrun_command(ns.nodes, ns.processes, first_node(nodelist), job_id, args)
    os.execv(command[0], command)


if __name__ == "__main__":
    main()
