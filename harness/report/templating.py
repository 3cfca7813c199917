"""The jinja2 environment of the HTML pages (harness/report/templates/): autoescaped, strict about undefined names."""

from __future__ import annotations

import jinja2


def environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.PackageLoader("harness", "report/templates"),
        autoescape=jinja2.select_autoescape(["html", "j2"]),
        undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True,
    )
