"""A planted rendering bug for the chat tests: the real renderer with one character changed."""

from __future__ import annotations

from tokenizer.chat import jinja as chat_jinja


def plant_one_character_change(monkeypatch) -> None:
    """Make `chat_jinja.render` change the third character of every real render (not the caps probes)."""
    real = chat_jinja.render

    def planted(*args, **kwargs):
        out = real(*args, **kwargs)
        if kwargs.get("observer") is None and len(out) > 3:
            out = out[:2] + ("X" if out[2] != "X" else "Y") + out[3:]
        return out

    monkeypatch.setattr(chat_jinja, "render", planted)
