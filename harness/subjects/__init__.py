"""Subjects: the engine under test, whatever it is, behind one guarded interface.

Owns the `--engine` spec (spec), the engine protocol and its client (protocol, client),
the in-process guard (guard), what an engine offers (capabilities), its records (records)
and the built-in peers (peers, hf, llama_release). The children that serve the protocol
in another process live in `harness/children/`.
May import: `harness.golden`, `harness.inputs`, `harness.files`,
`harness.contained`, `harness.environment`, `harness.environment_vars`, `harness.errors`, `tokenizer`.
"""
