"""numalign_status.json: what the agent did with every manifest and pod, beside the kubelet state.

Written atomically after every change, read by `numalign pods`. Layout (JSON, sorted keys):

    {"version": 1,
     "pods": {uid: PodEntry.to_dict(): {"namespace", "name", "uid", "file",
                    "status": "admitted"|"rejected"|"pending"|"admitting", "reason", "message",
                    "record": DecisionRecord.to_dict() | null,
                    "allocations": {container: ContainerAllocation.to_dict()},
                    "container_order": [container, ...] (init containers first, in spec order: the keys
                    above are sorted), "runtime", "containers", "container_errors"}},
     "manifests": {file: {"status": "ok"|"invalid", "error": str|null, "pods": [uid, ...]}},
     "resources": {resource: {"healthy": [...], "unhealthy": [...], "connected": bool,
                               "reported": bool}},
     "plugin_devices": {resource: {device id: [NUMA node, ...] | null}} (the plugins' devices with the
                    NUMA nodes their TopologyInfo names, null: none; `pods` draws these, not the machine's),
     "faults": {kind: count}, "fault_log": [last messages],
     "draUnallocatable": {uid: {"pod", "message", "why": [reasons]}} (pods run without their DRA claims;
                    absent when none),
     "draAllocating": [pod keys] (admitted pods whose claims serve's allocation thread has yet to
                    allocate, in admission order; absent when none),
     "machine": the machine file (machine.fileformat), "reserved_cpus": cpuset}   (pictures in `pods`)
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from numalign.adapters.statedir.files import write_atomic
from numalign.adapters.statedir.layout import STATUS_FILE
from numalign.agent.book import PodBook
from numalign.agent.entries import PodStatus
from numalign.errors import CheckpointError, InvalidInputError
from numalign.kubelet.devicemanager.endpoint import Endpoint
from numalign.kubelet.devicemanager.pod_devices import RunContainerOptions
from numalign.kubelet.node import Node
from numalign.limits import MAX_STATE_FILE_BYTES, read_bounded

VERSION = 1


def status_path(state_dir: Path) -> Path:
    return Path(state_dir) / STATUS_FILE


def read_status(state_dir: Path) -> dict[str, Any] | None:
    """The status document, or None when the agent never wrote one there."""
    path = status_path(state_dir)
    try:
        raw = read_bounded(path, MAX_STATE_FILE_BYTES, "the agent's status file", regular_only=True)
        text = raw.decode("utf-8", errors="replace")
    except FileNotFoundError:
        return None
    except InvalidInputError as e:
        raise CheckpointError(str(e)) from None
    except OSError as e:
        raise CheckpointError(f"{path}: cannot read the agent's status file: {e.strerror or e}") from None
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError) as e:
        raise CheckpointError(
            f"{path}: not the JSON numalign serve writes ({e}); remove it, the agent rewrites it at its next change"
        ) from None
    if not isinstance(doc, dict) or not isinstance(doc.get("pods"), dict):
        raise CheckpointError(f"{path}: expected an object with a 'pods' object; remove it and restart the agent")
    return doc


def write_status(state_dir: Path, doc: dict[str, Any]) -> None:
    doc = {"version": VERSION, **doc}
    # 0600 like the kubelet's state files beside it: it holds Allocate's envs and mounts per container.
    write_atomic(status_path(state_dir), json.dumps(doc, indent=1, sort_keys=True).encode() + b"\n", mode=0o600)


def pods_document(book: PodBook, node: Node) -> dict[str, Any]:
    """The "pods" and "manifests" entries. An admitted pod's allocations and runtime options are read
    from the node now (a device may have been allocated again at its start); a pod admitting shows
    what it holds already (no plugin answer yet, so no runtime)."""
    for uid, entry in book.pods.items():
        if entry.status == PodStatus.ADMITTED and uid in node.pods:
            containers = list(node.pods[uid].all_containers())
            entry.allocations = {c.name: node.allocation(uid, c.name) for c in containers}
            runtime = {}
            for c in containers:
                opts = node.devices.pod_devices.run_container_options(uid, c.name)
                if opts is not None:
                    runtime[c.name] = _runtime_dict(opts)
            entry.runtime = runtime
        elif entry.status == PodStatus.ADMITTING and (res := node.reserved.get(uid)) is not None:
            entry.allocations = {c.name: node.allocation(uid, c.name) for c in res.pod.all_containers()}
    return {"pods": {uid: e.to_dict() for uid, e in book.pods.items()},
            "manifests": {path: m.to_dict() for path, m in book.manifests.items()}}


def _runtime_dict(opts: RunContainerOptions) -> dict[str, Any]:
    """The device plugins' Allocate answers merged for the container runtime (CRI fields)."""
    return {
        "envs": dict(opts.envs),
        "mounts": [{"container_path": mt.container_path, "host_path": mt.host_path, "read_only": mt.read_only}
                   for mt in opts.mounts],
        "devices": [{"container_path": d.container_path, "host_path": d.host_path, "permissions": d.permissions}
                    for d in opts.devices],
        "annotations": dict(opts.annotations),
        "cdi_devices": list(opts.cdi_devices),
    }


def plugin_documents(node: Node, book: PodBook, endpoints: Mapping[str, Endpoint]) -> dict[str, Any]:
    """The "resources" and "plugin_sockets" entries: every resource's devices and plugin connection."""
    resources = {
        r: {
            "healthy": sorted(node.devices.healthy.get(r, set())),
            "unhealthy": sorted(node.devices.unhealthy.get(r, set())),
            "connected": r in endpoints
            and (info := node.devices.endpoints.get(r)) is not None
            and not info.stopped,
            # False between a plugin's registration and its first ListAndWatch answer
            "reported": book.has_reported(r),
        }
        for r in sorted(set(node.devices.healthy) | set(node.devices.unhealthy) | set(endpoints))
    }
    # The devices as the plugins reported them, with their NUMA nodes: serve's devices are the plugins',
    # never the machine file's, so `numalign pods` draws these on the NUMA nodes (not in its -o json).
    devices = {
        r: {d: None if dev.topology is None else list(dev.topology)
            for d, dev in sorted(node.devices.all_devices.get(r, {}).items())}
        for r in resources
    }
    # Connected plugins' sockets, so `numalign run` sharing the directory can ask them for Allocate too.
    sockets = {r: s for r in sorted(endpoints) if (s := _socket_of(endpoints[r])) is not None}
    return {"resources": resources, "plugin_devices": devices, "plugin_sockets": sockets}


def machine_document(node: Node) -> dict[str, Any]:
    """The machine and reserved CPUs, so `numalign pods` draws the node the agent manages."""
    from numalign.k8s.cpuset import format_cpuset
    from numalign.machine.fileformat import machine_to_dict

    return {"machine": machine_to_dict(node.machine), "reserved_cpus": format_cpuset(node.cpu.reserved_cpus)}


def _socket_of(endpoint: Endpoint | None) -> str | None:
    inner = getattr(endpoint, "inner", endpoint)
    path = getattr(inner, "socket_path", None)
    return None if path is None else str(path)
