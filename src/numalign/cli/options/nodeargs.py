"""`--node SNAPSHOT` and `--devices`, shared by the commands that take a machine and a state directory
(admit, pods, nrt, remove)."""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from numalign.errors import InvalidInputError
from numalign.paths import DATA_DIR

if TYPE_CHECKING:
    from numalign.k8s.kubeletconfig import KubeletConfig
    from numalign.kubelet.node import Node
    from numalign.machine.topology import Device, Machine

EXAMPLE_CONFIG = "example-kubelet-config.yaml"


def data_file(name: str) -> Path:
    """A file shipped in numalign/data (the example pods and kubelet configuration)."""
    return DATA_DIR / name


NODE_HELP = ("a node snapshot (`numalign snapshot FILE`) in place of --machine, --config and --state-dir: its "
             "sysfs, kubelet config, state files and the device IDs its PodResources reported; only read, "
             "never written (--machine and --config, when given, override the snapshot's)")
DEVICES_HELP = ("the devices a plugin really reports, with their NUMA nodes, in place of the machine's devices of "
                "that resource: RESOURCE=FILE (a list of {id, numa}, as `numalign plugin --devices` takes) or "
                "FILE.json (a PodResources GetAllocatableResources answer: every plugin's devices, replacing all the "
                "machine's); repeatable, later ones win")


def add_node_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--node", metavar="SNAPSHOT", type=Path, help=NODE_HELP)
    p.add_argument("--devices", metavar="RESOURCE=FILE|FILE.json", action="append", default=[], help=DEVICES_HELP)


def resolve_node(args: argparse.Namespace, default_machine: str) -> tuple[Machine, list[str]]:
    """The machine to decide on, with notes; with --node, also fills args.kubelet_config and
    args.state_dir from the snapshot (and sets args.node_snapshot)."""
    from numalign.adapters.sysfs import load_machine

    notes: list[str] = []
    args.node_snapshot = None
    if getattr(args, "node", None) is not None:
        from numalign.adapters.snapshot import open_snapshot

        if getattr(args, "state_dir", None) is not None:
            raise InvalidInputError(
                f"--node {args.node} and --state-dir {args.state_dir}: both name the node's state; expected one; "
                "drop --state-dir (the snapshot's state files are used) or drop --node"
            )
        snap = open_snapshot(args.node)
        args.node_snapshot = snap
        notes.append(snap.describe())
        if snap.config is not None and not getattr(args, "kubelet_config", None):
            args.kubelet_config = str(snap.config)
        if snap.state_dir is not None:
            args.state_dir = snap.state_dir
        if snap.kubelet_flags:
            from numalign.cli.options.kubeletflags import FLAGS_DEST

            # The node's own flags come first, so flags given here override them (the last one wins).
            setattr(args, FLAGS_DEST, [*snap.kubelet_flags, *(getattr(args, FLAGS_DEST, None) or [])])
        machine = load_machine(args.machine) if args.machine else snap.machine()
    elif getattr(args, "recorded_machine", None) is not None and not args.machine:
        machine = args.recorded_machine  # numalign_node.json, see cli/noderecord.py
    else:
        machine = load_machine(args.machine or default_machine)
    devices: list[str] = getattr(args, "devices", None) or []
    if devices:
        machine = apply_devices_options(machine, devices)
        notes.append("devices: " + ", ".join(devices))
    return machine, notes


def config_label(args: argparse.Namespace) -> str:
    """How the kubelet config file is named in notes (a snapshot's copy by the snapshot's name)."""
    snap = getattr(args, "node_snapshot", None)
    if snap is not None and not args.kubelet_config:
        # A node without a config file runs on the kubelet's defaults (and its command-line flags).
        return f"the kubelet's defaults ({snap.path} holds no kubelet config file; add its flags, or --config)"
    if snap is not None and snap.config is not None and str(snap.config) == str(args.kubelet_config):
        return f"{snap.path}: kubelet/config.yaml"
    return str(args.kubelet_config)


def builtin_config(name: str) -> KubeletConfig:
    """A kubelet configuration shipped in numalign/data, read as a --config file is."""
    from numalign.k8s.kubeletconfig_read import config_from_yaml

    return config_from_yaml(data_file(name).read_text(encoding="utf-8"), f"built-in {name}")


