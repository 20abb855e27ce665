"""The "checkpoint" area: the kubelet's state files both ways (conformance/area_checkpoint.go).

A case is a state of the CPU, memory or device manager and, mostly, a file to read: numalign's own
encoding of that state (numalign writes, the real code reads it back, checksum verified), the same
with its checksum or its content changed, cut short, or a foreign file. Both sides answer what they
write for the state (byte for byte), what they restore from that, and what they restore from the file
or the class of their refusal (corrupt, decode, policy, cpuset, migrate).
"""

from __future__ import annotations

import base64
import random
from typing import Any

from conformance.versions import kubelet_version
from numalign.errors import CheckpointError, InvalidInputError
from numalign.k8s.cpuset import format_cpuset, parse_cpuset
from numalign.kubelet.checkpointmanager.errors import (
    CheckpointDecodeError,
    CorruptCheckpointError,
    MigrationError,
    PolicyMismatchError,
)
from numalign.kubelet.cpumanager.checkpoint import CPUManagerCheckpoint, decode_cpu_checkpoint, encode_cpu_checkpoint
from numalign.kubelet.devicemanager.checkpoint import decode_device_checkpoint, encode_device_checkpoint
from numalign.kubelet.devicemanager.state import DeviceManagerState, PodDevicesEntry
from numalign.kubelet.memorymanager.checkpoint import decode_memory_checkpoint, encode_memory_checkpoint
from numalign.kubelet.memorymanager.state import Block, MemoryManagerState, MemoryTable, NUMANodeState

NAME = "checkpoint"
MINORS = ("1.33", "1.34", "1.35", "1.36", "1.37")

_NAMES = ("c", "app", "sidecar", "init-0", "a<b&c>", "é", "x\u2028y", 'q"uote')


def _uid(rng: random.Random) -> str:
    h = f"{rng.getrandbits(128):032x}"
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def _name(rng: random.Random) -> str:
    return rng.choice(_NAMES) if rng.random() < 0.15 else f"c{rng.randrange(4)}"


def _cpu_state(rng: random.Random) -> dict[str, Any]:
    free = list(range(rng.randint(1, 96)))
    rng.shuffle(free)
    entries: dict[str, dict[str, str]] = {}
    for _ in range(rng.choice((0, 1, 2, 3, 6))):
        pod = entries.setdefault(_uid(rng), {})
        for _ in range(rng.randint(1, 3)):
            if len(free) < 2:
                break
            n = rng.randint(1, min(8, len(free) - 1))
            pod[_name(rng)] = format_cpuset(free[:n])
            del free[:n]
    entries = {p: c for p, c in entries.items() if c}
    return {"default": format_cpuset(free), "entries": entries}


