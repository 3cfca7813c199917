"""Runs: one model checked from start to report, live or against goldens.

Owns what a run was asked to do (config), `--engine` resolved for every kind (engine), the live
run (live), the golden replay (replay), what both record per model (outcomes), `repair` (repair),
the peer matrix (matrix), the end of a run (finish), progress, interrupts and `--shard` (shard).
May import everything below it: `harness.report`, `harness.compare`, `harness.references`,
`harness.subjects`, `harness.oracle`, `harness.golden`, `harness.inputs`, `harness.models`, `harness.files`,
`harness.environment`, `harness.environment_vars`, `harness.errors`, `tokenizer`.
"""
