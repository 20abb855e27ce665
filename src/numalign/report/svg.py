"""A very small SVG writer: elements as strings, every attribute and text escaped once, here."""

from __future__ import annotations

from collections.abc import Iterable
from html import escape


def _attrs(attrs: dict[str, object]) -> str:
    out = []
    for k, v in attrs.items():
        if v is None:
            continue
        name = k.rstrip("_").replace("_", "-")  # class_ -> class, font_size -> font-size
        if isinstance(v, float):
            v = f"{v:.2f}".rstrip("0").rstrip(".")
        out.append(f' {name}="{escape(str(v), quote=True)}"')
    return "".join(out)


def el(tag: str, children: Iterable[str] | str = (), **attrs: object) -> str:
    """<tag attrs>children</tag>; a str child is text (escaped), an iterable holds finished elements."""
    inner = escape(children, quote=False) if isinstance(children, str) else "".join(children)
    if not inner:
        return f"<{tag}{_attrs(attrs)}/>"
    return f"<{tag}{_attrs(attrs)}>{inner}</{tag}>"


def title(text: str) -> str:
    """A tooltip (and, for a screen reader or a DOM query, the element's name)."""
    return el("title", text)


def rect(x: float, y: float, w: float, h: float, tip: str | None = None, **attrs: object) -> str:
    return el("rect", [title(tip)] if tip else (), x=x, y=y, width=w, height=h, **attrs)


def text(x: float, y: float, s: str, **attrs: object) -> str:
    return el("text", s, x=x, y=y, **attrs)


def group(children: Iterable[str], **attrs: object) -> str:
    return el("g", list(children), **attrs)


def svg(children: Iterable[str], width: float, height: float, **attrs: object) -> str:
    return el("svg", list(children), xmlns="http://www.w3.org/2000/svg", width=width, height=height,
              viewBox=f"0 0 {width:.0f} {height:.0f}", **attrs)
