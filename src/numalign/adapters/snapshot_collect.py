"""`numalign snapshot`: a node in one tarball, to ask questions of elsewhere.

What goes in (paths inside the tarball):
  snapshot.json                     what was collected, from where, and what was missing; the running
                                    kubelet's command line and the resource-manager flags in it; its
                                    version (`kubelet --version` of the running binary, else the Node
                                    object through kubectl, else --kubelet-version), as kubelet_version
  sys/..., proc/...                 only the sysfs and procfs files discovery reads (adapters/sysfs.py,
                                    adapters/cadvisor_sysfs.py), laid out as a sysfs dump, so the
                                    tarball is also a `--machine` sysfs dump
  kubelet/config.yaml               the KubeletConfiguration file
  state/cpu_manager_state, state/memory_manager_state, state/device-plugins/kubelet_internal_checkpoint,
  state/numalign_pods.json, state/numalign_dra_claims.json
                                    the state files, byte for byte (checksums intact)
  podresources/allocatable.json, podresources/pods.json
                                    GetAllocatableResources and List of the PodResources socket, when it
                                    answers (protobuf field names): the device IDs the plugins really use,
                                    with their NUMA nodes

Every file is read with a size bound; a missing file is noted, not an error. The tarball is written
to a temporary file beside the target and renamed into place, so a failed run leaves no half a file.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import tarfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from numalign.adapters.cadvisor_sysfs import MAX_ATTRIBUTE_BYTES, UnsafeFileError, read_attribute
from numalign.adapters.kubelet_process import KubeletProcess
from numalign.adapters.kubeletversion import ReportedVersion, from_kubectl, from_kubelet_binary
from numalign.adapters.statedir.layout import (
    DEVICE_PLUGINS_DIR,
    DRA_CLAIMS_FILE,
    KUBELET_STATE_FILES,
    POD_RECORD_FILE,
)
from numalign.errors import DiscoveryError
from numalign.limits import MAX_TEXT_FILE_BYTES

SNAPSHOT_FORMAT = "numalign.snapshot/v1"
MANIFEST = "snapshot.json"
CONFIG_MEMBER = "kubelet/config.yaml"
STATE_PREFIX = "state"
ALLOCATABLE_MEMBER = "podresources/allocatable.json"
PODS_MEMBER = "podresources/pods.json"
DRA_MEMBER = "dra/objects.json"  # `kubectl get resourceslices,deviceclasses,resourceclaims -A -o json` (--dra-objects)
STATE_FILES = (*KUBELET_STATE_FILES, POD_RECORD_FILE, DRA_CLAIMS_FILE)
_STATE_LIMIT = 64 << 20  # a checkpoint of thousands of pods is a few MB

_CPU_FILES = ("online",)
_TOPOLOGY_FILES = ("core_id", "physical_package_id", "die_id", "thread_siblings", "core_cpus")
_CACHE_FILES = ("id", "size", "level", "type", "shared_cpu_map")
_NODE_FILES = ("cpumap", "cpulist", "meminfo", "distance")
_PCI_FILES = ("class", "vendor", "device", "numa_node")
_NUMBERED = re.compile(r"^(cpu|node|index)\d+$")


@dataclass
class Collected:
    """What one snapshot holds, for the command's summary."""

    path: Path
    node_name: str
    sysfs_files: int = 0
    included: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"file": str(self.path), "nodeName": self.node_name, "sysfsFiles": self.sysfs_files,
                "included": self.included, "missing": self.missing}


def _children(directory: Path, prefix: str) -> list[Path]:
    try:
        return sorted(p for p in directory.iterdir() if p.name.startswith(prefix) and _NUMBERED.match(p.name))
    except OSError:
        return []


def sysfs_members(root: Path) -> Iterator[tuple[str, Path]]:
    """(member name, path to read) of every file discovery reads; node CPU links are yielded as links."""
    system = root / "sys" / "devices" / "system"
    for name in ("online", "possible", "present"):
        yield f"sys/devices/system/cpu/{name}", system / "cpu" / name
    for cpu in _children(system / "cpu", "cpu"):
        base = f"sys/devices/system/cpu/{cpu.name}"
        for name in _CPU_FILES:
            yield f"{base}/{name}", cpu / name
        for name in _TOPOLOGY_FILES:
            yield f"{base}/topology/{name}", cpu / "topology" / name
        for index in _children(cpu / "cache", "index"):
            for name in _CACHE_FILES:
                yield f"{base}/cache/{index.name}/{name}", index / name
    for name in ("online", "possible"):
        yield f"sys/devices/system/node/{name}", system / "node" / name
    for node in _children(system / "node", "node"):
        base = f"sys/devices/system/node/{node.name}"
        for name in _NODE_FILES:
            yield f"{base}/{name}", node / name
        for cpu in _children(node, "cpu"):
            yield f"{base}/{cpu.name}", cpu  # a link to ../../cpu/cpuN in sysfs
        yield from _hugepages(node / "hugepages", f"{base}/hugepages")
    yield from _hugepages(root / "sys" / "kernel" / "mm" / "hugepages", "sys/kernel/mm/hugepages")
    pci = root / "sys" / "bus" / "pci" / "devices"
    with contextlib.suppress(OSError):
        for dev in sorted(pci.iterdir()):
            for name in _PCI_FILES:
                yield f"sys/bus/pci/devices/{dev.name}/{name}", dev / name
    yield "proc/meminfo", root / "proc" / "meminfo"
    yield "proc/cpuinfo", root / "proc" / "cpuinfo"  # cadvisor's NumSockets and NumPhysicalCores
    yield "proc/sys/kernel/hostname", root / "proc" / "sys" / "kernel" / "hostname"


