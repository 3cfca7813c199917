"""Models: which vocabularies there are, and how a name becomes a file.

Owns the shipped vocabularies and their cache (shipped), name or path or URL -> one file
(paths), families, the fetch of llama.cpp's test vocabularies, the synthetic ones
(synth, synth_base, synth_sensitivity) and the header summary of `inspect` (summary).
May import: `harness.files`, `harness.errors`, `tokenizer`.
"""
