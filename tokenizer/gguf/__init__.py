"""The GGUF format: a strict reader (reader) and the on-disk facts (constants).

Read only: the writer is the harness's (`harness.models.gguf_writer`), which shares these constants.

May import: `tokenizer.errors`.
"""
