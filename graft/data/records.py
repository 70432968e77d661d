"""Trajectory records: the one boundary between models (docs/design.md section 4).

A model publishes, per step, every response it sampled: prompt id, response text, its own token ids, per-token
generation log-probs, reward, advantage. Stored as one Parquet file per step and model, they are also the archive
that replay reads.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import torch

from graft.errors import ConfigError
from graft.results import atomic_path, trajectory_file

SCHEMA = pa.schema(
    [
        ("step", pa.int32()),
        ("model", pa.string()),
        ("prompt_id", pa.string()),
        ("prompt_index", pa.int32()),
        ("sample_index", pa.int32()),
        ("response", pa.string()),
        ("token_ids", pa.list_(pa.int32())),
        ("logprobs", pa.list_(pa.float32())),
        ("reward", pa.float32()),
        ("advantage", pa.float32()),
        ("truncated", pa.bool_()),
    ]
)


@dataclass
class StepRecords:
    """All of one model's groups at one step: G prompts x n responses."""

    model: str
    step: int
    prompt_ids: list[str]
    texts: list[list[str]]
    token_ids: list[list[list[int]]]
    logprobs: list[list[list[float]]]
    rewards: torch.Tensor
    """[G, n] float."""
    advantages: torch.Tensor
    """[G, n] float, computed by the source on its own full group."""
    truncated: list[list[bool]]
    trained_logprobs: list[list[list[float]]] | None = None
    """The same tokens' log-probs under the model's training forward before the step's first update
    (``train.old_logprobs: recompute``); None when the generation log-probs serve. Kept in memory only: the
    published records carry generation log-probs (docs/design.md section 10)."""

    @classmethod
    def from_samples(
        cls, model: str, step: int, prompt_ids: list[str], samples, rewards: torch.Tensor, advantages: torch.Tensor
    ) -> StepRecords:
        """A model's records of one step from its sampled groups (one list of graft.engine ``Sample``s per prompt),
        with their rewards and advantages ``[G, n]``."""
        return cls(
            model=model,
            step=step,
            prompt_ids=prompt_ids,
            texts=[[s.text for s in group] for group in samples],
            token_ids=[[s.token_ids for s in group] for group in samples],
            logprobs=[[s.logprobs for s in group] for group in samples],
            rewards=rewards,
            advantages=advantages,
            truncated=[[s.truncated for s in group] for group in samples],
        )

    @property
    def n(self) -> int:
        return self.rewards.shape[1]

    def take(self, groups: list[int]) -> StepRecords:
        """The records of some of the groups, in the order given."""
        pick = lambda rows: [rows[g] for g in groups]  # noqa: E731
        index = torch.tensor(groups, dtype=torch.long)
        return StepRecords(
            self.model,
            self.step,
            pick(self.prompt_ids),
            pick(self.texts),
            pick(self.token_ids),
            pick(self.logprobs),
            self.rewards[index],
            self.advantages[index],
            pick(self.truncated),
            None if self.trained_logprobs is None else pick(self.trained_logprobs),
        )

    @staticmethod
    def concat(parts: list[StepRecords]) -> StepRecords:
        """One model's groups of one step drawn in several rounds (dynamic sampling), in round order."""
        first = parts[0]
        join = lambda name: [row for p in parts for row in getattr(p, name)]  # noqa: E731
        trained = None if first.trained_logprobs is None else join("trained_logprobs")
        return StepRecords(
            first.model,
            first.step,
            join("prompt_ids"),
            join("texts"),
            join("token_ids"),
            join("logprobs"),
            torch.cat([p.rewards for p in parts]),
            torch.cat([p.advantages for p in parts]),
            join("truncated"),
            trained,
        )

    @staticmethod
    def mix(parts: list[StepRecords], pick: list[int], model: str) -> StepRecords:
        """Records of one step whose group g is ``parts[pick[g]]``'s group g: what a receiver in a group of models
        takes from its several peers, each prompt from the peer chosen for it."""
        rows = lambda name: [getattr(parts[p], name)[g] for g, p in enumerate(pick)]  # noqa: E731
        trained = None if any(p.trained_logprobs is None for p in parts) else rows("trained_logprobs")
        index, groups = torch.tensor(pick, dtype=torch.long), torch.arange(len(pick))
        return StepRecords(
            model,
            parts[0].step,
            list(parts[0].prompt_ids),
            rows("texts"),
            rows("token_ids"),
            rows("logprobs"),
            torch.stack([p.rewards for p in parts])[index, groups],
            torch.stack([p.advantages for p in parts])[index, groups],
            rows("truncated"),
            trained,
        )

    def behaviour_logprobs(self, g: int, i: int) -> list[float]:
        """pi_old's per-token log-probs of response (g, i), the denominator of the ratio (Eqs. 3 and 9)."""
        return (self.trained_logprobs or self.logprobs)[g][i]

    def mean_logprob(self, g: int, i: int, trained: bool = False) -> float:
        """Eq. 6 under the source's own tokenization: from its generation log-probs (the gate, Eq. 7), or, with
        ``trained``, from its training forward where that was recomputed (HACPO's official code)."""
        lp = self.behaviour_logprobs(g, i) if trained else self.logprobs[g][i]
        return sum(lp) / len(lp) if lp else 0.0


