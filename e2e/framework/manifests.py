"""Render the jinja2 templates under e2e/manifests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jinja2

MANIFESTS = Path(__file__).resolve().parents[1] / "manifests"

_env = jinja2.Environment(
    loader=jinja2.FileSystemLoader(MANIFESTS),
    undefined=jinja2.StrictUndefined,
    keep_trailing_newline=True,
    autoescape=False,  # YAML, not HTML
)
# JSON is valid YAML: `{{ value | tojson }}` quotes any string or list safely.
_env.filters["tojson"] = json.dumps


def render(template: str, **context: Any) -> str:
    return _env.get_template(template).render(**context)
