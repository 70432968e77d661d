"""The stop token a receiver appends to a re-tokenized peer response is the one it stops on itself."""

from __future__ import annotations

from graft.engine.policy import Policy
from graft.engine.prompts import PromptFormat
from graft.engine.scoring import retokenize
from graft.toy.models import ToyArch, build_model, build_tokenizer


def test_retokenized_response_ends_with_the_models_own_stop_token():
    tok = build_tokenizer(["What is 1+1? so \\boxed{2}"] * 8, "gpt2_regex", 270)
    model = build_model(ToyArch("qwen3", "gpt2_regex", 270, hidden=16, layers=1, heads=2), tok)
    policy = Policy("r", model, tok, PromptFormat("{problem} "))
    _, ids = retokenize(policy, "What is 1+1? ", "so \\boxed{2}", generated_eos=True)
    assert ids[-1] == tok.eos_token_id == policy.eos_token_id  # the generation config names the tokenizer's EOS
    model.generation_config.eos_token_id = [tok.pad_token_id, tok.eos_token_id]  # a chat-tuned checkpoint's
    _, ids = retokenize(policy, "What is 1+1? ", "so \\boxed{2}", generated_eos=True)
    assert ids[-1] == tok.pad_token_id and policy.stop_token_ids == [tok.pad_token_id, tok.eos_token_id]
    _, ids = retokenize(policy, "What is 1+1? ", "so \\boxed{2}", generated_eos=False)
    assert ids[-1] not in policy.stop_token_ids