def write_step(records: StepRecords, directory: str | Path) -> Path:
    """Write atomically (temporary name, then rename)."""
    rows = []
    for g, pid in enumerate(records.prompt_ids):
        for i in range(records.n):
            rows.append(
                {
                    "step": records.step,
                    "model": records.model,
                    "prompt_id": pid,
                    "prompt_index": g,
                    "sample_index": i,
                    "response": records.texts[g][i],
                    "token_ids": records.token_ids[g][i],
                    "logprobs": records.logprobs[g][i],
                    "reward": float(records.rewards[g, i]),
                    "advantage": float(records.advantages[g, i]),
                    "truncated": records.truncated[g][i],
                }
            )
    path = trajectory_file(directory, records.step)
    with atomic_path(path) as tmp:
        pq.write_table(pa.Table.from_pylist(rows, schema=SCHEMA), tmp)
    return path


def read_table(directory: str | Path, step: int) -> pa.Table:
    """One step's records as a table of SCHEMA's columns, every page decoded; a missing or corrupt file, or one
    lacking a column, is refused with one line naming it."""
    path = trajectory_file(directory, step)
    if not path.is_file():
        raise ConfigError(f"archive: no records for step {step} ({str(path)!r} is missing)")
    try:
        table = pq.read_table(path)
    except (pa.ArrowException, OSError) as err:
        raise ConfigError(
            f"archive: step {step}: {str(path)!r} is not a readable Parquet file ({type(err).__name__})"
        ) from None
    missing = [f.name for f in SCHEMA if f.name not in table.column_names]
    if missing:
        raise ConfigError(f"archive: {str(path)!r} lacks column {missing[0]!r}; expected {', '.join(SCHEMA.names)}")
    if table.num_rows == 0:
        raise ConfigError(f"archive: {str(path)!r} holds no records")
    return table.select(SCHEMA.names)


def archive_prompt_ids(directory: str | Path, steps: int) -> list[list[str]]:
    """The prompt ids of each of the first ``steps`` steps of an archive, in group order, every step's file read
    whole: replay refuses a damaged archive before its first step rather than at the damaged one."""
    ids = []
    for step in range(steps):
        table = read_table(directory, step)
        order = pc.sort_indices(table, [("prompt_index", "ascending")])
        column = table.column("prompt_id").take(order).to_pylist()
        ids.append(list(dict.fromkeys(column)))
    return ids


def read_step(directory: str | Path, step: int) -> StepRecords:
    """Read one step's records; a missing or corrupt file is refused with one line naming it."""
    path = trajectory_file(directory, step)
    rows = read_table(directory, step).to_pylist()
    groups = max(r["prompt_index"] for r in rows) + 1
    n = max(r["sample_index"] for r in rows) + 1
    if len(rows) != groups * n:
        raise ConfigError(f"archive: {str(path)!r} has {len(rows)} rows, not {groups} prompts x {n} samples")
    grid = [[None] * n for _ in range(groups)]
    for r in rows:
        grid[r["prompt_index"]][r["sample_index"]] = r
    return StepRecords(
        model=rows[0]["model"],
        step=step,
        prompt_ids=[grid[g][0]["prompt_id"] for g in range(groups)],
        texts=[[c["response"] for c in row] for row in grid],
        token_ids=[[list(c["token_ids"]) for c in row] for row in grid],
        logprobs=[[list(c["logprobs"]) for c in row] for row in grid],
        rewards=torch.tensor([[c["reward"] for c in row] for row in grid]),
        advantages=torch.tensor([[c["advantage"] for c in row] for row in grid]),
        truncated=[[c["truncated"] for c in row] for row in grid],
    )
