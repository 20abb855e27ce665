"""Where ../shared (spec, oracle vectors, hwloc fixtures) is: NUMALIGN_SHARED if set, else the
`shared` directory beside the repository, as CI lays it out."""

from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def shared_dir() -> Path:
    env = os.environ.get("NUMALIGN_SHARED")
    return Path(env).resolve() if env else (REPO.parent / "shared").resolve()


def hwloc_linux_dir() -> Path:
    """The hwloc Linux sysfs dumps. A missing directory is an error, not a reason to skip tests."""
    path = shared_dir() / "fixtures" / "hwloc" / "linux"
    if not path.is_dir():
        raise FileNotFoundError(
            f"{path}: the hwloc fixtures are missing; expected ../shared beside the checkout "
            f"({REPO.parent / 'shared'}). Fix: put it there or set NUMALIGN_SHARED=/path/to/shared"
        )
    return path
