"""How a problem becomes a model's prompt: a ``{problem}`` template, optionally sent as one user message through
a chat template (paper Appendix B: "a single user message with the suffix 'Let's think step by step and output the
final answer within \\boxed{}.'").

The same prompt string serves sampling, evaluation and the receiver's re-tokenization of a peer response, so a
template that cannot be applied, or that would make prompts differ from run to run, is refused before any
compute with one line that names the model and the fix.
"""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass

from graft.errors import ConfigError

PAPER_SUFFIX = "Let's think step by step and output the final answer within \\boxed{}."
"""The suffix the paper appends to every problem, after one space."""


@dataclass(frozen=True)
class PromptFormat:
    template: str = "{problem}"
    """The prompt (or, with ``chat``, the user message) with a ``{problem}`` slot."""
    chat: bool = False
    """Send the filled template as one user message through a chat template, with the generation prompt."""
    chat_template: str | None = None
    """Jinja text used instead of the tokenizer's own chat template; None: the tokenizer's."""

    def render(self, tokenizer, problem: str) -> str:
        """The prompt string of ``problem`` for a model with this tokenizer."""
        content = self.template.replace("{problem}", problem)
        if not self.chat:
            return content
        return tokenizer.apply_chat_template(
            [{"role": "user", "content": content}],
            tokenize=False,
            add_generation_prompt=True,
            chat_template=self.chat_template,
        )

    def check(self, name: str, tokenizer, where: str) -> str:
        """Refuse a format that cannot be applied to this tokenizer, or whose prompts would differ between days;
        returns the rendered prompt of the placeholder problem ``{problem}`` (what ``graft plan`` shows)."""
        if "{problem}" not in self.template:
            raise ConfigError(f"models.{name}.template: {self.template!r} has no '{{problem}}' slot; add one")
        if self.chat and self.chat_template is None and not getattr(tokenizer, "chat_template", None):
            raise ConfigError(
                f"models.{name}: the tokenizer in {where} has no chat template; set models.{name}.chat_template to a "
                "Jinja file (config/chat_templates/chatml_user.jinja: one ChatML user turn), or chat: false"
            )
        rendered = self.render(tokenizer, "{problem}")
        if "{problem}" not in rendered:
            raise ConfigError(f"models.{name}: its chat template drops the user message; choose another chat_template")
        today = _dt.date.today()
        stamps = {today.strftime(f) for f in ("%d %B %Y", "%d %b %Y", "%Y-%m-%d", "%B %d, %Y")}
        if any(stamp in rendered for stamp in stamps):
            raise ConfigError(
                f"models.{name}: its chat template writes today's date into every prompt, so prompts change from day "
                f"to day; set models.{name}.chat_template (config/chat_templates/chatml_user.jinja: no system block)"
            )
        return rendered
