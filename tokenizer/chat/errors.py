"""The chat template errors: `ChatTemplateError`, and the two ways a render is stopped on purpose."""

from __future__ import annotations


class ChatTemplateError(ValueError):
    """A chat template that does not parse, or fails while rendering."""


class TemplateRaised(ChatTemplateError):
    """The template called raise_exception(): it refuses this conversation."""


class ChatBudgetExceeded(ChatTemplateError):
    """A template ran past its time budget or built a string past its size budget."""
