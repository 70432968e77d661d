"""Where a response ends: each paper model's prompt format stops at its chat turn's end as well as at its EOS, on
tokenizers that carry the models' real special tokens; both rollout backends are given the same tokens; and the
stop token a receiver appends to a re-tokenized peer response is the one it ends its own turns with."""

from __future__ import annotations

import math

import pytest
import torch
from helpers.paper_tokenizers import PAPER_MODELS, paper_format, paper_tokenizer

from graft.config import config_from_dict
from graft.engine.distributed import SINGLE
from graft.engine.policy import Policy
from graft.engine.prompts import PromptFormat
from graft.engine.rollout import HFRollout
from graft.engine.scoring import retokenize
from graft.errors import ConfigError
from graft.toy.models import ToyArch, build_model, build_tokenizer

# model -> (its turn's end, the EOS of its generation config and tokenizer)
PAPER_STOPS = {
    "qwen3": ("<|im_end|>", 151645, 151643),
    "smollm3": ("<|im_end|>", 128012, 128001),
    "octothinker": ("<|eot_id|>", 128009, 128001),
}


@pytest.mark.parametrize("name", list(PAPER_STOPS))
def test_a_paper_model_stops_where_its_chat_turn_ends_and_at_its_eos(name):
    tokenizer, (marker, turn_end, eos) = paper_tokenizer(name), PAPER_STOPS[name]
    fmt = paper_format(name)
    assert tokenizer.convert_ids_to_tokens(turn_end) == marker
    assert fmt.stop_token_ids(tokenizer, PAPER_MODELS[name].generation_eos) == [turn_end, eos]
    # the turn's end is what the prompt format itself writes after a message
    assert fmt.render(tokenizer, "1+1").count(marker) == 1


@pytest.mark.parametrize("name", list(PAPER_STOPS))
def test_a_plain_prompt_stops_at_the_eos_only(name):
    """The miniature's format (config/config.yaml: no chat) on the same vocabularies."""
    tokenizer, (_, _, eos) = paper_tokenizer(name), PAPER_STOPS[name]
    assert PromptFormat("{problem} Answer:").stop_token_ids(tokenizer, PAPER_MODELS[name].generation_eos) == [eos]


def test_every_eos_the_generation_config_lists_stops_after_the_turn_end():
    tokenizer = paper_tokenizer("qwen3")
    assert paper_format("qwen3").stop_token_ids(tokenizer, [151645, 151643]) == [151645, 151643]
    assert paper_format("qwen3").stop_token_ids(tokenizer, None) == [151645, 151643]  # the tokenizer's EOS


def test_a_template_in_the_vocabularys_markers_whose_turn_has_no_end_token_is_refused():
    unclosed = "{%- for m in messages -%}{{- '<|im_start|>' + m['role'] + '\\n' + m['content'] + '\\n' -}}"
    fmt = PromptFormat("{problem}", True, unclosed + "{%- endfor -%}{{- '<|im_start|>assistant\\n' -}}")
    with pytest.raises(ConfigError, match=r"models\.qwen3: its chat template writes special tokens of the tokenizer"):
        fmt.check("qwen3", paper_tokenizer("qwen3"), "here")
    assert paper_format("qwen3").check("qwen3", paper_tokenizer("qwen3"), "here").endswith("<|im_start|>assistant\n")


def test_a_toy_tokenizer_without_chat_markers_stops_at_eos_as_its_warm_up_taught():
    """The dress rehearsal's toy models: chat-templated prompts on vocabularies trained from scratch, in which the
    markers are plain text; their warm-up ends every answer with EOS, and so do their rollouts."""
    tok = build_tokenizer(["<|im_start|>user\nWhat is 1+1?<|im_end|>\n<|im_start|>assistant\nso 2"] * 8, "chars", 258)
    fmt = paper_format("smollm3")
    assert fmt.turn_end(tok) is None
    assert fmt.stop_token_ids(tok, tok.eos_token_id) == [tok.eos_token_id]
    assert fmt.check("smollm3", tok, "here").startswith("<|im_start|>user\n{problem}")


def turn_end_model(tokenizer, word: int, turn_end: int, eos: int):
    """A GPT-2 over ``tokenizer``'s ids that writes ``word`` or ``turn_end`` at every position, whatever came
    before: logits 30 and 29, every other token 0 (its final LayerNorm outputs one fixed vector)."""
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    config = GPT2Config(
        vocab_size=max(tokenizer.get_vocab().values()) + 1,
        n_embd=8,
        n_layer=1,
        n_head=1,
        n_positions=128,
        eos_token_id=eos,
        bos_token_id=eos,
        tie_word_embeddings=True,
    )
    model = GPT2LMHeadModel(config).eval()
    with torch.no_grad():
        model.transformer.ln_f.weight.zero_()
        model.transformer.ln_f.bias.zero_()
        model.transformer.ln_f.bias[0] = 1.0
        model.transformer.wte.weight.zero_()  # tied: the output rows too
        model.transformer.wte.weight[word, 0] = 30.0
        model.transformer.wte.weight[turn_end, 0] = 29.0
    return model


