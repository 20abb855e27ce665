"""One module per area. Each has NAME, MINORS (the minors whose harness answers it), `generate(rng,
version)` returning one case, `numalign(case, version)` returning numalign's answer in the harness's
form, and `size(case)` (smaller is a simpler reproduction); optionally `equivalent(ours, theirs)` where
an answer's form may differ without a different decision (say why there), and `named_cases(version)`:
(name, case, the harness's CPU-time bound for it) run after the generated cases and reported by name."""

from __future__ import annotations

from types import ModuleType

from conformance.areas import admit, checkpoint, cpu, discover, draalloc, dracel, topology

AREAS: dict[str, ModuleType] = {m.NAME: m for m in (admit, checkpoint, cpu, discover, dracel, draalloc, topology)}