def _hugepages(directory: Path, member: str) -> Iterator[tuple[str, Path]]:
    with contextlib.suppress(OSError):
        for d in sorted(directory.iterdir()):
            if d.name.startswith("hugepages-"):
                yield f"{member}/{d.name}/nr_hugepages", d / "nr_hugepages"


class _Writer:
    def __init__(self, tar: tarfile.TarFile) -> None:
        self.tar = tar
        self.mtime = time.time()

    def file(self, name: str, data: bytes) -> None:
        info = tarfile.TarInfo(name)
        info.size, info.mode, info.mtime = len(data), 0o444, self.mtime
        self.tar.addfile(info, io.BytesIO(data))

    def link(self, name: str, target: str) -> None:
        info = tarfile.TarInfo(name)
        info.type, info.linkname, info.mode, info.mtime = tarfile.SYMTYPE, target, 0o777, self.mtime
        self.tar.addfile(info)


def _sysfs(w: _Writer, root: Path, out: Collected, progress: Callable[[str], None] | None) -> None:
    for member, path in sysfs_members(root):
        if progress is not None:
            progress(f"{out.sysfs_files} sysfs files, {member}")
        if path.is_symlink() and member.rsplit("/", 1)[-1].startswith("cpu") and "/node/" in member:
            target = path.readlink()
            # Keep the kernel's relative link (../../cpu/cpuN); an absolute one is pointed at the copy.
            w.link(member, str(target) if not target.is_absolute() else f"../../cpu/{path.name}")
            out.sysfs_files += 1
            continue
        try:
            text = read_attribute(path)
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            continue
        except UnsafeFileError as e:
            raise DiscoveryError(f"snapshot: {e}") from None
        except OSError as e:
            out.missing.append(f"{member} ({e.strerror or e})")
            continue
        w.file(member, text.encode())
        out.sysfs_files += 1
    if out.sysfs_files == 0 or not (root / "sys" / "devices" / "system" / "cpu").is_dir():
        raise DiscoveryError(f"snapshot: {root}/sys/devices/system/cpu: no such directory; expected a sysfs "
                             "root (a directory holding sys/, / on a live node); check --sysfs-root")


def _bounded(path: Path, limit: int) -> bytes | None:
    try:
        with path.open("rb") as f:
            data = f.read(limit + 1)
    except FileNotFoundError:
        return None
    if len(data) > limit:
        raise DiscoveryError(f"snapshot: {path}: larger than {limit} bytes; expected a kubelet state or config file")
    return data


