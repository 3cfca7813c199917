"""Compare: both sides of a case held against each other.

Owns the comparator and its display (diff), how one case and one vocabulary are judged
(findings), a run's verdict and exit status (verdict), and one pytest item's verdict
(item_verdicts). May import: `harness.subjects`, `harness.oracle`, `harness.golden`,
`harness.models` (the model a subject is), `harness.files`, `harness.errors`, `tokenizer`.
"""
