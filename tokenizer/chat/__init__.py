"""Chat templates, rendered and tokenized as llama-server does it.

- render: a conversation rendered and tokenized as llama-server does it (the entry point);
- caps: a template's capabilities, found by probes as llama.cpp finds them;
- jinja: the Jinja environment that renders as llama.cpp's own engine does; values (how that
  engine prints values), filters (its string methods and filters) and budget (the limits of
  a render) serve it;
- errors: the chat template errors.

May import: `tokenizer.vocab`, `tokenizer.pieces`, `tokenizer.errors`; jinja2 only when a template is rendered.
"""
