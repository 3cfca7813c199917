"""Inputs: everything that produces a case.

Owns the corpus files and llama.cpp's test vectors (corpus), one case from an input (cases),
boundary inputs from a vocabulary's rules (boundaries), code points from llama.cpp's Unicode
tables (unicode_probes), the Hypothesis strategies and the fuzzer (strategies, fuzz).
May import: `harness.models` (a model and its metadata), `harness.files`, `harness.environment`,
`harness.environment_vars`, `harness.errors`, `tokenizer`.
"""