def test_hugging_face_rollouts_of_a_chat_prompt_stop_at_the_turns_end():
    """Qwen3's format with its real ids, on a model that writes a word or <|im_end|> at every step: each response
    ends at its first <|im_end|>, kept with its log-prob, as the loss counts it; a response without one ran to the
    limit. With the EOS alone (the stop before this format's turn end counted) the same model writes past its
    turn's end every time."""
    tokenizer, (_, turn_end, eos) = paper_tokenizer("qwen3"), PAPER_STOPS["qwen3"]
    word = tokenizer.convert_tokens_to_ids("x")
    model = turn_end_model(tokenizer, word, turn_end, eos)
    chat = Policy("qwen3", model, tokenizer, paper_format("qwen3"))
    assert chat.stop_token_ids == [turn_end, eos] and chat.eos_token_id == turn_end
    prompt = [chat.encode(chat.prompt_text("What is 1+1?"))]
    samples = HFRollout(chat, max_new_tokens=12).generate(prompt, n=8, seed=0)[0]
    turn_logp = 29 - math.log(math.exp(30) + math.exp(29) + (model.config.vocab_size - 2))
    for s in samples:
        assert len(s.logprobs) == len(s.token_ids) and set(s.token_ids) <= {word, turn_end}
        if s.truncated:
            assert len(s.token_ids) == 12 and turn_end not in s.token_ids
        else:
            assert s.token_ids.index(turn_end) == len(s.token_ids) - 1
            assert s.logprobs[-1] == pytest.approx(turn_logp, abs=1e-4)
            assert s.text == "x" * (len(s.token_ids) - 1)
    assert sum(not s.truncated for s in samples) >= 6  # P(no turn end in 12 steps) = 0.73^12 = 2%
    eos_only = Policy("qwen3", model, tokenizer, PromptFormat(paper_format("qwen3").template))
    runs_on = HFRollout(eos_only, max_new_tokens=12).generate(prompt, n=8, seed=0)[0]
    assert all(s.truncated and turn_end in s.token_ids for s in runs_on)


def test_the_vllm_engines_of_training_and_evaluation_get_the_policys_stop_tokens(monkeypatch, tmp_path):
    """vLLM stops by itself only at the EOS of the model's generation config and tokenizer: both places that start
    an engine hand it the policy's stop tokens, which SamplingParams then carry (test_vllm_backend.py)."""
    import graft.engine.vllm
    from graft.eval.evaluate import vllm_evaluator
    from graft.train.learner import rollout_backend

    started = []
    monkeypatch.setattr(graft.engine.vllm, "VLLMRollout", lambda *args, **kwargs: started.append(kwargs))
    tokenizer, (_, turn_end, eos) = paper_tokenizer("qwen3"), PAPER_STOPS["qwen3"]
    policy = Policy("qwen3", turn_end_model(tokenizer, 0, turn_end, eos), tokenizer, paper_format("qwen3"))
    config = config_from_dict(
        {
            "results": str(tmp_path),
            "models": {"qwen3": {"path": str(tmp_path), "template": "{problem}"}},
            "data": {"train": "train.jsonl"},
            "train": {"steps": 1, "prompts_per_step": 1},
            "scale": {"rollout": "vllm"},
            "eval": {"benchmarks": {"b": "b.jsonl"}},
        }
    )
    rollout_backend("qwen3", config, policy, SINGLE)
    vllm_evaluator(config, policy, tmp_path)
    assert [kwargs["stop_token_ids"] for kwargs in started] == [[turn_end, eos]] * 2


def test_retokenized_response_ends_with_the_models_own_stop_token():
    tok = build_tokenizer(["What is 1+1? so \\boxed{2}"] * 8, "gpt2_regex", 270)
    model = build_model(ToyArch("qwen3", "gpt2_regex", 270, hidden=16, layers=1, heads=2), tok)
    policy = Policy("r", model, tok, PromptFormat("{problem} "))
    _, ids = retokenize(policy, "What is 1+1? ", "so \\boxed{2}", generated_eos=True)
    assert ids[-1] == tok.eos_token_id == policy.eos_token_id  # the generation config names the tokenizer's EOS
    model.generation_config.eos_token_id = [tok.pad_token_id, tok.eos_token_id]  # a chat-tuned checkpoint's
    policy = Policy("r", model, tok, PromptFormat("{problem} "))
    _, ids = retokenize(policy, "What is 1+1? ", "so \\boxed{2}", generated_eos=True)
    assert ids[-1] == tok.pad_token_id and policy.stop_token_ids == [tok.pad_token_id, tok.eos_token_id]
    _, ids = retokenize(policy, "What is 1+1? ", "so \\boxed{2}", generated_eos=False)
    assert ids[-1] not in policy.stop_token_ids


def test_a_chat_receiver_appends_its_turns_end_to_a_peer_response_that_ended():
    tokenizer = paper_tokenizer("octothinker")
    policy = Policy("octothinker", turn_end_model(tokenizer, 0, 128009, 128001), tokenizer, paper_format("octothinker"))
    prompt = policy.prompt_text("What is 1+1?")
    _, ids = retokenize(policy, prompt, "so \\boxed{2}", generated_eos=True)
    assert ids[-1] == 128009 and tokenizer.decode(ids[:-1]) == "so \\boxed{2}"
