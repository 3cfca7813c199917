"""The one jinja2 environment of every HTML page (harness/report/templates/): autoescaped, strict about undefined names.

report.html, messages.html, the peer matrix (peers.html) and the self-test page all render
through `environment()`, so escaping and undefined names are handled one way everywhere.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import jinja2

TEMPLATES = Path(__file__).resolve().parent / "templates"


@cache
def environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.PackageLoader("harness.report", "templates"),
        autoescape=jinja2.select_autoescape(["html", "j2"]),
        undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True,
    )
