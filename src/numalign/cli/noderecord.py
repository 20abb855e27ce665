"""numalign_node.json: the machine and kubelet configuration `numalign admit --state-dir` decided with,
kept beside the state files so `pods` and `remove` read the directory without repeating --machine,
--devices and the kubelet options (a different machine would be refused by the CPU manager's own
state check, with a fix that does not name the real cause).

The machine is kept whole (devices given with --devices included); the kubelet configuration as the
--config path (none for the built-in example) and the kubelet flags, in command-line order.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from numalign.errors import InvalidInputError

NODE_FILE = "numalign_node.json"
_FORMAT = "numalign.node/v1"


def write_record(state_dir: Path, machine: Any, config_path: str | None, flags: list[tuple[str, str]]) -> None:
    from numalign.adapters.checkpoints import write_atomic
    from numalign.machine.fileformat import machine_to_dict

    doc = {"format": _FORMAT, "machine": machine_to_dict(machine),
           "kubelet_config": str(Path(config_path).resolve()) if config_path else None,
           "kubelet_flags": [list(f) for f in flags]}
    write_atomic(state_dir / NODE_FILE, json.dumps(doc, indent=1, sort_keys=True).encode())


def apply_record(args: argparse.Namespace) -> str | None:
    """Fill args from the state directory's record when the command line names no machine, devices,
    config or kubelet flag; returns a note saying so, or None."""
    from numalign.cli.kubeletflags import FLAGS_DEST

    state_dir = getattr(args, "state_dir", None)
    if state_dir is None or getattr(args, "node", None) is not None:
        return None
    given = (args.machine, getattr(args, "devices", None), getattr(args, "kubelet_config", None),
             getattr(args, FLAGS_DEST, None))
    path = Path(state_dir) / NODE_FILE
    if any(given) or not path.is_file():
        return None
    from numalign.machine.fileformat import machine_from_dict

    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        machine = machine_from_dict(doc["machine"], f"{path}: machine")
        flags = [(str(n), str(v)) for n, v in doc["kubelet_flags"]]
        config = doc["kubelet_config"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise InvalidInputError(f"{path}: cannot read numalign's node record ({e}); expected the file `numalign "
                                "admit` wrote; fix: give --machine and the kubelet options, or delete it") from None
    args.recorded_machine = machine
    args.kubelet_config = config
    setattr(args, FLAGS_DEST, flags)
    return (f"machine {machine.name} and kubelet config {config or 'built-in example'}"
            + (f" with {' '.join(f'{n}={v}' for n, v in flags)}" if flags else "")
            + f", as recorded by admit in {path}")
