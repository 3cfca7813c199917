"""The report: report.json and one self-contained report.html per run.

Owns the report's content and page (build), the run's `--report DIR` (folder), the one jinja2
environment of every page (templating, templates/), and the messages section (messages).
May import: `harness.compare`, `harness.references` (the three-way classes it counts), `harness.subjects`,
`harness.files`, `harness.models`, `harness.errors`.
"""
