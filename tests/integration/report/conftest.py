"""Reports opened in a real headless Chromium (Debian's package, installed by scripts/setup --test).

NUMALIGN_SCREENSHOT_DIR=DIR keeps the screenshots there (scripts/screenshots uses it to refresh the
PNGs under docs/); otherwise they go to the test's temporary directory for inspection."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.browser import Browser


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Browser]:
    b = Browser(tmp_path_factory.mktemp("chromium-profile"))
    try:
        yield b
    finally:
        b.close()


@pytest.fixture
def shots(tmp_path: Path) -> Path:
    keep = os.environ.get("NUMALIGN_SCREENSHOT_DIR")
    return Path(keep) if keep else tmp_path
