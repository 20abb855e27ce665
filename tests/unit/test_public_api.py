"""The front door: `numalign` exports the public API lazily, and docs/library.md's example runs."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numalign

LIBRARY_DOC = Path(__file__).resolve().parents[2] / "docs" / "library.md"


def test_every_public_name_resolves_to_its_definition() -> None:
    assert numalign.__all__ == sorted(numalign._EXPORTS)
    for name in numalign.__all__:
        value = getattr(numalign, name)
        assert getattr(value, "__name__", name) == name or not hasattr(value, "__module__")


def test_an_unknown_name_is_an_attribute_error() -> None:
    try:
        numalign.NoSuchThing  # noqa: B018
    except AttributeError as e:
        assert "NoSuchThing" in str(e)
    else:
        raise AssertionError("numalign.NoSuchThing resolved")


def test_importing_numalign_loads_nothing_else() -> None:
    code = "import sys, numalign; print(sorted(m for m in sys.modules if m.startswith('numalign')))"
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    # numalign._compiled is the compiled core's loader, which must run before any other submodule.
    assert out.strip() == "['numalign', 'numalign._compiled']"


def test_the_library_example_runs_and_prints_what_it_says() -> None:
    section = LIBRARY_DOC.read_text(encoding="utf-8").split("## Merging hints", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.S)
    assert code is not None
    assert "from numalign import " in code.group(1)
    out = subprocess.run([sys.executable, "-c", code.group(1)], check=True, capture_output=True, text=True).stdout
    promised = re.search(r"print\(.*\)\s+# (.*?)  \(", code.group(1))
    assert promised is not None
    assert out.strip() == promised.group(1).strip()
