"""The mutation self-test: how many realistic bugs each detector catches.

Owns the curated mutants (mutants), what was asked and found (settings), the run (run),
llama.cpp's test vectors as a detector (vectors) and the kill table (report). Detectors run
as `python -m harness` child processes, so it imports no run.
May import: `harness.report` (the one jinja2 environment, for the kill table's page), `harness.golden`,
`harness.inputs`, `harness.models`, `harness.files`, `harness.environment`, `harness.environment_vars`,
`harness.errors`, `tokenizer`.
"""
