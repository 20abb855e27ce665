"""numalign_node.json: the machine and kubelet configuration `numalign admit --state-dir` decided with,
kept beside the state files so `pods` and `remove` read the directory without repeating --machine,
--devices and the kubelet options (a different machine would be refused by the CPU manager's own
state check, with a fix that does not name the real cause).

The machine is kept as its --machine value when that names it (a built-in name or the shorthand, no
--devices), else whole (devices included); the kubelet configuration as the --config path (none for
the built-in example) and the kubelet flags, in command-line order; the kubelet version decided with
(`kubelet_version`), which later commands on the directory use unless --kubelet-version says otherwise.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING

from numalign.adapters.statedir.layout import NODE_RECORD_FILE
from numalign.errors import InvalidInputError

if TYPE_CHECKING:
    from numalign.adapters.kubeletversion import ReportedVersion
    from numalign.k8s.version import KubeletVersion
    from numalign.machine.topology import Machine

_FORMAT = "numalign.kubelet.node/v1"


def write_record(state_dir: Path, machine: Machine, spec: str | None, config_path: str | None,
                 flags: list[tuple[str, str]], kubelet_version: KubeletVersion | None = None) -> None:
    """`spec`: the --machine value when it alone names `machine` (else None: the machine is kept whole)."""
    from numalign.adapters.statedir.files import write_atomic
    from numalign.machine.fileformat import machine_to_dict

    doc = {"format": _FORMAT, "machine": spec if spec is not None else machine_to_dict(machine),
           "kubelet_config": str(Path(config_path).resolve()) if config_path else None,
           "kubelet_flags": [list(f) for f in flags]}
    if kubelet_version is not None:
        doc["kubelet_version"] = str(kubelet_version)
    data = json.dumps(doc, indent=1, sort_keys=True).encode()
    path = state_dir / NODE_RECORD_FILE
    if not path.is_file() or path.read_bytes() != data:  # only what changed is written, as for the state
        write_atomic(path, data)


def apply_record(args: argparse.Namespace) -> str | None:
    """Fill args from the state directory's node record when the command line names no machine, devices,
    config or kubelet flag; returns a note saying so, or None."""
    from numalign.cli.options.kubeletflags import FLAGS_DEST

    state_dir = getattr(args, "state_dir", None)
    if state_dir is None or getattr(args, "node", None) is not None:
        return None
    given = (args.machine, getattr(args, "devices", None), getattr(args, "kubelet_config", None),
             getattr(args, FLAGS_DEST, None))
    path = Path(state_dir) / NODE_RECORD_FILE
    if not path.is_file():
        return None
    args.recorded_kubelet_version = recorded_version(path)
    if any(given):
        return None
    from numalign.machine.fileformat import machine_from_dict

    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        spec = doc["machine"] if isinstance(doc["machine"], str) else None
        machine = None if spec is not None else machine_from_dict(doc["machine"], f"{path}: machine")
        flags = [(str(n), str(v)) for n, v in doc["kubelet_flags"]]
        config = doc["kubelet_config"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise InvalidInputError(f"{path}: cannot read numalign's node record ({e}); expected the file `numalign "
                                "admit` wrote; fix: give --machine and the kubelet options, or delete it") from None
    if spec is not None:
        args.machine = spec  # a built-in name or the shorthand: named again, not kept whole
    else:
        args.recorded_machine = machine
    args.kubelet_config = config
    setattr(args, FLAGS_DEST, flags)
    name = spec if spec is not None else machine.name if machine is not None else "?"
    return (f"machine {name} and kubelet config {config or 'built-in example'}"
            + (f" with {' '.join(f'{n}={v}' for n, v in flags)}" if flags else "")
            + f", as recorded by admit in {path}")


def recorded_version(path: Path) -> ReportedVersion | None:
    """The kubelet version the record names (a ReportedVersion), or None (records older than versions)."""
    from numalign.adapters.kubeletversion import parse_reported

    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise InvalidInputError(f"{path}: cannot read numalign's node record ({e}); expected the file `numalign "
                                "admit` wrote; fix: give --machine and the kubelet options, or delete it") from None
    text = doc.get("kubelet_version") if isinstance(doc, dict) else None
    return parse_reported(text, str(path)) if isinstance(text, str) and text else None
