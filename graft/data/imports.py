"""Another framework's finished GRPO run as a trajectory archive that archive replay can read.

verl's ``trainer.rollout_data_dir`` writes one ``{step}.jsonl`` per training step (1-based) with ``input`` (the
decoded prompt), ``output`` (the decoded response) and ``score``; other tools write JSON Lines with a ``step``
field (0-based: updates before the rollout), a ``prompt`` and a ``response``, or a ``completion`` as TRL and
Hugging Face datasets name it, either of them text or, in the conversational form, a list of messages (the prompt's
contents are matched; the completion must be one assistant message). Either becomes this project's per-step
records:

- each dumped prompt is matched to a training problem of the config by its text (the problem's text appears in
  the prompt); too few matches are refused with the counts;
- the responses of one prompt at one step form its group; the groups of a step, in their order in the dump,
  form that step's batch, which replay then follows instead of its own sampler;
- rewards are re-verified with this project's grader, advantages computed on each group (Eq. 1);
- dumps carry no token ids or log-probs, but the gate needs the source's mean log-likelihood (Eq. 7): the
  response is tokenized with the source model's tokenizer (EOS appended unless it reached the length limit) and
  scored with a forward pass of the source model at the nearest checkpoint at or before the step (the config's
  model itself before the first checkpoint). That approximates the behaviour policy: exact when the checkpoint
  is the one that sampled the step and the tokenizer reproduces the sampled tokens, off by the updates since the
  checkpoint otherwise, and in the numerics of a training forward rather than the rollout engine's.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

import torch

from graft.algo import group_advantages
from graft.config import RunConfig
from graft.data.problems import Problem, json_kind, load_problems, read_jsonl
from graft.data.records import StepRecords, write_step
from graft.engine.policy import Policy, check_model_dir, load_policy
from graft.engine.reward import Grader
from graft.engine.scoring import ScoringSettings, score_responses
from graft.errors import ConfigError
from graft.results import parse_step, write_text

FORMATS = ("verl", "jsonl")
MANIFEST = "archive.json"
"""Written beside an imported archive's step files; replay reads it to follow the archive's prompts."""
_KEY = 24
"""Characters of a problem's text (at most) used to find it in a prompt, which is then checked whole."""


@dataclass(frozen=True)
class Dumped:
    step: int
    """Training updates before this rollout (0 for the first step)."""
    prompt: str
    response: str


def read_dump(directory: Path, fmt: str) -> dict[int, list[Dumped]]:
    """The dump's records by step; a file or line that does not fit the format is refused with one line."""
    if fmt not in FORMATS:
        raise ConfigError(f"--format: {fmt!r} is not allowed; expected one of {', '.join(FORMATS)}")
    if not directory.is_dir():
        raise ConfigError(f"--in: {str(directory)!r} is not a directory")
    files = sorted(directory.glob("*.jsonl"))
    if not files:
        raise ConfigError(f"--in: {str(directory)!r} holds no .jsonl files")
    steps: dict[int, list[Dumped]] = {}
    for path in files:
        if fmt == "verl" and not path.stem.isdigit():
            raise ConfigError(f"--in: {path.name!r} is not a verl rollout dump; expected <step>.jsonl")
        for number, record in read_jsonl(path, "--in"):
            where = f"--in: {str(path)!r} line {number}"
            if fmt == "verl":
                fields = ("input", "output")
            else:
                fields = ("step", "prompt", "completion" if "completion" in record else "response")
            missing = [f for f in fields if f not in record]
            if missing:
                needs = "input, output" if fmt == "verl" else "step, prompt, and response or completion"
                raise ConfigError(f"{where} lacks {missing[0]!r}; {fmt} needs {needs}")
            if fmt != "verl" and (not isinstance(record["step"], int) or isinstance(record["step"], bool)):
                raise ConfigError(f"{where}: step {record['step']!r} is not an integer (updates before the rollout)")
            step = int(path.stem) - 1 if fmt == "verl" else int(record["step"])
            for name in fields[-2:]:
                if not isinstance(record[name], str | list):  # str() would make null the text 'None'
                    kind = json_kind(record[name])
                    raise ConfigError(f"{where}: {name!r} is {kind}; expected text (or a list of messages)")
            prompt, response = (record[f] for f in fields[-2:])
            steps.setdefault(step, []).append(
                Dumped(step, _prompt_text(prompt, where), _completion_text(response, where))
            )
    if not steps:
        raise ConfigError(f"--in: the .jsonl files of {str(directory)!r} hold no records")
    if min(steps) < 0:
        raise ConfigError(f"--in: step {min(steps) + (1 if fmt == 'verl' else 0)} is not allowed (verl counts from 1)")
    return dict(sorted(steps.items()))


