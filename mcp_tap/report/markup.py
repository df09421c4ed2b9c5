"""HTML building blocks: escaping, tables, badges, links to exchanges, number formats.

Evidence is attacker controlled (a tool name, a header, an error message), so every piece
of text goes through :func:`e` (:func:`html.escape`), in element content and attributes
alike; callers pass only escaped text or markup built here into the table helpers.
"""

from __future__ import annotations

import html
from collections import Counter
from collections.abc import Collection, Iterable, Sequence
from typing import Any, Final

from mcp_tap.outputs.printable import printable_text
from mcp_tap.report.model import ExchangeRef
from mcp_tap.report.records import rule_anchor, text


def e(value: Any) -> str:
    """Escape any value for HTML element content and quoted attributes.

    Control characters, bidi overrides and separators from the evidence become visible
    escapes (``\\x1b``, ``\\u202e``; newlines kept for bodies): a browser would not obey
    ESC, but a right-to-left override reorders the text around it, and the page may be read
    in a terminal too."""
    return html.escape(printable_text(text(value)), quote=True)


def ms(value: float | None) -> str:
    """A duration in milliseconds, with precision that suits its size."""
    if value is None:
        return "-"
    if value >= 100:
        return f"{value:.0f} ms"
    if value >= 10:
        return f"{value:.1f} ms"
    return f"{value:.2f} ms"


def badge(ok: bool, yes: str = "ok", no: str = "FAILED") -> str:
    """A green or red pill."""
    return f'<span class="badge {"ok" if ok else "bad"}">{e(yes if ok else no)}</span>'


def strength_badge(strength: str) -> str:
    """``must`` is a violation (red), ``should`` a warning (amber)."""
    if strength == "must":
        return '<span class="badge bad" title="MUST">violation</span>'
    return '<span class="badge warn" title="SHOULD">warning</span>'


def table(head: Sequence[str], rows: Iterable[Sequence[str]], numeric: Collection[int] = (),
          css: str = "") -> str:
    """A table from pre-escaped cell HTML; ``numeric`` column indices align right."""
    cls = f' class="{css}"' if css else ""
    ths = "".join(
        f'<th class="num">{e(h)}</th>' if i in numeric else f"<th>{e(h)}</th>"
        for i, h in enumerate(head)
    )
    body = "".join(
        "<tr>" + "".join(
            f'<td class="num">{cell}</td>' if i in numeric else f"<td>{cell}</td>"
            for i, cell in enumerate(row)
        ) + "</tr>"
        for row in rows
    )
    return f"<table{cls}><thead><tr>{ths}</tr></thead><tbody>{body}</tbody></table>"


def exchange_link(ref: ExchangeRef | None, shown: Collection[str]) -> str:
    """The exchange id, linked to its view when the page holds it (``shown`` anchors)."""
    if ref is None:
        return '<span class="muted">-</span>'
    label = f'<span class="mono">{e(ref.exchange_id or "?")}</span>'
    hop = f' <span class="muted">@{e(ref.hop)}</span>' if ref.hop and ref.hop != "-" else ""
    if ref.anchor in shown:
        return f'<a class="xref" href="#{e(ref.anchor)}">{label}</a>{hop}'
    return label + hop


def rule_link(rule: str) -> str:
    """A rule id linked to its group in the findings section."""
    return f'<a class="rule" href="#{e(rule_anchor(rule))}"><code>{e(rule)}</code></a>'


def rules_cell(rules: Sequence[str]) -> str:
    """Rule ids with a count when one repeats."""
    if not rules:
        return '<span class="muted">none</span>'
    counts = Counter(rules)
    return ", ".join(
        f"<code>{e(rule)}</code>" + (f" \u00d7{n}" if n > 1 else "")
        for rule, n in counts.items()
    )


# Who a finding's boundary blames: a request rule is the client's to keep, a response rule
# the server's, a hop rule the box's between two hops.
PARTIES: Final = {"request": "the client", "client": "the client", "response": "the server",
                  "hop": "a box between hops", "sdk": "the SDK's view", "tap": "the tap"}


def party_of(boundary: str) -> str:
    """Who a finding of ``boundary`` is caused by, in words."""
    return PARTIES.get(boundary, boundary or "unknown")
