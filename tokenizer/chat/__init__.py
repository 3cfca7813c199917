"""Chat templates: rendered as llama.cpp's own Jinja engine does (jinja), a template's
capabilities (caps), and a conversation rendered and tokenized as llama-server does it (render).

May import: `tokenizer.vocab`, `tokenizer.pieces`, `tokenizer.errors`; jinja2 only when a template is rendered.
"""
