"""`--node SNAPSHOT`: a tarball `numalign snapshot` wrote, opened for reading.

The tarball is extracted (data members only, no links leaving it) into a private temporary directory
that lives as long as the process; the state files are read from that copy, so nothing ever writes
into the snapshot itself. The machine is discovered from its sysfs files as from a live node, with the
devices its PodResources capture reports (the IDs the plugins really use) in place of the PCI scan's.
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from numalign.adapters.archive import extract_archive
from numalign.adapters.kubeletversion import ReportedVersion, parse_reported
from numalign.adapters.snapshot_collect import (
    ALLOCATABLE_MEMBER,
    CONFIG_MEMBER,
    DRA_MEMBER,
    MANIFEST,
    PODS_MEMBER,
    SNAPSHOT_FORMAT,
    STATE_PREFIX,
)
from numalign.errors import InvalidInputError
from numalign.limits import MAX_TEXT_FILE_BYTES, flat, quote, read_bounded
from numalign.machine.topology import Machine

_EXPECTED = "a tarball written by `numalign snapshot` (snapshot.json, sys/, kubelet/, state/)"
_kept: list[tempfile.TemporaryDirectory[str]] = []  # removed when the process ends


class SnapshotError(InvalidInputError):
    """A snapshot, or one of its members, that cannot be used: invalid input (the tarball is read only)."""


@dataclass(frozen=True)
class NodeSnapshot:
    path: Path
    root: Path
    node_name: str
    manifest: dict[str, Any]

    @property
    def config(self) -> Path | None:
        p = self.root / CONFIG_MEMBER
        return p if p.is_file() else None

    @property
    def state_dir(self) -> Path | None:
        p = self.root / STATE_PREFIX
        return p if p.is_dir() else None

    @property
    def dra_objects(self) -> Path | None:
        """The DRA objects dump `snapshot --dra-objects` kept, if any."""
        p = self.root / DRA_MEMBER
        return p if p.is_file() else None

    @property
    def allocatable(self) -> Path | None:
        p = self.root / ALLOCATABLE_MEMBER
        return p if p.is_file() else None

    def pod_resources_list(self) -> dict[str, Any] | None:
        """The PodResources List answer the snapshot captured (protobuf field names, as MessageToDict
        wrote it), or None when it holds none (the socket did not answer, or none was given)."""
        path = self.root / PODS_MEMBER
        if not path.is_file():
            return None
        source = f"{self.path}:{PODS_MEMBER}"
        try:
            obj = json.loads(read_bounded(path, MAX_TEXT_FILE_BYTES, PODS_MEMBER).decode("utf-8"))
        except (ValueError, RecursionError) as e:
            raise SnapshotError(f"{source}: not JSON ({flat(str(e), 120)}); expected the PodResources List answer "
                                "`numalign snapshot` writes; take the snapshot again") from None
        pods = obj.get("pod_resources", []) if isinstance(obj, dict) else None
        if not isinstance(obj, dict) or not isinstance(pods, list) or not all(isinstance(p, dict) for p in pods):
            raise SnapshotError(f"{source}: expected an object whose pod_resources is a list of pods (the "
                                "PodResources List answer `numalign snapshot` writes); take the snapshot again")
        return obj

    def listed_pod_names(self) -> list[tuple[str, str]] | None:
        """(namespace, name) of every pod the captured List reports, in its order; None without a capture.
        Protobuf leaves an empty string out of the JSON, so a missing field is the empty string."""
        listed = self.pod_resources_list()
        if listed is None:
            return None
        out = []
        for i, p in enumerate(listed.get("pod_resources", [])):
            namespace, name = p.get("namespace", ""), p.get("name", "")
            if not isinstance(namespace, str) or not isinstance(name, str):
                raise SnapshotError(f"{self.path}:{PODS_MEMBER}: pod_resources[{i}]: namespace and name must be "
                                    f"strings, got {quote(namespace)} and {quote(name)}; take the snapshot again")
            out.append((namespace, name))
        return out

    @property
    def kubelet_flags(self) -> list[tuple[str, str]]:
        """The resource-manager flags of the kubelet's command line when the snapshot was taken."""
        kubelet = self.manifest.get("kubelet")
        raw = kubelet.get("flags") if isinstance(kubelet, dict) else None
        if not isinstance(raw, list):
            return []
        return [(str(f[0]), str(f[1])) for f in raw if isinstance(f, list) and len(f) == 2]

    def kubelet_version(self) -> ReportedVersion | None:
        """The kubelet version the snapshot recorded (`kubelet --version`, else the Node object), or None."""
        recorded = self.manifest.get("kubelet_version")
        text = recorded.get("version") if isinstance(recorded, dict) else None
        if not isinstance(text, str) or not text:
            return None
        source = recorded.get("source") if isinstance(recorded, dict) else None
        return parse_reported(text, f"{self.path} ({source or 'snapshot.json'})")

    def machine(self) -> Machine:
        """The node's machine: its sysfs, with the plugins' own device IDs where captured."""
        from numalign.adapters.devicefile import devices_from_allocatable, machine_with_devices
        from numalign.adapters.sysfs import discover_sysfs

        machine = discover_sysfs(self.root, name=self.node_name)
        if self.allocatable is None:
            return machine
        source = f"{self.path}: {ALLOCATABLE_MEMBER}"
        try:
            obj = json.loads(read_bounded(self.allocatable, MAX_TEXT_FILE_BYTES, ALLOCATABLE_MEMBER).decode("utf-8"))
        except (ValueError, RecursionError) as e:
            # A member `numalign snapshot` wrote as JSON that is not JSON: the snapshot is damaged (input).
            raise SnapshotError(f"{source}: not JSON ({flat(str(e), 120)}); expected the PodResources "
                                    "GetAllocatableResources answer `numalign snapshot` writes; take the "
                                    "snapshot again") from None
        # The capture lists every device plugin's devices: the PCI scan's own guesses are dropped.
        captured = devices_from_allocatable(obj, source)
        return machine_with_devices(machine, {**{d.resource: [] for d in machine.devices}, **captured}, source)

    def describe(self) -> str:
        parts = ["sysfs"]
        if self.config is not None:
            parts.append("kubelet config")
        if self.state_dir is not None:
            parts.append("state files")
        if self.allocatable is not None:
            parts.append("PodResources devices")
        version = self.kubelet_version()
        if version is not None:
            parts.append(f"kubelet {version.text}")
        if self.kubelet_flags:
            parts.append("kubelet flags " + " ".join(f"{n}={v}" for n, v in self.kubelet_flags))
        return f"node snapshot {self.path} ({self.node_name}: {', '.join(parts)}), read only"


