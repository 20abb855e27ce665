"""`numalign run`'s inputs: the pod from request flags or a manifest, the kubelet configuration, this host.

Kept apart from cli/run.py (the process side) so each stays one idea.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import re
import sys
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from numalign.errors import InvalidInputError

if TYPE_CHECKING:
    from numalign.k8s.kubeletconfig import KubeletConfig
    from numalign.k8s.pod import Pod
    from numalign.machine.topology import Machine

_T = TypeVar("_T")
RUN_CONFIG = "run-kubelet-config.yaml"


def parse_pairs(values: Sequence[str], option: str, form: str, convert: Callable[[str], _T]) -> list[tuple[str, _T]]:
    out = []
    for v in values:
        key, sep, value = v.partition("=")
        if not sep or not key or not value:
            raise InvalidInputError(f"{option} {v!r}: expected {form}, e.g. {option} example.com/gpu=...; "
                                    "fix the value")
        out.append((key, convert(value)))
    return out


def run_config(args: argparse.Namespace) -> KubeletConfig:
    """The kubelet configuration: --config and flags, over the built-in run configuration (not the
    kubelet's defaults, whose cpuManagerPolicy none would pin nothing)."""
    from numalign.cli.options.kubeletflags import config_from_args
    from numalign.cli.options.nodeargs import builtin_config

    # run -q says the decision line alone: which form of --config was read is not said then.
    quiet = getattr(args, "quiet", False)
    return config_from_args(args, base=None if args.kubelet_config else builtin_config(RUN_CONFIG),
                            **({"note": lambda _m: None} if quiet else {}))


def this_host() -> Machine:
    from numalign.adapters.sysfs import discover_sysfs
    from numalign.errors import DiscoveryError

    try:
        return discover_sysfs("/")
    except (DiscoveryError, OSError) as e:
        raise DiscoveryError(
            f"cannot read this host's topology from /sys ({e}); numalign run places processes on the machine it "
            "runs on and needs it; fix /sys, or pass --machine FILE|NAME describing this host"
        ) from None


def serve_plugins(state_dir: Path) -> dict[str, Path]:
    """Device plugins connected to a `numalign serve` on this state directory: resource -> socket."""
    from numalign.agent.status import read_status

    doc = read_status(state_dir) if state_dir.is_dir() else None
    resources = (doc or {}).get("resources") or {}
    return {str(r): Path(s) for r, s in ((doc or {}).get("plugin_sockets") or {}).items()
            if isinstance(s, str) and (resources.get(r) or {}).get("connected")}


def requested_extended(pod: Pod) -> set[str]:
    from numalign.k8s.resources import is_extended_resource_name

    return {n for c in pod.all_containers() for n in (*c.requests, *c.limits) if is_extended_resource_name(n)}


@dataclass(frozen=True)
class PodFlags:
    """The pod `numalign run` admits, as its flags give it: a manifest (and the container COMMAND runs
    as), or requests (= limits) from --cpus, --memory, --hugepages-*, --device and the pod's --name."""

    pod: str | None = None
    container: str | None = None
    cpus: str | None = None
    memory: str | None = None
    hugepages_2Mi: str | None = None  # noqa: N815  # the flag's own spelling
    hugepages_1Gi: str | None = None  # noqa: N815
    device: tuple[str, ...] = ()
    name: str | None = None

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> PodFlags:
        return cls(args.pod, args.container, args.cpus, args.memory, args.hugepages_2Mi, args.hugepages_1Gi,
                   tuple(args.device), args.name)


def build_pod(
    args: PodFlags, command: Sequence[str], machine: Machine, devices: Mapping[str, Any]
) -> tuple[Pod, str]:
    """The pod to admit and the container COMMAND runs as; refused here when it cannot fit at all."""
    from numalign.adapters.textfiles import load_pods
    from numalign.k8s.manifest import pod_from_dict, pod_uid

    flags = {"--cpus": args.cpus, "--memory": args.memory, "--hugepages-2Mi": args.hugepages_2Mi,
             "--hugepages-1Gi": args.hugepages_1Gi}
    given = [name for name, v in flags.items() if v is not None] + (["--device"] if args.device else [])
    if args.pod is not None:
        if given:
            raise InvalidInputError(
                f"{args.pod}: {', '.join(given)} given with a manifest; expected requests either from "
                "POD.yaml or from flags; drop the flags or the manifest"
            )
        pods = load_pods(args.pod, warn=lambda m: print(f"numalign run: warning: {m}", file=sys.stderr))
        if len(pods) != 1:
            raise InvalidInputError(f"{args.pod}: {len(pods)} pods; expected exactly one Pod; keep one in the file")
        pod = pods[0]
        names = [c.name for c in pod.containers]
        container = args.container or (names[0] if len(names) == 1 else None)
        if container is None or container not in [c.name for c in pod.all_containers()]:
            raise InvalidInputError(
                f"{args.pod}: --container {args.container or '(none)'}: expected one of {', '.join(names)}; "
                "pass --container NAME"
            )
        if pod.uid == pod_uid(pod.namespace, pod.name):
            # No metadata.uid: each run is its own pod, so two runs of one manifest can coexist.
            pod = dataclasses.replace(pod, uid=str(uuid.uuid4()))
    else:
        if args.container:
            raise InvalidInputError("--container names a container of POD.yaml; without a manifest drop it")
        from numalign.k8s.quantity import Quantity

        limits: dict[str, str] = {}
        for resource, option in (("cpu", "--cpus"), ("memory", "--memory"), ("hugepages-2Mi", "--hugepages-2Mi"),
                                 ("hugepages-1Gi", "--hugepages-1Gi")):
            value = flags[option]
            if value is not None:
                Quantity.parse(value, where=option)  # named by its flag, not by the manifest built from it
                limits[resource] = value
        for resource, count in parse_pairs(args.device, "--device", "RESOURCE=N", str):
            Quantity.parse(count, where=f"--device {resource}")
            limits[resource] = count
        if not limits:
            raise InvalidInputError("no requests; expected --cpus, --memory, --hugepages-*, --device "
                                    "or a POD.yaml; e.g. --cpus 2 --memory 1Gi")
        name = args.name or pod_name(command)
        manifest = {"metadata": {"name": name, "namespace": "default", "uid": str(uuid.uuid4())},
                    "spec": {"containers": [{"name": "main", "resources": {"limits": limits}}]}}
        pod = pod_from_dict(manifest, "numalign run flags")
        container = "main"
    _check_fits(pod, machine, devices, args)
    return pod, container


def _check_fits(pod: Pod, machine: Machine, devices: Mapping[str, Any], args: PodFlags) -> None:
    """Requests nothing here can satisfy are bad input for a run, not a decision to record."""
    from numalign.k8s.resources import is_extended_resource_name

    have = {*machine.devices_by_resource(), *devices}  # `devices` names plugins too
    online = len(machine.online_cpus())
    for c in pod.all_containers():
        cpu = c.limits.get("cpu") or c.requests.get("cpu")
        if cpu is not None and cpu.milli_value() > online * 1000:
            raise InvalidInputError(
                f"cpu {cpu}: {'--cpus' if args.pod is None else args.pod + ' container ' + c.name} asks for more CPUs "
                f"than {machine.name} has ({online}); ask for at most {online} less the reserved CPUs "
                "(--reserved-cpus; the built-in run configuration reserves CPU 0)"
            )
        for name in (*c.requests, *c.limits):
            if is_extended_resource_name(name) and name not in have:
                known = ", ".join(sorted(have)) or "none"
                raise InvalidInputError(
                    f"{name}: no device on {machine.name} provides it (it has: {known}); numalign run refuses a "
                    f"device it cannot give (the kubelet would start the container without it); pass --devices "
                    f"{name}=FILE listing them, start its device plugin with `numalign serve` on this --state-dir, "
                    "or drop the request"
                )


def check_host_fits(machine: Machine, config: KubeletConfig) -> None:
    """Every CPU and NUMA node the decision could give must be usable by this process, or a refusal now,
    before the state directory is opened (it would otherwise hold another machine's state): the
    machine is not this host (--machine), or this process is confined to a cpuset."""
    from numalign.k8s.cpuset import format_cpuset
    from numalign.run.affinity import allowed_cpus, allowed_mems

    usable = allowed_cpus()
    reserved = set(config.reserved_cpus())
    unusable = set(machine.online_cpus()) - reserved - usable
    if unusable:
        keep_out = format_cpuset(sorted(reserved | unusable))
        raise InvalidInputError(
            f"machine {machine.name}: CPUs {format_cpuset(sorted(unusable))} may be given, but this process may "
            f"only run on {format_cpuset(sorted(usable))}; expected a machine that is this host and CPUs this "
            f"process may use; omit --machine, or keep the others out with --reserved-cpus {keep_out}"
        )
    mems = allowed_mems()
    missing = sorted({n.id for n in machine.numa_nodes if n.memory_bytes} - mems)
    if missing and config.memory_manager_policy == "Static":
        raise InvalidInputError(
            f"machine {machine.name}: memory may be bound to NUMA nodes {format_cpuset(missing)}, but this process "
            f"may only allocate on {format_cpuset(sorted(mems))}; omit --machine so the decision is for this host"
        )


def container_limits(pod: Pod, container: str) -> tuple[int | None, dict[int, int]]:
    """memory.max and the hugetlb limits (page size -> bytes) the runtime would write for `container`."""
    from numalign.k8s.resources import hugepage_size_from_resource_name, is_hugepage_resource_name

    c = next(c for c in pod.all_containers() if c.name == container)
    memory = c.limits.get("memory")
    hugetlb = {hugepage_size_from_resource_name(n).value(): q.value()
               for n, q in c.limits.items() if is_hugepage_resource_name(n)}
    return (None if memory is None else memory.value()), hugetlb


def default_state_dir() -> Path:
    """/var/lib/numalign for root; $XDG_STATE_HOME/numalign (~/.local/state/numalign) for anyone else."""
    if os.geteuid() == 0:
        return Path("/var/lib/numalign")
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "numalign"


_NAME = re.compile(r"[^a-z0-9-]+")


def pod_name(command: Sequence[str]) -> str:
    """COMMAND's name as a DNS label, with numalign's pid: unique among concurrent runs."""
    base = _NAME.sub("-", Path(command[0]).name.lower()).strip("-") or "run"
    return f"{base[:40]}-{os.getpid()}"


def check_state_dir(path: Path) -> None:
    """A state directory the user owns and may write (or one numalign may create)."""
    from numalign.cli.options.paths import check_directory

    check_directory(path, "--state-dir")
    existing = next((p for p in (path, *path.parents) if p.exists()), None)
    if existing is None:
        return
    st = existing.stat()
    euid = os.geteuid()
    # Root too: state another user can rewrite would steer root's pinning (and its cgroup removals).
    if existing == path and st.st_uid != euid:
        raise InvalidInputError(
            f"--state-dir {path}: owned by uid {st.st_uid}, not by you (uid {euid}); expected a state directory "
            "you own, so no other user's runs can change your allocations; pass --state-dir DIR you own"
        )
    if not os.access(existing, os.W_OK | os.X_OK):
        raise InvalidInputError(
            f"--state-dir {path}: {existing} is not writable by uid {euid}; expected a directory numalign may "
            "write its state in; pass another --state-dir, or fix its permissions"
        )
