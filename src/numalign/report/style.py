"""The page's one stylesheet, inline: system fonts only (nothing fetched), and a print layout that
puts the decision records under the picture and keeps boxes whole across pages."""

CSS = """
:root { color-scheme: light; }
body { font: 13px/1.4 system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif;
       color: #1f2933; margin: 16px 20px; background: #ffffff; }
h1 { font-size: 20px; margin: 0 0 4px; }
h2 { font-size: 15px; margin: 18px 0 6px; }
h3 { font-size: 13px; margin: 10px 0 4px; }
.notes { color: #52606d; margin: 0 0 10px; padding-left: 18px; }
.layout { display: grid; grid-template-columns: max-content minmax(320px, 480px); gap: 24px; align-items: start; }
.pictures { min-width: 0; }
@media (max-width: 900px) { .layout { grid-template-columns: 1fr; } .pictures { overflow-x: auto; } }
svg.picture { display: block; margin: 4px 0 12px; max-width: none; }
svg text { font-family: "DejaVu Sans Mono", Menlo, Consolas, monospace; }
.legend { list-style: none; padding: 0; margin: 6px 0; max-width: 640px; }
.legend li { margin: 2px 0; break-inside: avoid; }
.swatch { display: inline-block; width: 12px; height: 12px; border: 1px solid #5f6b7a;
          vertical-align: -2px; margin-right: 6px; }
.swatch.reserved { background: repeating-linear-gradient(135deg, #d9d9d9 0 3px, #555 3px 4px); }
.detail { color: #52606d; }
.record { border: 1px solid #d5dbe3; border-left: 4px solid #e15759; border-radius: 4px; padding: 8px 10px;
          margin: 0 0 12px; break-inside: avoid; }
.record .verdict { font-weight: 600; }
.record table { border-collapse: collapse; width: 100%; margin: 4px 0; font-size: 12px; }
.record th, .record td { border-bottom: 1px solid #e4e7eb; padding: 2px 4px; text-align: left; vertical-align: top; }
.record td.hints { font-family: "DejaVu Sans Mono", Menlo, Consolas, monospace; word-break: break-word; }
.record .why { margin: 4px 0 0; padding-left: 18px; }
table.runs { border-collapse: collapse; font-size: 12px; margin: 6px 0 12px; }
table.runs th, table.runs td { border-bottom: 1px solid #e4e7eb; padding: 3px 8px; text-align: right; }
table.runs th:first-child, table.runs td:first-child { text-align: left; }
.charts { display: flex; flex-wrap: wrap; gap: 8px 28px; align-items: flex-start; }
footer { color: #7b8794; margin-top: 20px; font-size: 11px; }
@media print {
  body { margin: 0; }
  .layout { display: block; }
  aside { max-width: none; }
  .pictures { overflow: visible; }
  svg.picture { max-width: 100%; height: auto; break-inside: avoid; }
}
"""
