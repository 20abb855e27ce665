"""docs/kubelet-versions.md shows numalign.kubelet.versions' table, generated; they cannot drift."""

from __future__ import annotations

from pathlib import Path

from numalign.kubelet import versions as kv

DOC = Path(__file__).resolve().parents[3] / "docs" / "kubelet-versions.md"
BEGIN = "<!-- BEGIN GENERATED: numalign.kubelet.versions.render_markdown -->\n"
END = "<!-- END GENERATED -->"


def test_the_page_holds_the_generated_table() -> None:
    text = DOC.read_text(encoding="utf-8")
    generated = text[text.index(BEGIN) + len(BEGIN): text.index(END)]
    assert generated == kv.render_markdown(), (
        "docs/kubelet-versions.md is out of date; regenerate the part between its markers with "
        "numalign.kubelet.versions.render_markdown()"
    )


def test_every_change_gate_and_option_is_on_the_page_with_its_prs() -> None:
    text = DOC.read_text(encoding="utf-8")
    for change in kv.CHANGES:
        assert f"`{change.name}`" in text and f"#{change.pr}" in text
        for first in change.since:
            assert str(first) in text
    for gate in kv.FEATURE_GATES:
        assert f"`{gate.name}`" in text
        assert all(f"#{s.pr}" in text for s in gate.stages if s.pr)
    for option in kv.POLICY_OPTIONS:
        assert f"`{option.name}`" in text
        assert all(f"#{s.pr}" in text for s in option.steps if s.pr)