def _prompt_text(prompt: object, where: str) -> str:
    """A dumped prompt as text: itself, or a conversation's message contents one a line (the problem is found in
    them; the config's own template makes the prompt the archive stores)."""
    if isinstance(prompt, list):
        if not all(isinstance(m, dict) and isinstance(m.get("content"), str) for m in prompt):
            raise ConfigError(f"{where}: the prompt is a list but not of messages with text 'content'")
        return "\n".join(m["content"] for m in prompt)
    return str(prompt)


def _completion_text(completion: object, where: str) -> str:
    """A dumped response as text: itself, or a conversational completion's one assistant message."""
    if isinstance(completion, list):
        if len(completion) != 1 or not isinstance(completion[0], dict) or completion[0].get("role") != "assistant":
            raise ConfigError(
                f"{where}: the completion is a list of {len(completion)} item(s); expected one assistant message"
            )
        content = completion[0].get("content")
        if not isinstance(content, str):
            raise ConfigError(f"{where}: the assistant message's 'content' is not text")
        return content
    return str(completion)


def _normal(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


class ProblemIndex:
    """Finds the training problem whose (whitespace-normalised) text occurs in a prompt; the longest wins."""

    def __init__(self, problems: list[Problem]):
        texts = [(_normal(p.text), p) for p in problems]
        self.key = max(1, min(_KEY, *(len(t) for t, _ in texts)))
        self.by_key: dict[str, list[tuple[str, Problem]]] = {}
        for text, p in texts:
            self.by_key.setdefault(text[: self.key], []).append((text, p))

    def find(self, prompt: str) -> Problem | None:
        text = _normal(prompt)
        best = None
        for i in range(len(text)):
            for whole, problem in self.by_key.get(text[i : i + self.key], ()):
                if text.startswith(whole, i) and (best is None or len(whole) > len(best[0])):
                    best = (whole, problem)
        return best[1] if best else None


def checkpoint_for(source: Path | None, updates: int, model: str, fallback: str) -> str:
    """The source weights that sampled a step: ``source`` itself when it is a model directory; in a directory of
    checkpoints (this project's ``step_N/<model>``, verl's ``global_step_N/actor/huggingface``, TRL's and the
    transformers Trainer's ``checkpoint-N``) the one saved after the most updates <= ``updates``; before the first
    checkpoint, or without ``source``, ``fallback``."""
    if source is None:
        return fallback
    if (source / "config.json").is_file():
        return str(source)
    found = []
    for child in source.iterdir():
        n = parse_step(child.name)
        for prefix in ("global_step_", "checkpoint-"):
            if n is None and child.name.startswith(prefix) and child.name[len(prefix) :].isdigit():
                n = int(child.name[len(prefix) :])
        for path in (child / model, child / "actor" / "huggingface", child):
            if n is not None and (path / "config.json").is_file():
                found.append((n, str(path)))
                break
    if not found:
        raise ConfigError(f"--source-model: {str(source)!r} is neither a model directory nor holds checkpoints")
    usable = [(n, path) for n, path in found if n <= updates]
    return max(usable)[1] if usable else fallback


def import_archive(
    config: RunConfig,
    model: str,
    fmt: str,
    dump: Path,
    out: Path,
    source: Path | None = None,
    min_match: float = 0.9,
    log=lambda **fields: None,
) -> dict:
    """Convert a dump into ``out/step_NNNNN.parquet`` records of ``model`` and the archive manifest."""
    if model not in config.models:
        raise ConfigError(f"--model: unknown model {model!r}; models: {', '.join(config.models)}")
    steps = read_dump(dump, fmt)
    problems = load_problems(config.data.train, "data.train", config.reward.kind)
    index = ProblemIndex(problems)
    matched = {id(d): index.find(d.prompt) for records in steps.values() for d in records}
    total, hits = len(matched), sum(p is not None for p in matched.values())
    if hits < min_match * total:
        raise ConfigError(
            f"--in: only {hits} of {total} dumped prompts match a problem of data.train "
            f"({str(config.data.train)!r}); expected at least {min_match:.0%} (--min-match)"
        )
    sources = {updates: checkpoint_for(source, updates, model, config.models[model].path) for updates in steps}
    for weights in sorted(set(sources.values())):
        what = f"models.{model}.path" if weights == config.models[model].path else "--source-model"
        check_model_dir(weights, what, config, model)
    grader = Grader(config.reward.kind, config.reward.timeout, config.reward.workers)
    manifest = {"format": fmt, "source_dump": str(dump), "model": model, "steps": {}, "follow_prompts": True}
    loaded: tuple[str, Policy] | None = None
    try:
        for ours, (updates, records) in enumerate(steps.items()):
            weights = sources[updates]
            if loaded is None or loaded[0] != weights:  # one source model in memory at a time
                loaded = (weights, load_policy(model, config.models[model], path=weights))
            rec = _step_records(config, loaded[1], ours, updates, records, matched, grader)
            write_step(rec, out)
            manifest["steps"][str(ours)] = {"source_step": updates, "weights": weights, "prompts": rec.rewards.shape[0]}
            log(
                step=ours,
                of=len(steps),
                prompts=rec.rewards.shape[0],
                n=rec.n,
                reward=round(float(rec.rewards.mean()), 4),
            )
    finally:
        grader.close()
    manifest["matched_prompts"], manifest["dumped_prompts"] = hits, total
    write_text(out / MANIFEST, json.dumps(manifest, indent=2) + "\n")
    return manifest


def _step_records(
    config: RunConfig,
    policy: Policy,
    step: int,
    updates: int,
    records: list[Dumped],
    matched: dict[int, Problem | None],
    grader: Grader,
) -> StepRecords:
    """One step's groups (in dump order), re-verified rewards, and the source's tokens and log-probs."""
    groups: dict[str, list[Dumped]] = {}
    order: list[Problem] = []
    for d in records:
        problem = matched[id(d)]
        if problem is None:
            continue
        if problem.id not in groups:
            order.append(problem)
        groups.setdefault(problem.id, []).append(d)
    sizes = sorted({len(g) for g in groups.values()})
    if len(sizes) != 1:
        raise ConfigError(f"--in: step {updates}: groups of sizes {sizes}; expected the same n for every prompt")
    n = sizes[0]
    texts = [[d.response for d in groups[p.id]] for p in order]
    grades = grader.grade([t for row in texts for t in row], [p.answer for p in order for _ in range(n)])
    rewards = torch.tensor(grades.rewards, dtype=torch.float32).reshape(len(order), n)
    limit = config.train.max_response_tokens
    prompt_ids, token_ids, truncated = [], [], []
    for p, row in zip(order, texts, strict=True):
        prompt = policy.encode(policy.prompt_text(p.problem))
        for text in row:
            ids = policy.tokenizer(text, add_special_tokens=False)["input_ids"]
            cut = len(ids) >= limit  # reached the length limit: no EOS was generated
            prompt_ids.append(prompt)
            token_ids.append(ids[:limit] if cut else [*ids, policy.eos_token_id])
            truncated.append(cut)
    logps, _ = score_responses(policy, prompt_ids, token_ids, ScoringSettings.from_train(config.train))
    by_group = lambda flat: [flat[g * n : (g + 1) * n] for g in range(len(order))]  # noqa: E731
    return StepRecords(
        model=policy.name,
        step=step,
        prompt_ids=[p.id for p in order],
        texts=texts,
        token_ids=by_group(token_ids),
        logprobs=by_group(logps),
        rewards=rewards,
        advantages=group_advantages(rewards),
        truncated=by_group(truncated),
    )


def read_manifest(archive: Path) -> dict | None:
    """An imported archive's manifest, or None for an archive without one (a run's own trajectories); one that is
    not UTF-8 JSON, or lacks its per-step entries, is refused with one line naming it."""
    path = archive / MANIFEST
    if not path.is_file():
        return None
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ConfigError(f"--peer-archive: {str(path)!r} is not JSON ({err}); re-import the archive") from None
    steps = manifest.get("steps") if isinstance(manifest, dict) else None
    if not isinstance(steps, dict) or not all(isinstance(e, dict) for e in steps.values()):
        raise ConfigError(f"--peer-archive: {str(path)!r} has no 'steps' object of per-step entries")
    return manifest


def follows_prompts(archive: Path) -> bool:
    """Whether replay of ``archive`` takes each step's batch from it (an imported archive)."""
    manifest = read_manifest(archive)
    return manifest is not None and bool(manifest.get("follow_prompts"))
