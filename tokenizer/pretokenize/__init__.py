"""Pre-tokenizers: `tokenizer.ggml.pre` names (names), the behaviours they select (behaviours)
and llama.cpp's regex split (splitter).

May import: `tokenizer.errors`, `tokenizer.cache`, `tokenizer.unicode`.
"""