def collect(out_path: Path, *, sysfs_root: Path, config: Path | None, state_dir: Path | None,
            pod_resources_socket: Path | None, node_name: str | None = None,
            kubelet: KubeletProcess | None = None, device_plugin_dir: Path | None = None,
            progress: Callable[[str], None] | None = None,
            kubelet_version: ReportedVersion | None = None, dra_objects: Path | None = None) -> Collected:
    """Write the snapshot tarball (gzip) to `out_path`; `kubelet`: the running kubelet, whose
    resource-manager flags are recorded (they override its config file); `kubelet_version`: what it
    reported, when known (snapshot_version finds it)."""
    from numalign.adapters.statedir.files import write_atomic

    host_file = sysfs_root / "proc" / "sys" / "kernel" / "hostname"
    hostname = read_attribute(host_file).strip() if host_file.is_file() else ""
    fallback = os.uname().nodename if sysfs_root.resolve() == Path("/") else sysfs_root.resolve().name
    name = node_name or hostname or fallback.lower()
    result = Collected(out_path, name)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz", format=tarfile.PAX_FORMAT) as tar:
        w = _Writer(tar)
        _sysfs(w, sysfs_root, result, progress)
        result.included.append(f"sysfs topology from {sysfs_root} ({result.sysfs_files} files)")
        _optional(w, result, config, CONFIG_MEMBER, "kubelet config", MAX_ATTRIBUTE_BYTES)
        _optional(w, result, dra_objects, DRA_MEMBER, "DRA objects", MAX_TEXT_FILE_BYTES)
        for rel in STATE_FILES if state_dir is not None else ():
            assert state_dir is not None
            source = state_dir / rel
            if rel.startswith(f"{DEVICE_PLUGINS_DIR}/") and device_plugin_dir is not None:
                source = device_plugin_dir / rel.removeprefix(f"{DEVICE_PLUGINS_DIR}/")
            # numalign_pods.json exists only where numalign admitted pods: a kubelet's directory lacks it.
            _optional(w, result, source, f"{STATE_PREFIX}/{rel}", rel, _STATE_LIMIT,
                      quiet=rel in (POD_RECORD_FILE, DRA_CLAIMS_FILE))
        if progress is not None:
            progress("asking PodResources")
        captured = _pod_resources(pod_resources_socket, result)
        if captured is not None:
            w.file(ALLOCATABLE_MEMBER, json.dumps(captured[0], indent=1, sort_keys=True).encode())
            w.file(PODS_MEMBER, json.dumps(captured[1], indent=1, sort_keys=True).encode())
        if kubelet is not None:
            result.included.append(f"kubelet command line (pid {kubelet.pid}, {len(kubelet.flags)} resource-manager "
                                   "flag(s))")
        if kubelet_version is not None:
            result.included.append(f"kubelet version {kubelet_version.text} ({kubelet_version.where})")
        else:
            result.missing.append("kubelet version: neither `kubelet --version` nor kubectl answered; `--node` "
                                  "then decides as numalign's default version (record one with --kubelet-version)")
        manifest = {"format": SNAPSHOT_FORMAT, "node_name": name, "created": time.time(),
                    "kubelet_version": None if kubelet_version is None else {
                        "version": kubelet_version.text, "source": kubelet_version.where},
                    "kubelet": None if kubelet is None else {
                        "pid": kubelet.pid, "command_line": list(kubelet.argv),
                        "flags": [list(f) for f in kubelet.flags]},
                    "sources": {"sysfs_root": str(sysfs_root), "config": str(config) if config else None,
                                "state_dir": str(state_dir) if state_dir else None,
                                "pod_resources_socket": str(pod_resources_socket) if pod_resources_socket else None},
                    "included": result.included, "missing": result.missing}
        w.file(MANIFEST, json.dumps(manifest, indent=1, sort_keys=True).encode())
    write_atomic(out_path, buf.getvalue(), mode=0o600)
    return result


def snapshot_version(kubelet: KubeletProcess | None, node_name: str | None, proc_root: Path,
                     given: ReportedVersion | None = None) -> ReportedVersion | None:
    """The running kubelet's version: `given` (--kubelet-version), else its own binary's `--version`
    (/proc/PID/exe, the binary that runs even if the file was replaced since), else the Node object
    `node_name` names (None: not asked, e.g. for a sysfs dump that is not this host)."""
    if given is not None:
        return given
    if kubelet is not None:
        found = from_kubelet_binary(proc_root / str(kubelet.pid) / "exe",
                                    f"`kubelet --version` of pid {kubelet.pid}")
        if found is not None:
            return found
    return from_kubectl(node_name) if node_name else None


def _optional(w: _Writer, out: Collected, path: Path | None, member: str, what: str, limit: int,
              quiet: bool = False) -> None:
    if path is None:
        return
    try:
        data = _bounded(path, limit)
    except OSError as e:
        out.missing.append(f"{what}: {path}: {e.strerror or e}")
        return
    if data is None:
        if not quiet:
            out.missing.append(f"{what}: {path}: no such file")
        return
    w.file(member, data)
    out.included.append(f"{what} ({path})")


def _pod_resources(socket: Path | None, out: Collected) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """GetAllocatableResources and List of a reachable PodResources socket, as JSON objects."""
    if socket is None:
        return None
    if not socket.is_socket():
        out.missing.append(f"PodResources: {socket}: no socket there (no kubelet running?)")
        return None
    import grpc
    from google.protobuf.json_format import MessageToDict

    from numalign.adapters.grpc.gen.podresources.v1 import api_pb2 as pb
    from numalign.adapters.grpc.gen.podresources.v1 import api_pb2_grpc as pb_grpc

    try:
        with grpc.insecure_channel(f"unix://{socket.resolve()}") as channel:
            stub = pb_grpc.PodResourcesListerStub(channel)
            alloc = stub.GetAllocatableResources(pb.AllocatableResourcesRequest(), timeout=5.0)
            listed = stub.List(pb.ListPodResourcesRequest(), timeout=5.0)
    except grpc.RpcError as e:
        out.missing.append(f"PodResources: {socket}: {e.code().name}: {e.details()}")
        return None
    out.included.append(f"PodResources allocatable resources and pods ({socket})")
    return (MessageToDict(alloc, preserving_proto_field_name=True),
            MessageToDict(listed, preserving_proto_field_name=True))
