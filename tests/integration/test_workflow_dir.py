"""The suite's Snakemake runs in a working directory of its own (tests/helpers/workflow_dir.py), so that a checkout's
``.snakemake/`` (a user's locks, metadata, logs) and ``results/`` are untouched by the tests: a dry run through the
Slurm profile, a real job and ``--unlock``, each with a results path relative to the working directory, as a page's
command has it."""

from __future__ import annotations

import base64
import uuid
from pathlib import Path

from helpers.workflow_dir import ROOT, WORKDIR, checkout_state, run_in, tool


def records(snakemake_dir: Path, kind: str) -> set[str]:
    """The paths Snakemake keeps records of (``kind``: metadata, incomplete) in a ``.snakemake/`` directory: each
    record's name is its path in URL-safe base64, cut into parts of a file name's length (the first ones marked
    with ``@``)."""
    top = snakemake_dir / kind
    found = set()
    for path in top.rglob("*") if top.is_dir() else ():
        if path.is_file():
            encoded = "".join(part.lstrip("@") for part in path.relative_to(top).parts)
            found.add(base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)).decode(errors="replace"))
    return found


def mentions(relative: str, token: str) -> bool:
    """Whether an entry of the checkout (``relative`` to it) names ``token``: in its path, in the path a Snakemake
    record's name encodes, or in its text."""
    path = ROOT / relative
    if token in relative:
        return True
    for kind in ("metadata", "incomplete"):
        if relative.startswith(f".snakemake/{kind}/") and any(token in p for p in records(ROOT / ".snakemake", kind)):
            return True
    try:
        return path.is_file() and token in path.read_text(errors="replace")
    except OSError:
        return False


def test_snakemake_in_the_suite_writes_its_records_and_results_in_its_own_directory_not_the_checkouts(tmp_path):
    """The checkout's .snakemake/ and results/ are listed with each entry's modification time before and after;
    nothing that changed names this test's results (a name of its own, so that another person's Snakemake in the
    checkout meanwhile is not taken for this test's), and each command's records are in its working directory."""
    token = f"checkout-check-{uuid.uuid4().hex[:12]}"
    before = checkout_state()
    work = tmp_path / WORKDIR
    dry = run_in(
        tmp_path,
        tool("snakemake"),
        "all",
        "--profile",
        "slurm",
        "--configfile",
        "config/pair-8b.yaml",  # a profile, a chat template and the GPU check's record, all read relative
        "--dry-run",
        "--config",
        f"results=results/{token}/pair-8b",
        "slurm={site_check: false}",
        timeout=600,
    )
    assert dry.returncode == 0, dry.stderr[-3000:]
    assert (work / ".snakemake").is_dir()  # the dry run's working directory, the only one Snakemake writes in
    target = f"results/{token}/smoke/methods.yaml"
    smoke = [tool("snakemake"), target, "--cores", "1", "--configfile", "config/smoke.yaml"]
    done = run_in(tmp_path, *smoke, "--config", f"results=results/{token}/smoke", timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert (work / target).is_file() and (work / "results" / token / "smoke" / "config.yaml").is_file()
    assert any(token in path for path in records(work / ".snakemake", "metadata"))
    unlock = run_in(tmp_path, tool("snakemake"), "--unlock", "--configfile", "config/smoke.yaml", timeout=600)
    assert unlock.returncode == 0, unlock.stderr[-3000:]
    after = checkout_state()
    changed = sorted(path for path in before.keys() | after.keys() if before.get(path) != after.get(path))
    assert not (ROOT / "results" / token).exists()
    assert not [path for path in changed if mentions(path, token)], changed
    assert not any(token in path for path in records(ROOT / ".snakemake", "metadata"))