def _table(rng: random.Random, scale: int) -> dict[str, int]:
    total = rng.randrange(1, 1 << 10) * scale
    reserved_sys = rng.randrange(0, total // 4 + 1)
    allocatable = total - reserved_sys
    reserved = rng.randrange(0, allocatable + 1)
    return {"total": total, "systemReserved": reserved_sys, "allocatable": allocatable,
            "reserved": reserved, "free": allocatable - reserved}


def _memory_state(rng: random.Random) -> dict[str, Any]:
    nodes = rng.randint(1, 4)
    machine: dict[str, Any] = {}
    for n in range(nodes):
        mm = {"memory": _table(rng, 1 << 30)}
        if rng.random() < 0.5:
            mm["hugepages-2Mi"] = _table(rng, 2 << 20)
        if rng.random() < 0.3:
            mm["hugepages-1Gi"] = _table(rng, 1 << 30)
        cells = [n] if rng.random() < 0.7 else list(range(nodes))
        machine[str(n)] = {"numberOfAssignments": rng.randrange(0, 5), "memoryMap": mm, "cells": cells}
    entries: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for _ in range(rng.choice((0, 1, 2, 4))):
        pod = entries.setdefault(_uid(rng), {})
        for _ in range(rng.randint(1, 2)):
            blocks = []
            for resource in rng.sample(("memory", "hugepages-2Mi", "hugepages-1Gi"), rng.randint(1, 2)):
                affinity = sorted(rng.sample(range(nodes), rng.randint(1, nodes)))
                blocks.append({"numaAffinity": affinity, "type": resource, "size": rng.randrange(1, 1 << 36)})
            pod[_name(rng)] = blocks
    return {"machine": machine, "entries": entries}


def _device_state(rng: random.Random) -> dict[str, Any]:
    resources = [f"vendor.com/dev{i}" for i in range(rng.randint(0, 3))]
    registered = {r: [f"{r[-4:]}-{j}" for j in range(rng.randint(0, 4))] for r in resources}
    entries = []
    for _ in range(rng.choice((0, 1, 2, 4))):
        if not resources:
            break
        r = rng.choice(resources)
        devices: dict[str, list[str]] = {}
        for numa in rng.sample((-1, 0, 1, 2, 3), rng.randint(1, 2)):
            devices[str(numa)] = [f"{r[-4:]}-{rng.randrange(8)}" for _ in range(rng.randint(0, 2))]
        resp = bytes(rng.randrange(256) for _ in range(rng.choice((0, 0, 5, 40))))
        entries.append({"pod": _uid(rng), "container": _name(rng), "resource": r, "devices": devices,
                        "alloc_resp": base64.b64encode(resp).decode()})
    return {"entries": entries, "registered": registered}


_FOREIGN = ("", "{}", "[]", "null", "not json", '{"policyName":"static"}', '{"Data":{},"Checksum":0}',
            '{"policyName":"static","defaultCpuSet":"0-3","checksum":"12"}')


def _file(rng: random.Random, kind: str, state: dict[str, Any], version: str) -> str | None:
    roll = rng.random()
    if roll < 0.15:
        return None
    own = _encode(kind, state, version).decode("utf-8")
    if roll < 0.5:
        return own
    if roll < 0.65:  # a checksum digit changed
        digits = [i for i, ch in enumerate(own) if ch.isdigit()]
        i = max(i for i in digits) if digits else 0
        return own[:i] + str((int(own[i]) + 1) % 10) + own[i + 1 :] if digits else own
    if roll < 0.8:  # the content changed, the checksum kept
        i = own.find('"', len(own) // 2) if rng.random() < 0.5 else own.find("1")
        return own[:i] + own[i + 1 :] if i > 0 else own + " "
    if roll < 0.9:
        return own[: rng.randrange(0, len(own))]
    return rng.choice(_FOREIGN)


def generate(rng: random.Random, version: str) -> dict[str, Any]:
    kind = rng.choice(("cpu", "memory", "device"))
    state = {"cpu": _cpu_state, "memory": _memory_state, "device": _device_state}[kind](rng)
    policy = {"cpu": "static", "memory": "Static", "device": ""}[kind]
    other = {"cpu": "none", "memory": "None", "device": ""}[kind]
    read_policy = other if rng.random() < 0.08 else policy
    return {"kind": kind, "policy": policy, "read_policy": read_policy, "gates": {}, "state": state,
            "file": _file(rng, kind, state, version)}


def size(case: dict[str, Any]) -> int:
    return len(str(case["state"])) + len(case["file"] or "")


# --- numalign's answer -------------------------------------------------------------------------------


def _cpu_model(state: dict[str, Any]) -> CPUManagerCheckpoint:
    return CPUManagerCheckpoint("static", state["default"], state["entries"])


def _memory_model(state: dict[str, Any], policy: str) -> MemoryManagerState:
    machine = {
        int(n): NUMANodeState(
            s["numberOfAssignments"],
            {r: MemoryTable(t["total"], t["systemReserved"], t["allocatable"], t["reserved"], t["free"])
             for r, t in s["memoryMap"].items()},
            list(s["cells"]),
        )
        for n, s in state["machine"].items()
    }
    entries = {
        pod: {c: [Block(list(b["numaAffinity"]), b["type"], b["size"]) for b in blocks] for c, blocks in ctrs.items()}
        for pod, ctrs in state["entries"].items()
    }
    return MemoryManagerState(policy, machine, entries)


def _device_model(state: dict[str, Any]) -> DeviceManagerState:
    entries = tuple(
        PodDevicesEntry(e["pod"], e["container"], e["resource"], {int(n): ids for n, ids in e["devices"].items()},
                        base64.b64decode(e["alloc_resp"]))
        for e in state["entries"]
    )
    return DeviceManagerState(entries, state["registered"])


def _minor(version: str) -> tuple[int, int]:
    kv = kubelet_version(version)
    return (kv.major, kv.minor)


def _encode(kind: str, state: dict[str, Any], version: str) -> bytes:
    if kind == "cpu":
        return encode_cpu_checkpoint(_cpu_model(state), version=_minor(version))
    if kind == "memory":
        return encode_memory_checkpoint(_memory_model(state, "Static"), version=_minor(version))
    return encode_device_checkpoint(_device_model(state))


def _refused(e: Exception) -> dict[str, str]:
    cls = {CorruptCheckpointError: "corrupt", PolicyMismatchError: "policy", MigrationError: "migrate",
           CheckpointDecodeError: "decode", InvalidInputError: "cpuset"}
    for t, name in cls.items():
        if isinstance(e, t):
            return {"refused": name, "text": str(e)}
    return {"refused": "decode", "text": str(e)}


def _read(kind: str, data: bytes, policy: str, version: str) -> Any:
    try:
        if kind == "cpu":
            cp = decode_cpu_checkpoint(data, policy_name=policy, version=_minor(version))
            return {
                "default": format_cpuset(parse_cpuset(cp.default_cpu_set)),
                "entries": {p: {c: format_cpuset(parse_cpuset(s)) for c, s in ctrs.items()}
                            for p, ctrs in cp.entries.items()},
            }
        if kind == "memory":
            m = decode_memory_checkpoint(data, policy_name=policy, version=_minor(version))
            return {
                "machine": {
                    str(n): {
                        "numberOfAssignments": s.number_of_assignments,
                        "memoryMap": {r: {"total": t.total, "systemReserved": t.system_reserved,
                                          "allocatable": t.allocatable, "reserved": t.reserved, "free": t.free}
                                      for r, t in s.memory_map.items()},
                        "cells": list(s.cells),
                    }
                    for n, s in m.machine_state.items()
                },
                "entries": {p: {c: [{"numaAffinity": list(b.numa_affinity), "type": b.type, "size": b.size}
                                    for b in blocks] for c, blocks in ctrs.items()}
                            for p, ctrs in m.entries.items()},
            }
        d = decode_device_checkpoint(data, legacy_fallback=False)
        return {
            "entries": [
                {"pod": e.pod_uid, "container": e.container_name, "resource": e.resource_name,
                 "devices": {str(n): list(ids) for n, ids in e.device_ids.items()},
                 "alloc_resp": base64.b64encode(bytes(e.alloc_resp)).decode()}
                for e in d.pod_device_entries
            ],
            "registered": {r: list(ids) for r, ids in d.registered_devices.items()},
        }
    except (CheckpointError, InvalidInputError) as e:
        return _refused(e)


def numalign(case: dict[str, Any], version: str) -> dict[str, Any]:
    kind = case["kind"]
    written = _encode(kind, case["state"], version)
    answer: dict[str, Any] = {
        "written": written.decode("utf-8"),
        "reread": _read(kind, written, case["policy"], version),
    }
    if case["file"] is not None:
        answer["read"] = _read(kind, case["file"].encode("utf-8"), case["read_policy"], version)
    return answer


def equivalent(ours: Any, theirs: Any) -> bool:
    """Equal answers, a refusal compared by its class: the texts differ by design (numalign's line says
    what is wrong and the fix; the kubelet's wraps Go's decoder errors)."""
    return bool(_classes(ours) == _classes(theirs))


def _classes(answer: Any) -> Any:
    if isinstance(answer, dict):
        if "refused" in answer:
            return {"refused": answer["refused"]}
        return {k: _classes(v) for k, v in answer.items()}
    return answer
