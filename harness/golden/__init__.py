"""Golden: what llama.cpp did, recorded as reviewable JSON.

Owns the golden files (files: pack, schema, read), the records computed from anything with
the `tokenizer.Tokenizer` API (records), and which GGUF file a golden was recorded from
(identity), and the drift check's result, merged over shards (drift).
May import: `harness.inputs`, `harness.models`, `harness.files`, `harness.environment`, `tokenizer`.
"""
