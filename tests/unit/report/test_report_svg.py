"""The SVG writer escapes every text and attribute once; the grid rule keeps full rows."""

from __future__ import annotations

from numalign.report.layout import cols_within, grid_cols
from numalign.report.svg import el, rect, text


def test_text_and_attributes_are_escaped() -> None:
    out = text(1, 2, '<script>alert("x")</script> & more', data_pod='a"b<c')
    assert "<script>" not in out and "&lt;script&gt;" in out and "&amp; more" in out
    assert 'data-pod="a&quot;b&lt;c"' in out
    tip = rect(0, 0, 1.5, 2, "tip <b>", class_="cpu")
    assert tip.startswith('<rect x="0" y="0" width="1.5" height="2" class="cpu">')
    assert "<title>tip &lt;b&gt;</title>" in tip
    assert el("g") == "<g/>"


def test_grid_prefers_full_rows_and_near_the_aspect() -> None:
    assert grid_cols(8, 20, 20, 2.0) == 4  # 4 x 2, not 5 + 3
    assert grid_cols(16, 18, 28, 2.4) == 8
    assert grid_cols(1, 10, 10) == 1
    assert cols_within(8, 400, 16, 940) == 2
    assert cols_within(3, 1000, 16, 940) == 1
