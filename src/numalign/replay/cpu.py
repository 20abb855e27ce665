"""Replay handlers for the cpu_hints and cpu_take vector kinds (../shared/oracle/PROVIDERS-README.md)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from numalign.errors import AllocationError, InvalidInputError
from numalign.kubelet.cpumanager.hints import generate_cpu_topology_hints
from numalign.kubelet.cpumanager.take import TakeOptions, allocate_cpus, smt_alignment_error
from numalign.kubelet.cpumanager.topology import CPUInfo, CPUTopology
from numalign.validation import expect_int

_TAKE_OPTIONS = {
    "full-pcpus-only": "full_pcpus_only",
    "distribute-cpus-across-numa": "distribute_cpus_across_numa",
    "distribute-cpus-across-cores": "distribute_cpus_across_cores",
    "prefer-align-cpus-by-uncorecache": "prefer_align_cpus_by_uncorecache",
    "align-by-socket": "align_by_socket",
}


def _where(scenario: Mapping[str, Any]) -> str:
    return f"scenario {scenario.get('id', '?')!s}"


def _int_list(value: Any, where: str) -> list[int]:
    if not isinstance(value, list):
        raise InvalidInputError(f"{where}: expected a list of integers, got {value!r}")
    return [expect_int(v, f"{where}[{i}]") for i, v in enumerate(value)]


def topology_from_json(machine: Any, where: str) -> CPUTopology:
    """A CPUTopology from the vector form {"cpus": [{"id","socket","numa","core","uncore"}...]}."""
    if not isinstance(machine, Mapping) or not isinstance(machine.get("cpus"), list):
        raise InvalidInputError(f"{where}.machine: expected an object with a 'cpus' list")
    infos: list[CPUInfo] = []
    for i, c in enumerate(machine["cpus"]):
        w = f"{where}.machine.cpus[{i}]"
        if not isinstance(c, Mapping):
            raise InvalidInputError(f"{w}: expected an object with id, socket, numa, core, uncore")
        missing = [k for k in ("id", "socket", "numa", "core") if k not in c]
        if missing:
            raise InvalidInputError(f"{w}: missing {', '.join(missing)}")
        socket = expect_int(c["socket"], f"{w}.socket")
        infos.append(
            CPUInfo(
                cpu=expect_int(c["id"], f"{w}.id"),
                numa_node=expect_int(c["numa"], f"{w}.numa"),
                socket=socket,
                core=expect_int(c["core"], f"{w}.core"),
                # No uncore cache reported: upstream falls back to the socket id.
                uncore=expect_int(c.get("uncore", socket), f"{w}.uncore"),
            )
        )
    return CPUTopology.from_cpu_infos(infos, where=f"{where}.machine.cpus")


def _options(scenario: Mapping[str, Any], where: str) -> dict[str, bool]:
    raw = scenario.get("options") or {}
    if not isinstance(raw, Mapping):
        raise InvalidInputError(f"{where}.options: expected an object name -> \"true\"/\"false\"")
    out: dict[str, bool] = {}
    for name, value in raw.items():
        text = str(value).strip().lower()
        if text not in ("true", "false", "1", "0", "t", "f"):
            raise InvalidInputError(f"{where}.options.{name}: expected \"true\" or \"false\", got {value!r}")
        if name not in _TAKE_OPTIONS:
            known = ", ".join(sorted(_TAKE_OPTIONS))
            raise InvalidInputError(f"{where}.options: unknown option {name!r}; expected one of {known}")
        out[_TAKE_OPTIONS[name]] = text in ("true", "1", "t")
    return out


def replay_cpu_hints(scenario: dict[str, Any]) -> dict[str, Any]:
    where = _where(scenario)
    topo = topology_from_json(scenario.get("machine"), where)
    opts = _options(scenario, where)
    hints = generate_cpu_topology_hints(
        topo,
        _int_list(scenario.get("available", []), f"{where}.available"),
        _int_list(scenario.get("reusable", []), f"{where}.reusable"),
        expect_int(scenario.get("request"), f"{where}.request"),
        align_by_socket=opts.get("align_by_socket", False),
    )
    return {"hints": [h.to_dict() for h in hints]}


def replay_cpu_take(scenario: dict[str, Any]) -> dict[str, Any]:
    where = _where(scenario)
    topo = topology_from_json(scenario.get("machine"), where)
    options = TakeOptions(**_options(scenario, where))
    available = frozenset(_int_list(scenario.get("available", []), f"{where}.available"))
    reusable = frozenset(_int_list(scenario.get("reusable", []), f"{where}.reusable"))
    request = expect_int(scenario.get("request"), f"{where}.request")
    raw_affinity = scenario.get("affinity_numa")
    affinity: int | None = None
    if raw_affinity is not None:
        affinity = 0
        for node in _int_list(raw_affinity, f"{where}.affinity_numa"):
            affinity |= 1 << node
    try:
        if options.full_pcpus_only:
            # No CPUs are reserved in these vectors, so the free physical CPUs are `available`.
            err = smt_alignment_error(topo, request, len(available))
            if err is not None:
                raise err
        cpus = allocate_cpus(topo, request, affinity, available, reusable, options)
    except AllocationError as e:
        out: dict[str, Any] = {"error": str(e)}
        if e.reason is not None:
            out["error_type"] = e.reason
        return out
    return {"cpus": sorted(cpus)}