def example_base(args: argparse.Namespace, machine: Machine | None = None) -> KubeletConfig | None:
    """The built-in example configuration when neither --config nor --node names one, else None. On a
    given machine its reservedSystemCPUs are that machine's first core (see example_for)."""
    if not getattr(args, "kubelet_config", None) and getattr(args, "node_snapshot", None) is None:
        config = builtin_config(EXAMPLE_CONFIG)
        return config if machine is None else example_for(config, machine)
    return None


def example_for(config: KubeletConfig, machine: Machine) -> KubeletConfig:
    """The example configuration fitted to `machine`: the file's reservedSystemCPUs ("0,64", CPU 0's
    core on the default dual-socket machine) become the threads of this machine's first core, so a
    16-CPU machine is not refused and a DGX shape does not lose an arbitrary CPU 64."""
    import dataclasses

    from numalign.k8s.cpuset import format_cpuset
    from numalign.machine.examples import first_core

    return dataclasses.replace(config, reserved_system_cpus=format_cpuset(first_core(machine)))


def node_config(args: argparse.Namespace, machine: Machine | None = None) -> KubeletConfig:
    """The kubelet configuration as `admit` builds it: --config (or the snapshot's; the kubelet's
    defaults for a snapshot without one), else the built-in example configuration; kubelet flags
    override either field by field."""
    from numalign.cli.options.kubeletflags import config_from_args

    return config_from_args(args, base=example_base(args, machine))


def state_pods(node: Node, listed: Any = None) -> dict[str, dict[str, Any]]:
    """Every pod a node's state holds, by UID, in the shape of the agent's status file: pods numalign
    admitted (numalign_pods.json) by name, pods only the kubelet's checkpoints know by the name a
    PodResources List (`listed`, as a snapshot keeps it) gives their exclusive CPUs or devices, else by UID."""
    from numalign.cluster.nrt_export import held_containers

    containers: dict[str, set[str]] = {uid: {c.name for c in p.all_containers()} for uid, p in node.pods.items()}
    for uid, ctrs in held_containers(node).items():
        containers.setdefault(uid, set()).update(ctrs)
    out: dict[str, dict[str, Any]] = {}
    for uid, names in sorted(containers.items()):
        pod = node.pods.get(uid)
        # The pod's own order (init containers first), so a picture draws an app container that reuses a
        # finished init container's CPUs over it, as the text gives them.
        order = [c.name for c in pod.all_containers() if c.name in names] if pod else []
        order += sorted(names - set(order))
        allocations = {c: node.allocation(uid, c).to_dict() for c in order}
        named = (pod.namespace, pod.name) if pod else _listed_name(listed, allocations)
        out[uid] = {
            "uid": uid,
            "namespace": named[0] if named else "-",
            "name": named[1] if named else f"uid {uid} (in the kubelet's checkpoints only)",
            "status": "admitted",
            "allocations": allocations,
            "container_order": order,  # as serve's status file keeps it (report.view.container_order)
        }
    return out


def _listed_name(listed: Any, allocations: dict[str, dict[str, Any]]) -> tuple[str, str] | None:
    """The (namespace, name) of the PodResources pod whose same-named container holds the same
    exclusive CPUs or devices as one of `allocations` (PodResources gives names, the checkpoints UIDs)."""
    from numalign.k8s.cpuset import parse_cpuset

    pods = listed.get("pod_resources") if isinstance(listed, dict) else None
    for p in pods if isinstance(pods, list) else []:
        for c in p.get("containers") or []:
            mine = allocations.get(c.get("name"))
            if mine is None:
                continue
            cpus = {int(x) for x in c.get("cpu_ids") or []}
            devices = {d for g in c.get("devices") or [] for d in g.get("device_ids") or []}
            held_cpus = set(parse_cpuset(mine["cpus"], "cpus")) if mine["exclusive_cpus"] else set()
            held_devices = {d for ids in mine["devices"].values() for d in ids}
            if (cpus and cpus == held_cpus) or (devices and devices == held_devices):
                return str(p.get("namespace", "default")), str(p.get("name"))
    return None


