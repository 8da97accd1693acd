"""HTML rendering of untrusted agent text: markdown without HTML, links or images, and the Jinja
environment (autoescape on) every page is built with.

Everything shown by the viewer was written by an agent or a judge and is untrusted. Three layers
keep it inert: Jinja escapes every value (`autoescape=True`); markdown goes through markdown-it
with raw HTML disabled, and its links and images are rendered as plain text that shows their
target (nothing in a report can make the browser fetch or navigate anywhere); and every
response carries a Content-Security-Policy that allows only this server's own files
(`benchctl/view/app.py`).
"""

from __future__ import annotations

from typing import Any

from jinja2 import Environment, PackageLoader
from markdown_it import MarkdownIt
from markdown_it.common.utils import escapeHtml
from markupsafe import Markup, escape

from benchctl.report.model import NA, fmt


def _link_open(self: Any, tokens: list[Any], idx: int, options: Any, env: dict[str, Any]) -> str:
    href = tokens[idx].attrGet("href") or ""
    env.setdefault("hrefs", []).append(href)
    return f'<span class="md-link" title="{escapeHtml(str(href))}">'


def _link_close(self: Any, tokens: list[Any], idx: int, options: Any, env: dict[str, Any]) -> str:
    href = env["hrefs"].pop() if env.get("hrefs") else ""
    return f'</span> <span class="md-href">&lt;{escapeHtml(str(href))}&gt;</span>'


def _image(self: Any, tokens: list[Any], idx: int, options: Any, env: dict[str, Any]) -> str:
    tok = tokens[idx]
    alt = self.renderInlineAsText(tok.children or [], options, env)
    src = tok.attrGet("src") or ""
    return f'<span class="md-img">[image: {escapeHtml(alt)}] &lt;{escapeHtml(str(src))}&gt;</span>'


def _make_md() -> MarkdownIt:
    # commonmark + tables; "html": False turns raw HTML into text. markdown-it already refuses
    # javascript:/vbscript:/file:/data: links; the rules below also stop every other link and
    # image from becoming something the browser follows or loads.
    md = MarkdownIt("commonmark", {"html": False}).enable(["table", "strikethrough"])
    md.add_render_rule("link_open", _link_open)
    md.add_render_rule("link_close", _link_close)
    md.add_render_rule("image", _image)
    return md


_MD = _make_md()


def markdown(text: Any) -> Markup:
    """Untrusted markdown -> safe HTML (see the module docstring)."""
    if not isinstance(text, str) or not text:
        return Markup("")
    return Markup(_MD.render(text, {}))


def _num(v: Any) -> bool:
    """A number worth formatting (not None, a bool, NaN or a missing template value)."""
    return isinstance(v, (int, float)) and not isinstance(v, bool) and v == v


def usd(v: Any) -> str:
    return fmt("usd", v) if _num(v) else NA


def score(v: Any) -> str:
    return fmt("score", v) if _num(v) else NA


def tokens(v: Any) -> str:
    if not _num(v):
        return NA
    v = float(v)
    return f"{v / 1e6:.2f}M" if v >= 1e6 else f"{v / 1e3:.1f}k" if v >= 1e4 else f"{int(v):,}"


def breakable(run_id: Any) -> Markup:
    """A run id that may wrap at its `__` separators (escaped; <wbr> after each separator)."""
    return Markup("__<wbr>").join(escape(part) for part in str(run_id).split("__"))


def count(v: Any) -> str:
    """A whole number with thousands separators (`12,345`)."""
    return f"{int(v):,}" if _num(v) else NA


def duration(s: Any) -> str:
    """Seconds as `1h02m`, `3m05s` or `12.3s`."""
    if not _num(s):
        return NA
    s = float(s)
    sign, s = ("-" if s < 0 else ""), abs(s)
    if s < 60:
        return f"{sign}{s:.1f}s"
    m, sec = divmod(int(round(s)), 60)
    if m < 60:
        return f"{sign}{m}m{sec:02d}s"
    h, m = divmod(m, 60)
    return f"{sign}{h}h{m:02d}m"


def ms(v: Any) -> str:
    if not _num(v):
        return NA
    return f"{v:.1f} ms" if v < 10 else f"{v:,.0f} ms"


def make_env() -> Environment:
    env = Environment(
        loader=PackageLoader("benchctl.view", "templates"), autoescape=True, trim_blocks=True, lstrip_blocks=True
    )
    env.filters.update(
        markdown=markdown,
        usd=usd,
        score=score,
        tokens=tokens,
        duration=duration,
        ms=ms,
        count=count,
        breakable=breakable,
    )
    return env
