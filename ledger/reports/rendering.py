"""The Jinja2 templates of the HTML report and the web view (package data, autoescaped).

Every value from the ledger reaches a page through an autoescaped expression; only the
charts, SVG that matplotlib drew from numbers, are marked safe (`Markup`) by their caller.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from ledger.core.explain import DECISION_MEANINGS, GLOSSARY, describe_flag
from ledger.inputs.jsonio import plural
from ledger.text import num, pct


def share(value: float | None) -> str:
    """A threshold or spread, unsigned: 0.01 -> "1.00%"."""
    return "—" if value is None else f"{value * 100:.2f}%"


def kv(mapping: dict[str, Any] | None) -> str:
    return ", ".join(f"{k}={v}" for k, v in (mapping or {}).items()) or "—"


@cache
def environment() -> Any:
    from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape

    env = Environment(
        loader=PackageLoader("ledger.reports", "templates"),
        autoescape=select_autoescape(["html", "css"], default=True),
        undefined=StrictUndefined,
        trim_blocks=False,
        keep_trailing_newline=True,
    )
    env.filters.update(
        pct=pct, share=share, num=num, kv=kv, describe_flag=describe_flag, plural=plural
    )
    env.globals.update(glossary=GLOSSARY, decision_meanings=DECISION_MEANINGS, links=None)
    return env


def render(name: str, **context: Any) -> str:
    return environment().get_template(name).render(**context)
