"""Models: which vocabularies there are, and how a name becomes a file.

Owns the shipped vocabularies and their cache (shipped), name or path or URL -> one file
(paths), families, the fetch of llama.cpp's test vocabularies, the synthetic ones
(synth, synth_base, synth_sensitivity), the header summary of `inspect` (summary), a file
cut after its metadata checked through a vocab-only copy (header_only) and a URL's header
fetched with Range requests (remote), and the GGUF writer (gguf_writer: synthetic and edited
vocabularies, and the tests' files) with the byte-exact key rewrite (gguf_rewrite). The writer is
the harness's, not the tokenizer's: `tokenizer/` only reads GGUF, and what the two share is the
reader and its on-disk facts (`tokenizer.gguf.reader`, `tokenizer.gguf.constants`).
May import: `harness.files`, `harness.environment` (the converter's venv and memory cap),
`harness.environment_vars`, `harness.errors`, `tokenizer` (the writer: only `tokenizer.gguf`).
"""
