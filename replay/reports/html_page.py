"""One self-contained HTML page made of sections: the frame every HTML report of replay shares.

A page is a title, a few lines about what was measured, and a list of ``Section`` values, each an anchor, a
heading and an HTML fragment. Sections are made by plain functions (see replay.reports.html_report for a
run's; docs/reports.md for the API), so a sweep, a comparison or a capacity search builds its page from its
own sections and any of a run's. The page carries its style inline and needs nothing from a network: no
script, no font, no stylesheet, pictures inline as SVG. It reads on a laptop screen and prints on A4.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from html import escape

CSS = """
:root { color-scheme: light; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif;
       color: #1b1b1b; background: #fff; margin: 0; }
main { max-width: 1080px; margin: 0 auto; padding: 16px 24px 48px; }
h1 { font-size: 22px; margin: 8px 0 4px; }
h2 { font-size: 17px; margin: 28px 0 8px; padding-top: 8px; border-top: 1px solid #ddd; }
p.meta { color: #555; margin: 2px 0; }
nav { margin: 12px 0; font-size: 13px; display: flex; flex-wrap: wrap; gap: 2px 14px; }
nav a { color: #1f5fa8; text-decoration: none; white-space: nowrap; }
table { border-collapse: collapse; margin: 6px 0 10px; font-size: 13px; }
th, td { padding: 3px 10px; border-bottom: 1px solid #e6e6e6; text-align: left; vertical-align: top; }
th { font-weight: 600; background: #f6f6f6; }
td.n, th.n { text-align: right; font-variant-numeric: tabular-nums; }
figure { margin: 10px 0 18px; break-inside: avoid; page-break-inside: avoid; }
figure svg { display: block; width: 100%; height: auto; }
figcaption { font-size: 12.5px; color: #555; margin-top: 2px; }
.headline { display: flex; flex-wrap: wrap; gap: 10px; margin: 8px 0; }
.tile { border: 1px solid #ddd; border-radius: 6px; padding: 8px 12px; min-width: 180px; flex: 1 1 180px; }
.tile b { display: block; font-size: 20px; font-variant-numeric: tabular-nums; }
.tile span { color: #555; font-size: 12.5px; }
.note { color: #7a4b00; background: #fff7e6; border-left: 3px solid #f0b400; padding: 4px 10px; }
@media print {
  body { font-size: 11px; }
  main { max-width: none; padding: 0; }
  nav { display: none; }
  h2 { break-after: avoid; page-break-after: avoid; }
  table { break-inside: avoid; page-break-inside: avoid; }
  .tile { border-color: #999; }
  a { color: inherit; }
}
@page { size: A4; margin: 12mm; }
"""


@dataclass(frozen=True, slots=True)
class Section:
    """One part of a page: ``id`` is its anchor (unique in the page), ``body`` trusted HTML made by the helpers."""

    id: str
    title: str
    body: str


def secs(v: float | None) -> str:
    """Seconds as people read them: ms under a second."""
    if v is None:
        return "-"
    return f"{v * 1000:,.1f} ms" if abs(v) < 1 else f"{v:,.2f} s"


def pct(v: float | None) -> str:
    return "-" if v is None else f"{100 * v:.1f}%"


def num(v: float | None, digits: int = 0) -> str:
    return "-" if v is None else f"{v:,.{digits}f}"


def text(value: object) -> str:
    """Plain text, escaped for HTML."""
    return escape(str(value))


def paragraph(content: str, cls: str = "") -> str:
    """A paragraph of already-escaped HTML."""
    return f'<p class="{cls}">{content}</p>' if cls else f"<p>{content}</p>"


def note(message: str) -> str:
    return paragraph(text(message), "note")


def table(headers: Sequence[str], rows: Iterable[Sequence[object]], numeric_from: int = 1) -> str:
    """A table of plain values (escaped); columns from ``numeric_from`` on are right-aligned numbers."""

    def cell(tag: str, i: int, v: object) -> str:
        cls = ' class="n"' if i >= numeric_from else ""
        return f"<{tag}{cls}>{text(v)}</{tag}>"

    head = "".join(cell("th", i, h) for i, h in enumerate(headers))
    body = "".join("<tr>" + "".join(cell("td", i, v) for i, v in enumerate(row)) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def tiles(items: Iterable[tuple[str, str]]) -> str:
    """Headline figures: (value, what it is) pairs, large value over a short label."""
    inner = "".join(f'<div class="tile"><b>{text(v)}</b><span>{text(label)}</span></div>' for v, label in items)
    return f'<div class="headline">{inner}</div>'


def figure(svg: str, caption: str, label: str) -> str:
    """An inline SVG picture with its caption; ``label`` names it for screen readers and tests."""
    return f'<figure role="img" aria-label="{text(label)}">{svg}<figcaption>{text(caption)}</figcaption></figure>'


def render_page(title: str, sections: Sequence[Section], meta: Sequence[str] = ()) -> str:
    """The whole document: title, meta lines (plain text), a table of contents and the sections in order."""
    ids = [s.id for s in sections]
    if len(set(ids)) != len(ids):
        raise ValueError(f"section ids must be unique in a page: {ids}")
    nav = "".join(f'<a href="#{text(s.id)}">{text(s.title)}</a>' for s in sections)
    parts = "".join(f'<section id="{text(s.id)}"><h2>{text(s.title)}</h2>{s.body}</section>' for s in sections)
    lines = "".join(f'<p class="meta">{text(m)}</p>' for m in meta)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{text(title)}</title><style>{CSS}</style></head>"
        f"<body><main><h1>{text(title)}</h1>{lines}<nav>{nav}</nav>{parts}</main></body></html>\n"
    )