def snapshot_errors(args: argparse.Namespace) -> contextlib.AbstractContextManager[None]:
    """snapshot_errors_of the command line's --node snapshot and configuration."""
    snap = getattr(args, "node_snapshot", None)
    return snapshot_errors_of(snap, config_label(args) if snap is not None else "")


@contextlib.contextmanager
def snapshot_errors_of(snap: Any, label: str) -> Iterator[None]:
    """State errors of a --node snapshot name the snapshot, not its private extraction directory, and
    the configuration they were read with (`label`; a snapshot without the node's settings is the usual
    cause). They are invalid input (exit 2): the snapshot is a file the user gave, read and never written."""
    from numalign.adapters.snapshot import SnapshotError
    from numalign.errors import CheckpointError

    try:
        yield
    except SnapshotError:
        raise
    except InvalidInputError as e:
        if snap is None or str(snap.root) not in str(e):
            raise
        text = str(e).replace(f"{snap.root}/", f"{snap.path}:").replace(str(snap.root), str(snap.path))
        raise InvalidInputError(text) from None
    except CheckpointError as e:
        if snap is None:
            raise
        text = str(e).replace(f"{snap.root}/", f"{snap.path}:")
        raise SnapshotError(
            f"{text} (read from the snapshot with kubelet config {label}; if the node's kubelet "
            "runs with other settings, give them with --config or kubelet flags)"
        ) from None


# ---- --devices -------------------------------------------------------------------------------------


def load_devices_option(spec: str) -> dict[str, list[Device]]:
    """resource -> devices, from one `--devices` value: RESOURCE=FILE (the device list `numalign plugin
    --devices` takes) or FILE.json (a PodResources GetAllocatableResources answer)."""
    from numalign.adapters.devicefile import EXPECTED, devices_from_allocatable

    if is_plugin_list(spec):
        resource, _, file = spec.partition("=")
        return {resource: _plugin_list(resource, Path(file))}
    from numalign.adapters.textfiles import read_text_file

    # Bounded like every text input: a device that never ends, or a huge file, stops at the limit.
    text = read_text_file(spec, "the --devices file", EXPECTED)
    from numalign.limits import check_nesting

    # Before the parser: JSON nested thousands deep makes json.loads recurse past Python's stack.
    check_nesting(text, f"--devices {spec}", EXPECTED)
    from numalign.k8s.documents import DuplicateKeyError, duplicate_key_message, loads_json

    try:
        obj = loads_json(text)
    except DuplicateKeyError as e:
        raise InvalidInputError(duplicate_key_message(e, f"--devices {spec}", EXPECTED)) from None
    except ValueError as e:
        raise InvalidInputError(
            f"--devices {spec}: not JSON ({e}); expected {EXPECTED}; for a YAML device list name its resource: "
            f"--devices example.com/gpu={spec}"
        ) from None
    return devices_from_allocatable(obj, f"--devices {spec}")


def _plugin_list(resource: str, path: Path) -> list[Device]:
    from numalign.adapters.devicefile import EXPECTED
    from numalign.deviceplugin.inventory import load_yaml_devices
    from numalign.machine.topology import Device

    if not path.is_file():
        raise InvalidInputError(f"--devices {resource}={path}: no such file; expected {EXPECTED}")
    return [Device(p.device.id, resource, p.device.topology, None, None, None, p.device.health)
            for p in load_yaml_devices(path)]


def is_plugin_list(spec: str) -> bool:
    """RESOURCE=FILE (one resource's devices) rather than a PodResources answer (all of them)."""
    resource, sep, _ = spec.partition("=")
    return bool(sep) and "/" in resource and not Path(spec).exists()


def apply_devices_options(machine: Machine, specs: Sequence[str]) -> Machine:
    """Every `--devices` value applied in order (a later one wins for a resource both name)."""
    from numalign.adapters.devicefile import machine_with_devices

    merged: dict[str, list[Device]] = {}
    for spec in specs:
        found = load_devices_option(spec)
        if not is_plugin_list(spec):
            # A PodResources answer is every plugin's devices: the machine's others are not served.
            merged = {d.resource: [] for d in machine.devices}
        merged.update(found)
    if not merged:
        return machine
    return machine_with_devices(machine, merged, "--devices " + " ".join(specs))
