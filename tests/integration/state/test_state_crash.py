"""SIGKILL campaigns (seeded, a few kills each here; scripts/soak runs 1,000): after every kill the
state directory passes the invariants as a restart reads it, and nothing committed before is lost."""

from __future__ import annotations

import os
from pathlib import Path

from support.crash import admit_campaign, serve_campaign

KILLS = int(os.environ.get("NUMALIGN_CRASH_KILLS", "10"))


def test_admit_killed_at_random_moments(tmp_path: Path) -> None:
    figures = admit_campaign(tmp_path, kills=KILLS, seed=16)
    assert figures.failures == []
    assert figures.kills == KILLS and figures.checks >= KILLS and figures.pods_admitted > 0


def test_serve_killed_at_random_moments(tmp_path: Path) -> None:
    figures = serve_campaign(tmp_path, kills=KILLS, seed=16)
    assert figures.failures == []
    assert figures.kills == KILLS and figures.pods_admitted > 0