def open_snapshot(path: Path) -> NodeSnapshot:
    if not path.is_file():
        # A directory is most often a snapshot someone extracted, or a sysfs dump: "no such file" misled.
        what, fix = (("a directory", "pass the tarball itself (a sysfs dump directory goes to --machine DIR)")
                     if path.is_dir() else ("not a regular file", "pass the tarball itself") if path.exists()
                     else ("no such file", "take one with `numalign snapshot FILE` on the node"))
        raise SnapshotError(f"--node {path}: {what}; expected {_EXPECTED}; {fix}")
    tmp = tempfile.TemporaryDirectory(prefix="numalign-node-")
    _kept.append(tmp)
    root = Path(tmp.name)
    extract_archive(path, root, f"--node {path}", _EXPECTED)
    try:
        manifest = json.loads(read_bounded(root / MANIFEST, MAX_TEXT_FILE_BYTES, MANIFEST).decode("utf-8"))
    except (OSError, ValueError, RecursionError):
        raise SnapshotError(f"--node {path}: no readable {MANIFEST}; expected {_EXPECTED}; for a plain "
                            "sysfs dump use --machine") from None
    if not isinstance(manifest, dict) or manifest.get("format") != SNAPSHOT_FORMAT:
        found = manifest.get("format") if isinstance(manifest, dict) else None
        raise SnapshotError(f"--node {path}: {MANIFEST} has format {quote(found)}; expected {SNAPSHOT_FORMAT!r}")
    name = manifest.get("node_name")
    return NodeSnapshot(path, root, name if isinstance(name, str) and name else path.name.split(".")[0], manifest)
