"""A model directory graft cannot train or sample from is refused in one line naming it, before any compute: one
that a download left incomplete (naming the file it lacks, before transformers reads it), one of a family graft
does not handle, and one whose loaded model lacks weights, holds weights of other shapes, has more tokens than
embedding rows, no token to end a response, too few positions for the config's lengths or a chat template that
does not render. Every command that loads a model refuses it so, and writes nothing."""

from __future__ import annotations

import json
import re
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

import huggingface_hub
import pytest
import torch
import yaml
from helpers.own_pair import own_pair_config
from helpers.tiny_qwen3 import tiny_model_dir, tiny_qwen3
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from safetensors.torch import load_file, save_file

from graft.cli import main
from graft.config import load_config
from graft.engine.policy import check_model_dir
from graft.errors import ConfigError
from graft.results import temp_dir
from graft.toy.models import ToyArch, build_model, build_tokenizer, save


@pytest.mark.parametrize(
    ("missing", "message"),
    [
        ("config.json", "is not a model directory: it lacks config.json"),
        ("tokenizer_config.json", "it lacks tokenizer_config.json (the tokenizer's settings"),
        ("tokenizer.json", "it lacks tokenizer.json (the tokenizer's vocabulary"),
        ("model.safetensors", "it lacks model.safetensors (the weights"),
    ],
)
def test_a_model_directory_missing_a_file_is_refused_naming_it(tmp_path, missing, message):
    model = tiny_model_dir(tmp_path / "m")
    assert check_model_dir(model, "models.a.path") == model
    (model / missing).unlink()
    with pytest.raises(ConfigError) as err:
        check_model_dir(model, "models.a.path")
    assert str(err.value).startswith(f"models.a.path: '{model}' ") and message in str(err.value)
    assert "\n" not in str(err.value)


def test_a_missing_or_truncated_shard_is_refused_naming_it(tmp_path):
    model = tiny_model_dir(tmp_path / "m", shard_bytes=20_000)
    shards = sorted(model.glob("model-*.safetensors"))
    assert len(shards) > 2 and check_model_dir(model, "w") == model
    data = shards[1].read_bytes()
    shards[1].write_bytes(data[:-100])
    with pytest.raises(ConfigError, match=rf"'{shards[1]}' is {len(data) - 100:,} bytes where its header says "):
        check_model_dir(model, "w")
    shards[1].unlink()
    with pytest.raises(ConfigError, match=rf"lacks {shards[1].name} \(1 of the {len(shards)} weight shards "):
        check_model_dir(model, "w")


