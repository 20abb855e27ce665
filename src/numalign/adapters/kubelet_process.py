"""The running kubelet's command line, read from /proc: where its config file and state are, and the
resource-manager flags it was started with (a node's settings live in both, and flags win).

pflag accepts `--flag=value` and `--flag value`; boolean flags may stand alone. Only the flags numalign
models are kept for `--node`; the whole command line is recorded in the snapshot for reference.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from pathlib import Path

from numalign.k8s.kubeletconfig_flags import KUBELET_FLAGS

_BOOLEAN = frozenset({"cgroups-per-qos"})
_CMDLINE_LIMIT = 1 << 20


@dataclass(frozen=True)
class KubeletProcess:
    pid: int
    argv: tuple[str, ...]
    flags: tuple[tuple[str, str], ...] = field(default=())  # modelled flags, in command-line order
    config: str | None = None  # --config
    root_dir: str | None = None  # --root-dir


def parse_command_line(argv: list[str]) -> tuple[list[tuple[str, str]], dict[str, str]]:
    """(modelled flags in order, every flag's last value) of a kubelet command line."""
    flags: list[tuple[str, str]] = []
    last: dict[str, str] = {}
    i = 1
    while i < len(argv):
        arg = argv[i]
        i += 1
        if not arg.startswith("-") or arg in ("-", "--"):
            continue
        name, eq, value = arg.lstrip("-").partition("=")
        if not eq:
            if name in _BOOLEAN or i >= len(argv) or argv[i].startswith("-"):
                value = "true"
            else:
                value, i = argv[i], i + 1
        last[name] = value
        if name in KUBELET_FLAGS:
            flags.append((f"--{name}", value))
    return flags, last


def find_kubelet(proc_root: Path = Path("/proc")) -> KubeletProcess | None:
    """The first process named kubelet under `proc_root`, or None (not running, or not visible)."""
    with contextlib.suppress(OSError):
        for entry in sorted(proc_root.iterdir(), key=lambda p: (len(p.name), p.name)):
            if not entry.name.isdigit():
                continue
            try:
                if (entry / "comm").read_text(encoding="utf-8", errors="replace").strip() != "kubelet":
                    continue
                with (entry / "cmdline").open("rb") as f:
                    raw = f.read(_CMDLINE_LIMIT)
            except OSError:
                continue  # gone meanwhile, or not ours to read
            argv = [a.decode("utf-8", errors="replace") for a in raw.split(b"\0") if a]
            flags, last = parse_command_line(argv)
            return KubeletProcess(int(entry.name), tuple(argv), tuple(flags), last.get("config"),
                                  last.get("root-dir"))
    return None
