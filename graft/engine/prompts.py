"""How a problem becomes a model's prompt: a ``{problem}`` template, optionally sent as one user message through
a chat template (paper Appendix B: "a single user message with the suffix 'Let's think step by step and output the
final answer within \\boxed{}.'"); or, for a problem that a data file holds as a chat prompt (TRL's and verl's
conversational layout), its messages as they are through the chat template.

The same prompt string serves sampling, evaluation and the receiver's re-tokenization of a peer response, so a
template that cannot be applied, or that would make prompts differ from run to run, is refused before any
compute with one line that names the model and the fix. The format also decides where a response ends: at the
chat template's end of turn as well as at the model's EOS (``PromptFormat.stop_token_ids``).
"""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from jinja2 import TemplateError

from graft.config import ModelSpec
from graft.errors import ConfigError

PAPER_SUFFIX = "Let's think step by step and output the final answer within \\boxed{}."
"""The suffix the paper appends to every problem, after one space."""
RESPONSE = "{response}"
"""The placeholder assistant message whose end in a rendered chat shows where a turn ends."""


class Message(NamedTuple):
    """One message of a chat prompt, as chat templates read it."""

    role: str
    content: str


Chat = tuple[Message, ...]
"""A chat prompt: its messages in order, the last one the user's."""


@dataclass(frozen=True)
class PromptFormat:
    template: str = "{problem}"
    """The prompt (or, with ``chat``, the user message) with a ``{problem}`` slot."""
    chat: bool = False
    """Send the filled template as one user message through a chat template, with the generation prompt."""
    chat_template: str | None = None
    """Jinja text used instead of the tokenizer's own chat template; None: the tokenizer's."""

    def render(self, tokenizer, problem: str | Chat) -> str:
        """The prompt string of ``problem`` for a model with this tokenizer: a problem's text fills the template (with
        ``chat``, as one user message through the chat template); a chat prompt's messages go through the chat
        template as they are, a system message included, and the template is not applied (the messages say what
        to do)."""
        if isinstance(problem, str):
            content = self.template.replace("{problem}", problem)
            if not self.chat:
                return content
            messages = [{"role": "user", "content": content}]
        elif self.chat:
            messages = [m._asdict() for m in problem]
        else:
            raise ConfigError(
                "a chat prompt (a list of messages) is rendered by a model's chat template; set chat: true for "
                "every model (with chat_template where its tokenizer ships none)"
            )
        return tokenizer.apply_chat_template(
            messages, tokenize=False, add_generation_prompt=True, chat_template=self.chat_template
        )

    def stop_token_ids(self, tokenizer, generation_eos: int | list[int] | None) -> list[int]:
        """The tokens a response in this format ends at, the one it ends with first: with ``chat``, the chat
        template's end of turn (``turn_end``); then the generation config's EOS ``generation_eos`` (one id or a list)
        and the tokenizer's EOS. A base model's generation config names only its end of document
        (``<|endoftext|>``, ``<|end_of_text|>``), while its turn in a chat prompt ends earlier (``<|im_end|>``,
        ``<|eot_id|>``): stopping there keeps it from writing the next turn. Both rollout backends stop at every one
        of them (Hugging Face ``generate`` as its ``eos_token_id``, vLLM as its ``stop_token_ids``)."""
        eos = generation_eos if isinstance(generation_eos, list | tuple) else [generation_eos]
        turn = [self.turn_end(tokenizer)] if self.chat else []
        return list(dict.fromkeys(t for t in [*turn, *eos, tokenizer.eos_token_id] if t is not None))

    def turn_end(self, tokenizer) -> int | None:
        """The special token the chat template writes right after an assistant message's content; None where it
        writes none there, or text that this vocabulary holds as no special token (a toy tokenizer, trained from
        scratch without the chat markers as tokens, whose warm-up ends every answer with EOS instead)."""
        rendered = tokenizer.apply_chat_template(
            [{"role": "user", "content": "{problem}"}, {"role": "assistant", "content": RESPONSE}],
            tokenize=False,
            chat_template=self.chat_template,
        )
        after = rendered.rpartition(RESPONSE)[2] if RESPONSE in rendered else ""
        ids = tokenizer(after, add_special_tokens=False)["input_ids"]
        return ids[0] if ids and ids[0] in special_ids(tokenizer) else None

    def check(self, name: str, tokenizer, where: str) -> str:
        """Refuse a format that cannot be applied to this tokenizer, whose prompts would differ between days, or
        whose chat turn has no token to stop at; returns the rendered prompt of the placeholder problem
        ``{problem}`` (what ``graft plan`` shows)."""
        if "{problem}" not in self.template:
            raise ConfigError(f"models.{name}.template: {self.template!r} has no '{{problem}}' slot; add one")
        if self.chat and self.chat_template is None and not getattr(tokenizer, "chat_template", None):
            raise ConfigError(
                f"models.{name}: the tokenizer in {where} has no chat template; set models.{name}.chat_template to a "
                "Jinja file (config/chat_templates/chatml_user.jinja: one ChatML user turn), or chat: false"
            )
        try:
            rendered = self.render(tokenizer, "{problem}")
            unended = self.chat and self.turn_end(tokenizer) is None
        except TemplateError as err:
            source = f"models.{name}.chat_template" if self.chat_template else f"the tokenizer's in {where}"
            raise ConfigError(
                f"models.{name}: its chat template ({source}) does not render a user message: "
                f"{type(err).__name__}: {' '.join(str(err).split())}; a Jinja template that renders is needed "
                f"(fix it, or set models.{name}.chat_template to a file of config/chat_templates/)"
            ) from None
        if "{problem}" not in rendered:
            raise ConfigError(f"models.{name}: its chat template drops the user message; choose another chat_template")
        today = _dt.date.today()
        stamps = {today.strftime(f) for f in ("%d %B %Y", "%d %b %Y", "%Y-%m-%d", "%B %d, %Y")}
        if any(stamp in rendered for stamp in stamps):
            raise ConfigError(
                f"models.{name}: its chat template writes today's date into every prompt, so prompts change from day "
                f"to day; set models.{name}.chat_template (config/chat_templates/chatml_user.jinja: no system block)"
            )
        # A template in the vocabulary's own markers must end a turn with one; a toy tokenizer holds no markers
        if unended and special_ids(tokenizer) & set(tokenizer(rendered, add_special_tokens=False)["input_ids"]):
            raise ConfigError(
                f"models.{name}: its chat template writes special tokens of the tokenizer in {where} but ends an "
                "assistant turn with none, so generation would run past the turn; choose a chat_template whose turn "
                "ends with one (config/chat_templates/)"
            )
        return rendered


def special_ids(tokenizer) -> set[int]:
    """The ids of the vocabulary's special tokens (the chat markers of a real model's tokenizer among them)."""
    return {i for i, token in tokenizer.added_tokens_decoder.items() if token.special}


def prompt_format(spec: ModelSpec) -> PromptFormat:
    """A model's prompt format from its config entry (the chat template file read here)."""
    text = Path(spec.chat_template).read_text() if spec.chat_template else None
    return PromptFormat(spec.template, spec.chat, text)
