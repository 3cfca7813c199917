"""Models: which vocabularies there are, and how a name becomes a file.

Owns the shipped vocabularies and their cache (shipped), name or path or URL -> one file
(paths), families, the fetch of llama.cpp's test vocabularies, the synthetic ones
(synth, synth_base, synth_sensitivity), the header summary of `inspect` (summary), a file
cut after its metadata checked through a vocab-only copy (header_only) and a URL's header
fetched with Range requests (remote).
May import: `harness.files`, `harness.environment` (the converter's venv and memory cap), `harness.environment_vars`,
`harness.errors`, `tokenizer`.
"""
