"""Normalizers: SentencePiece's precompiled charsmap (charsmap) and UGM's input normaliser (ugm).

May import: `tokenizer.errors`, `tokenizer.cache`, `tokenizer.unicode`.
"""
