"""Prompt formats on local tokenizer files that reproduce the base models' cases: a tokenizer with no chat
template, one with a Qwen3-style template (no system block unless given, enable_thinking), one with a
SmolLM3-instruct-style template that writes a system block with today's date; and the paper's prompt."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from graft.config import ModelSpec, config_from_dict
from graft.engine.policy import check_prompt
from graft.engine.prompts import PAPER_SUFFIX, PromptFormat
from graft.errors import ConfigError
from graft.toy.models import build_tokenizer

PAPER = "{problem} " + PAPER_SUFFIX

# Written for these tests: ChatML turns, no system block unless one is given, and an empty think block when
# thinking is switched off (the behaviour of Qwen3-1.7B-Base's published template).
QWEN3_LIKE = (
    "{%- for m in messages -%}{{- '<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>\\n' -}}"
    "{%- endfor -%}{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}"
    "{%- if enable_thinking is defined and enable_thinking is false -%}{{- '<think>\\n\\n</think>\\n\\n' -}}"
    "{%- endif -%}{%- endif -%}"
)
# A system block with a knowledge cutoff, today's date and a reasoning mode (SmolLM3's instruct template does this).
DATED = (
    "{{- '<|im_start|>system\\nKnowledge Cutoff Date: June 2025\\nToday Date: ' + strftime_now('%d %B %Y') + "
    "'\\nReasoning Mode: /think<|im_end|>\\n' -}}" + QWEN3_LIKE
)


def tokenizer_dir(tmp_path: Path, name: str, chat_template: str | None) -> Path:
    tok = build_tokenizer(["What is 2+3? Let's think step by step. <|im_start|>user\n"] * 4, "gpt2_regex", 300)
    if chat_template is not None:
        tok.chat_template = chat_template
    out = tmp_path / name
    tok.save_pretrained(out)
    return out


def test_a_tokenizer_without_a_chat_template_is_refused_with_the_fix(tmp_path):
    where = tokenizer_dir(tmp_path, "base", None)
    with pytest.raises(ConfigError, match=r"models\.smollm3: the tokenizer in .* has no chat template; set "):
        check_prompt("smollm3", ModelSpec(path=str(where), template=PAPER, chat=True))
    # a plain template needs none
    assert check_prompt("smollm3", ModelSpec(path=str(where), template=PAPER)) == PAPER


def test_the_papers_prompt_through_a_qwen3_style_template(tmp_path):
    where = tokenizer_dir(tmp_path, "qwen", QWEN3_LIKE)
    prompt = check_prompt("qwen3", ModelSpec(path=str(where), template=PAPER, chat=True))
    assert prompt == (
        "<|im_start|>user\n{problem} Let's think step by step and output the final answer within \\boxed{}."
        "<|im_end|>\n<|im_start|>assistant\n"
    )


def test_a_template_that_writes_todays_date_is_refused_and_a_chat_template_file_replaces_it(tmp_path):
    where = tokenizer_dir(tmp_path, "smol", DATED)
    spec = ModelSpec(path=str(where), template=PAPER, chat=True)
    with pytest.raises(ConfigError, match="writes today's date into every prompt"):
        check_prompt("smollm3", spec)
    fixed = ModelSpec(
        path=str(where), template=PAPER, chat=True, chat_template="config/chat_templates/chatml_user.jinja"
    )
    prompt = check_prompt("smollm3", fixed)
    assert prompt.startswith("<|im_start|>user\n{problem} Let's think") and "system" not in prompt


def test_the_llama3_template_file_puts_bos_first_and_no_system_block(tmp_path):
    where = tokenizer_dir(tmp_path, "octo", None)
    spec = ModelSpec(
        path=str(where), template=PAPER, chat=True, chat_template="config/chat_templates/llama3_user.jinja"
    )
    prompt = check_prompt("octothinker", spec)
    assert "<|start_header_id|>user<|end_header_id|>\n\n{problem} Let's think" in prompt
    assert prompt.endswith("<|start_header_id|>assistant<|end_header_id|>\n\n") and "system" not in prompt


def test_a_format_without_the_problem_slot_is_refused():
    with pytest.raises(ConfigError, match=re.escape("has no '{problem}' slot")):
        PromptFormat("Solve it.").check("m", None, "here")


def _config(**model) -> dict:
    return {
        "results": "r",
        "models": {"m": {"path": "p", **model}},
        "data": {"train": "t"},
        "train": {"steps": 1, "prompts_per_step": 1},
    }


@pytest.mark.parametrize(
    ("model", "message"),
    [
        (
            {"template": "chat"},
            "models.m.template: 'chat' has no '{problem}' slot; for the chat format write chat: true",
        ),
        ({"template": "{problem}", "chat_template": "config/chat_templates/chatml_user.jinja"}, "needs chat: true"),
        ({"template": "{problem}", "chat": True, "chat_template": "nowhere.jinja"}, "no such file 'nowhere.jinja'"),
    ],
)
def test_config_refuses_prompt_fields_with_one_line(model, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        config_from_dict(_config(**model))