def test_graft_plan_and_train_refuse_a_half_downloaded_model_in_one_line(tmp_path, capsys):
    config = own_pair_config(tmp_path)
    model = tmp_path / "smollm2"
    (model / "tokenizer.json").unlink()
    capsys.readouterr()  # the directories' build
    assert main(["plan", "--config", str(config)]) == 2
    err = capsys.readouterr().err
    assert f"models.smollm2.path: '{model}' is not a complete model directory: it lacks tokenizer.json" in err
    assert err.count("\n") == 1
    # one process with the Hugging Face sampler: what graft train starts with outside torchrun
    raw = yaml.safe_load(config.read_text())
    raw["scale"] = {}
    config.write_text(yaml.safe_dump(raw))
    argv = ["train", "--config", str(config), "--method", "grpo_n8", "--models", "smollm2", "--seed", "0"]
    assert main([*argv, "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert "it lacks tokenizer.json" in err and err.count("\n") == 1


@pytest.mark.parametrize("name", ["config.json", "tokenizer_config.json", "tokenizer.json"])
@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda b: b[: len(b) // 2], "is not JSON \\((Unterminated|Expecting)"),
        (lambda b: b"\x89\xfe\x00garbage" + b[9:], "is not JSON \\('utf-8' codec can't decode"),
        (lambda b: b.decode().replace("{", "\u00e9{", 1).encode("latin-1", "replace"), "is not JSON \\("),
        (lambda b: b"[1, 2]", "is not a JSON object"),
    ],
)
def test_a_garbled_json_file_of_a_model_directory_is_refused_naming_it(tmp_path, name, damage, message):
    model = tiny_model_dir(tmp_path / "m")
    (model / name).write_bytes(damage((model / name).read_bytes()))
    with pytest.raises(ConfigError, match=rf"^models.a.path: '{model / name}' ") as err:
        check_model_dir(model, "models.a.path")
    assert "\n" not in str(err.value)
    assert re.search(message, str(err.value))


@pytest.mark.parametrize(
    ("header", "message"),
    [
        (b"\xff\xfe not json", "has no readable safetensors header"),
        (b'{"w": {"dtype": "F32"}}', "has a safetensors header without its tensors' data offsets"),
        (b'{"w": 3}', "has a safetensors header without its tensors' data offsets"),
    ],
)
def test_a_garbled_safetensors_header_is_refused_naming_the_file(tmp_path, header, message):
    model = tiny_model_dir(tmp_path / "m")
    weights = model / "model.safetensors"
    weights.write_bytes(len(header).to_bytes(8, "little") + header + b"\x00" * 64)
    with pytest.raises(ConfigError, match=rf"^w: '{weights}' {message}: a partial download or copy$"):
        check_model_dir(model, "w")


CHAT_TEMPLATE = Path(__file__).resolve().parents[3] / "config" / "chat_templates" / "chatml_user.jinja"
PROMPT_TOKENS, RESPONSE_TOKENS = 32, 16
FAMILIES = "graft trains the causal LMs llama, qwen2, qwen3, smollm3, gpt2"


@pytest.fixture(scope="module")
def pristine(tmp_path_factory) -> Path:
    """A tiny Qwen3 directory that every check passes, with a chat template (model ``a`` is prompted through it)."""
    model = tiny_model_dir(tmp_path_factory.mktemp("pristine") / "m")
    (model / "chat_template.jinja").write_text(CHAT_TEMPLATE.read_text())
    return model


def write_config(root: Path, a: Path, b: Path) -> Path:
    """A config of models ``a`` (chat) and ``b`` with a few toy problems as training, validation and benchmark
    data."""
    problems = root / "problems.jsonl"
    rows = ({"id": f"p{i}", "problem": f"What is {i} + {i}?", "answer": str(2 * i)} for i in range(4))
    problems.write_text("".join(json.dumps(row) + "\n" for row in rows))
    config = {
        "results": str(root / "results"),
        "models": {"a": {"path": str(a), "chat": True}, "b": {"path": str(b)}},
        "data": {"train": str(problems), "validation": str(problems)},
        "train": {
            "steps": 1,
            "prompts_per_step": 2,
            "max_prompt_tokens": PROMPT_TOKENS,
            "max_response_tokens": RESPONSE_TOKENS,
        },
        "reward": {"kind": "toy"},
        "eval": {"benchmarks": {"sums": str(problems)}, "validation": str(problems), "k": 1, "selection_runs": 1},
        "pairs": {"P": ["a", "b"]},
    }
    path = root / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def _edit_json(model: Path, name: str, change: Callable[[dict], object]) -> None:
    data = json.loads((model / name).read_text())
    change(data)
    (model / name).write_text(json.dumps(data))


def _edit_weights(model: Path, change: Callable[[dict[str, torch.Tensor]], dict[str, torch.Tensor]]) -> None:
    path = model / "model.safetensors"
    save_file(change(load_file(path)), path, metadata={"format": "pt"})


def _drop_special_tokens(model: Path) -> None:
    """No EOS and no pad token anywhere: tokenizer, model config or generation config."""
    for name, keys in [
        ("tokenizer_config.json", ("eos_token", "pad_token", "bos_token")),
        ("config.json", ("eos_token_id", "pad_token_id", "bos_token_id")),
        ("generation_config.json", ("eos_token_id", "pad_token_id", "bos_token_id")),
    ]:
        _edit_json(model, name, lambda data, keys=keys: [data.pop(key, None) for key in keys])


Q_PROJ, GATE_PROJ = "model.layers.0.self_attn.q_proj.weight", "model.layers.0.mlp.gate_proj.weight"
DAMAGES: dict[str, tuple[Callable[[Path], object], str]] = {
    "model_type bert": (
        lambda m: _edit_json(m, "config.json", lambda d: d.update(model_type="bert")),
        f"holds a model of type 'bert' (config.json's model_type); {FAMILIES}",
    ),
    "unknown model_type": (
        lambda m: _edit_json(m, "config.json", lambda d: d.update(model_type="frobnitz")),
        f"holds a model of type 'frobnitz' (config.json's model_type); {FAMILIES}",
    ),
    "weights renamed": (
        lambda m: _edit_weights(m, lambda w: {k.replace("model.", "decoder.", 1): v for k, v in w.items()}),
        "lacks 13 of the weights of its Qwen3ForCausalLM (model.embed_tokens.weight, model.layers.0.input_layernorm"
        ".weight, model.layers.0.mlp.down_proj.weight and 10 more); it holds 13 it does not use (decoder.",
    ),
    "weights dropped": (
        lambda m: _edit_weights(m, lambda w: {k: v for k, v in w.items() if k != Q_PROJ}),
        f"lacks 1 of the weights of its Qwen3ForCausalLM ({Q_PROJ}): every weight must be in its safetensors",
    ),
    "weights resized": (
        lambda m: _edit_weights(m, lambda w: {**w, GATE_PROJ: w[GATE_PROJ][:10]}),
        f"holds weights of other shapes than its config.json gives ({GATE_PROJ} [10, 32] where the model has [64,",
    ),
    "vocabulary beyond the embedding": (
        lambda m: tiny_qwen3(vocab=200).save_pretrained(m),
        "tokenizer has 271 tokens but its embedding 200 rows",
    ),
    "safetensors without tensors": (
        lambda m: save_file({}, m / "model.safetensors", metadata={"format": "pt"}),
        "model.safetensors' holds no tensors",
    ),
    "no special tokens": (_drop_special_tokens, "names no end-of-sequence token"),
    "too few positions": (
        lambda m: _edit_json(m, "config.json", lambda d: d.update(max_position_embeddings=40)),
        f"has 40 positions (config.json's max_position_embeddings or n_positions), fewer than the "
        f"{PROMPT_TOKENS + RESPONSE_TOKENS} tokens",
    ),
    "chat template with a syntax error": (
        lambda m: (m / "chat_template.jinja").write_text("{% for message in messages %}{{ message['content'] }"),
        "does not render a user message: TemplateSyntaxError: unexpected '}'",
    ),
    "truncated weights": (
        lambda m: (m / "model.safetensors").write_bytes((m / "model.safetensors").read_bytes()[:-100]),
        "bytes where its header says",
    ),
    "garbled config.json": (
        lambda m: (m / "config.json").write_text((m / "config.json").read_text()[:40]),
        "config.json' is not JSON",
    ),
}


@pytest.mark.parametrize("damage", DAMAGES)
def test_a_damaged_model_directory_is_refused_in_one_line_naming_it(tmp_path, pristine, damage):
    model = shutil.copytree(pristine, tmp_path / "a")
    config = load_config(write_config(tmp_path, model, pristine))
    assert check_model_dir(model, "models.a.path", config, "a") == model
    damage_dir, message = DAMAGES[damage]
    damage_dir(model)
    with pytest.raises(ConfigError) as err:
        check_model_dir(model, "models.a.path", config, "a")
    assert str(model) in str(err.value) and message in str(err.value)
    assert "\n" not in str(err.value)


def _train(config: Path, out: Path, capsys) -> str:
    """``graft train``'s one-line refusal, with nothing written in ``out``."""
    capsys.readouterr()
    argv = ["train", "--config", str(config), "--method", "grpo_n8", "--models", "a", "--seed", "0"]
    assert main([*argv, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("graft: error: ") and err.count("\n") == 1 and "Traceback" not in err
    assert not out.exists()
    return err


@pytest.mark.parametrize(
    "damage",
    [
        "model_type bert",  # a BertLMHeadModel with every weight missing was trained at random initialisation
        "safetensors without tensors",  # every weight missing, trained at random initialisation
        "no special tokens",  # an IndexError mid-rollout, with run.json written
        "chat template with a syntax error",  # a Jinja traceback
        "unknown model_type",  # transformers' traceback
    ],
)
def test_graft_train_refuses_what_it_once_trained_or_crashed_on(tmp_path, pristine, capsys, damage):
    model = shutil.copytree(pristine, tmp_path / "a")
    DAMAGES[damage][0](model)
    err = _train(write_config(tmp_path, model, pristine), tmp_path / "run", capsys)
    assert str(model) in err and DAMAGES[damage][1] in err


def test_a_gpt2_with_fewer_positions_than_prompt_plus_response_is_refused(tmp_path, pristine, capsys):
    """It crashed mid-rollout with an IndexError past its learned positions; the evaluation's longer responses
    count as well as training's."""
    tokenizer = build_tokenizer(["What is 2+3? so \\boxed{5}"] * 4, "gpt2_regex", 300)
    arch = ToyArch("gpt2", "gpt2_regex", 300, hidden=16, layers=1, heads=2)
    gpt2 = save(build_model(arch, tokenizer, max_positions=PROMPT_TOKENS + RESPONSE_TOKENS), tokenizer, tmp_path / "a")
    config = write_config(tmp_path, gpt2, pristine)
    raw = yaml.safe_load(config.read_text())
    raw["models"]["a"]["chat"] = False
    config.write_text(yaml.safe_dump(raw))
    assert check_model_dir(gpt2, "models.a.path", load_config(config), "a") == gpt2
    raw["train"]["max_prompt_tokens"] += 1
    config.write_text(yaml.safe_dump(raw))
    err = _train(config, tmp_path / "run", capsys)
    assert f"'{gpt2}' has 48 positions (config.json's max_position_embeddings or n_positions), fewer than the 49" in err
    raw["train"]["max_prompt_tokens"] -= 1
    raw["eval"]["max_response_tokens"] = RESPONSE_TOKENS + 8
    config.write_text(yaml.safe_dump(raw))
    assert "fewer than the 56 tokens of a prompt and its response" in _train(config, tmp_path / "run", capsys)


ENTRY_POINTS = ("train", "evaluate", "reevaluate", "complementarity", "fetch model", "plan")
"""The commands that load a model directory."""


def _command(entry: str, ex: Path, pristine: Path, damage: str, monkeypatch) -> tuple[list[str], Path]:
    """The command line of ``entry`` on a copy of ``pristine`` damaged by ``damage`` (model ``a``), in ``ex``:
    its output ``ex/out`` (none for plan), and the directory its refusal names."""
    model = ex / "run" / "checkpoints" / "step_00001" / "a" if entry == "reevaluate" else ex / "a"
    shutil.copytree(pristine, model)
    DAMAGES[damage][0](model)
    config, out = str(write_config(ex, model, pristine)), str(ex / "out")
    if entry == "train":
        return ["train", "--config", config, "--method", "grpo_n8", "--models", "a", "--seed", "0", "--out", out], model
    if entry == "evaluate":
        return ["evaluate", "--config", config, "--checkpoint", str(model), "--model", "a", "--out", out], model
    if entry == "reevaluate":  # the run's one checkpoint, selected by its one evaluation
        (ex / "run" / "run.json").write_text(json.dumps({"models": ["a"], "seed": 0}))
        evaluation = {"step": 1, "average": 0.5, "benchmarks": {"sums": {"pass@1": 0.5}}, "validation": {"pass@1": 0.5}}
        evaluation |= {"model": "a", "checkpoint": str(model)}  # what it evaluated: the run's checkpoint
        (ex / "evals" / "a").mkdir(parents=True)
        (ex / "evals" / "a" / "step_00001.json").write_text(json.dumps(evaluation))
        evals = str(ex / "evals")
        return ["reevaluate", "--config", config, "--run", str(ex / "run"), "--evals", evals, "--out-dir", out], model
    if entry == "complementarity":
        return ["complementarity", "--config", config, "--models", "a,b", "--out", out], model
    if entry == "fetch model":  # the download is the damaged directory, checked where it is downloaded to
        download = lambda hub_id, local_dir, **_: shutil.copytree(model, local_dir, dirs_exist_ok=True)  # noqa: E731
        monkeypatch.setattr(huggingface_hub, "snapshot_download", download)
        argv = ["fetch", "model", "--hub-id", "owner/tiny", "--out", out, "--config", config, "--model", "a"]
        return argv, temp_dir(out)
    return ["plan", "--config", config], model


@settings(max_examples=100, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(damage=st.sampled_from(sorted(DAMAGES)), entry=st.sampled_from(ENTRY_POINTS))
def test_every_command_that_loads_a_model_refuses_a_damaged_one_in_one_line(
    pristine, capsys, monkeypatch, damage, entry
):
    with tempfile.TemporaryDirectory() as tmp:
        ex = Path(tmp)
        argv, named = _command(entry, ex, pristine, damage, monkeypatch)
        capsys.readouterr()
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.startswith("graft: error: ") and err.count("\n") == 1 and "Traceback" not in err
        assert str(named) in err and DAMAGES[damage][1] in err
        assert not (ex / "out").exists()
