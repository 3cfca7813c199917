"""The GGUF format: a strict reader (reader), a writer (writer) and the on-disk facts (constants).

May import: `tokenizer.errors`.
"""
