"""The oracle: llama.cpp itself, and only here, contained.

Owns the C API behind the `tokenizer.Tokenizer` API (llama), the crash-isolated worker
processes (workers: the parent side; worker_child: the child side, `python -m
harness.oracle.worker_child`; worker_limits), one persistent oracle per vocabulary (session)
and the list of known llama.cpp crashes (known_crashes).
May import: `harness.golden`, `harness.models`, `harness.files`, `harness.contained`,
`harness.environment`, `harness.errors`.
"""
