"""The cluster: node pools of identical nodes (machine, kubelet configuration, devices, labels, taints).

`cluster.yaml` (docs/cluster-format.md):

    kind: Cluster
    name: my-cluster
    pools:
    - name: gpu
      count: 20
      machine: dual-socket            # anything --machine takes: built-in name, machine file, sysfs dump
      kubeletConfig: kubelet.yaml     # optional KubeletConfiguration file (relative to cluster.yaml)
      kubelet: {topologyManagerPolicy: restricted}   # optional inline fields, over the file
      devices:                        # optional; replaces the machine's devices of that resource
        nvidia.com/gpu: {0: 2, 1: 2, 2: 2, 3: 2}     # per NUMA node: how many
        example.com/nic: nics.yaml    # or a devices file as `numalign plugin --devices` takes
      maxPods: 110
      kubeletVersion: "1.36"          # optional: X.Y or X.Y.Z the pool's kubelets run (default: numalign's)
      labels: {pool: gpu}
      taints: [{key: dedicated, value: gpu, effect: NoSchedule}]

A pool's kubelet configuration is built as `numalign admit` builds a node's, one rule for every pool:
the `kubeletConfig` file stands for the kubelet's `--config` (what it does not set takes the kubelet's
defaults); without a file, numalign's example configuration (static CPU manager reserving CPUs 0 and
64, Static memory manager, single-numa-node) stands in for it; the inline `kubelet:` fields then
replace the base's fields one by one, as kubelet flags override the config file. So adding one inline
field to a pool never swaps its base.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from numalign import metrics as m
from numalign.cluster.nrt import NodeResourceTopology
from numalign.errors import ConfigError, InvalidInputError
from numalign.k8s.cpuset import format_cpuset
from numalign.k8s.deviceplugin import Device as EndpointDevice
from numalign.k8s.kubeletconfig import KubeletConfig
from numalign.k8s.kubeletconfig_flags import apply_flags
from numalign.k8s.kubeletconfig_read import config_from_dict, config_from_yaml
from numalign.k8s.previews import NO_PREVIEWS, Previews
from numalign.kubelet.node import Node
from numalign.limits import MAX_CLUSTER_NODES, check_count, quote
from numalign.machine.examples import first_core
from numalign.machine.topology import Machine
from numalign.paths import DATA_DIR

CLUSTER_KIND: Final = "Cluster"
EXAMPLE_CONFIG_FILE: Final = DATA_DIR / "example-kubelet-config.yaml"
TAINT_EFFECTS: Final = ("NoSchedule", "PreferNoSchedule", "NoExecute")


@dataclass(frozen=True)
class Taint:
    key: str
    value: str = ""
    effect: str = "NoSchedule"


# Metrics nobody reads: every update dropped (metrics.UnreadMetrics, compiled with Metrics).
UNREAD_METRICS: Final = m.UnreadMetrics()


@dataclass(frozen=True)
class NodePool:
    name: str
    count: int
    machine: Machine
    config: KubeletConfig
    max_pods: int = 110
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    names: tuple[str, ...] | None = None  # the nodes' own names (a cluster dump); default pool-0, pool-1, ...
    # The kubelet version the pool's nodes run (kubelet/versions.py) and the previews they decide with
    # (kubelet/previews); None: numalign's default version.
    kubelet_version: Any = None
    previews: Previews = NO_PREVIEWS
    # ResourceSlices every node of the pool publishes besides its machine's DRA devices (cluster/dra_pools.py).
    dra_slices: tuple[Any, ...] = ()
    # Settings of `config` whose values a cluster dump could not give and were reconstructed
    # (KubeletConfiguration field names: "reservedSystemCPUs"); tables mark them.
    reconstructed: tuple[str, ...] = ()

    def new_node(self) -> Node:
        """A fresh kubelet of this pool (machine, configuration, version, previews). Its metrics, the
        admissions' and the probes', count into a sink: a simulation reads no node's metrics, and
        counting them was a tenth of a large run's admission CPU."""
        node = Node(self.machine, self.config, kubelet_version=self.version, previews=self.previews,
                    metrics=UNREAD_METRICS)
        node.probe_metrics = UNREAD_METRICS
        return node

    @property
    def version(self) -> Any:
        from numalign.k8s.version import DEFAULT

        return DEFAULT if self.kubelet_version is None else self.kubelet_version

    def node_names(self) -> list[str]:
        if self.names is not None:
            return list(self.names)
        return [f"{self.name}-{i}" for i in range(self.count)]


def pool_settings(pool: NodePool) -> dict[str, Any]:
    """What a pool's nodes run with, as the simulate and capacity tables show it (KubeletConfiguration
    field names)."""
    c = pool.config
    return {
        "name": pool.name,
        "nodes": pool.count,
        "machine": pool.machine.name,
        "kubeletVersion": str(pool.version),
        "topologyManagerPolicy": c.topology_manager_policy,
        "topologyManagerScope": c.topology_manager_scope,
        "topologyManagerPolicyOptions": dict(sorted(c.topology_manager_policy_options.items())),
        "cpuManagerPolicy": c.cpu_manager_policy,
        "cpuManagerPolicyOptions": dict(sorted(c.cpu_manager_policy_options.items())),
        "reservedSystemCPUs": c.reserved_system_cpus,
        "memoryManagerPolicy": c.memory_manager_policy,
        "maxPods": pool.max_pods,
        **({"reconstructed": list(pool.reconstructed)} if pool.reconstructed else {}),
    }


def pool_document(pool: NodePool) -> dict[str, Any]:
    """A pool in the `simulate` and `capacity` documents: what it is, then its kubelets' settings nested
    under kubeletConfig (KubeletConfiguration field names, as admit's document has them)."""
    s = pool_settings(pool)
    config = {k: s[k] for k in ("topologyManagerPolicy", "topologyManagerScope", "topologyManagerPolicyOptions",
                                "cpuManagerPolicy", "cpuManagerPolicyOptions", "reservedSystemCPUs",
                                "memoryManagerPolicy", "maxPods")}
    return {"name": s["name"], "nodes": s["nodes"], "machine": s["machine"], "kubeletVersion": s["kubeletVersion"],
            "kubeletConfig": config, **({"reconstructed": s["reconstructed"]} if "reconstructed" in s else {})}


def pool_documents(pools: Sequence[NodePool]) -> list[dict[str, Any]]:
    """The pools of a document, a pool like an earlier one folded: a cluster dump splits nodes that differ
    only in labels or taints (which the document does not show) into pools of their own, so 500 nodes
    can be 500 pools saying the same thing. Such a pool is `{name, nodes, sameAs}`, the first of its
    kind counting them in `identicalPools`, as admit folds identical rejections."""
    import json

    out: list[dict[str, Any]] = []
    first: dict[str, dict[str, Any]] = {}
    for pool in pools:
        doc = pool_document(pool)
        key = json.dumps({k: v for k, v in doc.items() if k not in ("name", "nodes")}, sort_keys=True)
        earlier = first.get(key)
        if earlier is None:
            first[key] = doc
            out.append(doc)
            continue
        earlier["identicalPools"] = earlier.get("identicalPools", 0) + 1
        out.append({"name": doc["name"], "nodes": doc["nodes"], "sameAs": earlier["name"]})
    return out


@dataclass(frozen=True)
class Cluster:
    name: str
    pools: tuple[NodePool, ...]
    # The NodeResourceTopology objects a cluster dump was built from (cluster/dumpcheck.py compares them).
    observed: tuple[NodeResourceTopology, ...] = ()
    # What the dumps could not give (reconstructed or assumed), one line per fact: said on stderr.
    notes: tuple[str, ...] = ()

    @property
    def node_count(self) -> int:
        return sum(p.count for p in self.pools)

    def versions(self) -> dict[str, int]:
        """{kubelet version: nodes}, newest first: one entry unless the cluster is mid-upgrade."""
        out: dict[str, int] = {}
        for p in sorted(self.pools, key=lambda p: p.version, reverse=True):
            out[str(p.version)] = out.get(str(p.version), 0) + p.count
        return out

    def with_kubelet_version(self, version: Any, previews: Previews | None = None) -> Cluster:
        """Every pool at one kubelet version (None: each keeps its own) and, when given, these previews
        (a sweep's version and preview axes)."""
        if version is None and previews is None:
            return self
        pools = tuple(dataclasses.replace(p, kubelet_version=p.kubelet_version if version is None else version,
                                          previews=p.previews if previews is None else previews)
                      for p in self.pools)
        return dataclasses.replace(self, pools=pools)

    def with_kubelet_flags(self, flags: list[tuple[str, str]]) -> Cluster:
        """Every pool's configuration with kubelet flags applied (a sweep's policy axes)."""
        if not flags:
            return self
        pools = []
        for p in self.pools:
            config = apply_flags(p.config, flags)
            config.validate()
            pools.append(dataclasses.replace(p, config=config))
        return dataclasses.replace(self, pools=tuple(pools))


def example_config(machine: Machine | None = None) -> KubeletConfig:
    """The built-in example configuration; on a given machine its reservedSystemCPUs are that machine's
    first core (machine.examples.first_core), as `numalign admit` fits it."""
    config = config_from_yaml(EXAMPLE_CONFIG_FILE.read_text(encoding="utf-8"), "built-in example-kubelet-config")
    if machine is None:
        return config
    return dataclasses.replace(config, reserved_system_cpus=format_cpuset(first_core(machine)))


def devices_per_numa(resource: str, per_numa: Mapping[int, int], prefix: str) -> list[EndpointDevice]:
    out = []
    for numa, count in sorted(per_numa.items()):
        for i in range(count):
            out.append(EndpointDevice(f"{prefix}-n{numa}-{i}", "Healthy", (numa,)))
    return out


def with_devices(machine: Machine, devices: Mapping[str, list[EndpointDevice]]) -> Machine:
    """The machine with these resources' devices replaced."""
    from numalign.machine.topology import Device

    kept = tuple(d for d in machine.devices if d.resource not in devices)
    added = tuple(Device(d.id, resource, d.topology, health=d.health)
                  for resource, devs in sorted(devices.items()) for d in devs)
    return dataclasses.replace(machine, devices=kept + added)


def load_cluster(path: Path) -> Cluster:
    from numalign.adapters.textfiles import load_document

    obj = load_document(path, "the cluster file", "a cluster.yaml (docs/cluster-format.md)")
    return cluster_from_dict(obj, path)


def cluster_from_dict(obj: Any, path: Path) -> Cluster:
    if isinstance(obj, Mapping) and str(obj.get("kind", "")).endswith("List"):
        raise InvalidInputError(f"{path}: a Kubernetes {obj.get('kind')}, not a cluster.yaml; expected kind: Cluster "
                                "with pools (docs/cluster-format.md)")
    if not isinstance(obj, Mapping) or obj.get("kind", CLUSTER_KIND) != CLUSTER_KIND:
        got = f"kind {obj.get('kind')!r}" if isinstance(obj, Mapping) else type(obj).__name__
        raise InvalidInputError(f"{path}: expected kind: Cluster with a pools list, got {got}; "
                                "see docs/cluster-format.md")
    pools_raw = obj.get("pools")
    if not isinstance(pools_raw, list) or not pools_raw:
        raise InvalidInputError(f"{path}: pools: expected a non-empty list of node pools, got {pools_raw!r}; "
                                "add at least one pool with name, count and machine")
    pools = [_pool(p, path, f"pools[{i}]") for i, p in enumerate(pools_raw)]
    check_count(sum(p.count for p in pools), MAX_CLUSTER_NODES, f"{path}: pools", "nodes in all",
                "lower the pools' count (a simulation of a few hundred nodes answers the same questions)")
    names = [p.name for p in pools]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise InvalidInputError(f"{path}: pools: duplicate pool name {dupes[0]!r}; expected unique names; rename one")
    return Cluster(str(obj.get("name") or path.stem), tuple(pools))


def _pool(obj: Any, path: Path, where: str) -> NodePool:
    from numalign.adapters.sysfs import load_machine

    if not isinstance(obj, Mapping):
        raise InvalidInputError(f"{path}: {where}: expected a mapping with name, count and machine, got {obj!r}")
    from numalign.cluster.dra_pools import FIELDS as DRA_FIELDS
    from numalign.cluster.dra_pools import pool_dra

    known = {"name", "count", "machine", "kubeletConfig", "kubelet", "kubeletVersion", "devices", "maxPods", "labels",
             "taints", *DRA_FIELDS}
    unknown = sorted(set(obj) - known)
    if unknown:
        raise InvalidInputError(f"{path}: {where}.{unknown[0]}: unknown field; expected one of "
                                f"{', '.join(sorted(known))}")
    name = obj.get("name")
    if not isinstance(name, str) or not name:
        raise InvalidInputError(f"{path}: {where}.name: expected a non-empty string; name the pool")
    where = f"{where} ({name})"
    count = obj.get("count", 1)
    if not isinstance(count, int) or isinstance(count, bool) or count < 1:
        raise InvalidInputError(f"{path}: {where}.count: expected a whole number >= 1, got {quote(count)}")
    # Checked before any node is built: a count of 10^9 would otherwise take all memory.
    check_count(count, MAX_CLUSTER_NODES, f"{path}: {where}.count", "nodes",
                "lower it (a simulation of a few hundred nodes answers the same questions)")
    spec = obj.get("machine", "dual-socket")
    if not isinstance(spec, str):
        raise InvalidInputError(f"{path}: {where}.machine: expected a built-in name or a file, got {spec!r}")
    machine_spec = spec if not (path.parent / spec).exists() else str(path.parent / spec)
    try:
        machine = load_machine(machine_spec)
    except InvalidInputError as e:
        raise InvalidInputError(f"{path}: {where}.machine: {e}") from None
    devices = obj.get("devices") or {}
    if not isinstance(devices, Mapping):
        raise InvalidInputError(f"{path}: {where}.devices: expected resource: {{numa: count}} or resource: FILE")
    replaced = {str(r): _devices(str(r), v, path, f"{where}.devices.{r}", machine, name) for r, v in devices.items()}
    if replaced:
        machine = with_devices(machine, replaced)
    machine, dra_slices = pool_dra(obj, path, where, machine)
    config = _config(obj, path, where, machine)
    try:
        config.validate()
    except InvalidInputError as e:
        raise InvalidInputError(f"{path}: {where}: kubelet configuration: {e}") from None
    max_pods = obj.get("maxPods", config.max_pods)
    if not isinstance(max_pods, int) or max_pods < 1:
        raise InvalidInputError(f"{path}: {where}.maxPods: expected a whole number >= 1, got {max_pods!r}")
    # One pods limit for the scheduler's view and the node's kubelet (its predicate admit handler).
    config = dataclasses.replace(config, max_pods=max_pods)
    labels = obj.get("labels") or {}
    if not isinstance(labels, Mapping):
        raise InvalidInputError(f"{path}: {where}.labels: expected a mapping of label: value")
    taints = tuple(_taint(t, path, f"{where}.taints[{i}]") for i, t in enumerate(obj.get("taints") or []))
    version = None
    if obj.get("kubeletVersion") is not None:
        from numalign.adapters.kubeletversion import resolve_noted as resolve

        raw = obj["kubeletVersion"]
        if not isinstance(raw, str):  # YAML reads 1.36 as a float: the minor 1.360 is not what was meant
            raise InvalidInputError(f"{path}: {where}.kubeletVersion: {raw!r} is not a string; expected a quoted "
                                    'version, e.g. kubeletVersion: "1.36"')
        version = resolve(raw, f"{path}: {where}.kubeletVersion")
    return NodePool(name, count, machine, config, max_pods, {str(k): str(v) for k, v in labels.items()}, taints,
                    kubelet_version=version, dra_slices=dra_slices)


def _devices(resource: str, value: Any, path: Path, where: str, machine: Machine,
             pool: str) -> list[EndpointDevice]:
    from numalign.k8s.resources import is_extended_resource_name

    if not is_extended_resource_name(resource):
        raise InvalidInputError(f"{path}: {where}: {resource!r} is not an extended resource name; expected "
                                "domain/name such as nvidia.com/gpu")
    numa_ids = set(machine.numa_ids())
    if isinstance(value, str):
        from numalign.deviceplugin.inventory import load_yaml_devices

        devs = [d.device for d in load_yaml_devices(path.parent / value)]
        bad = [d for d in devs if d.topology and not set(d.topology) <= numa_ids]
    elif isinstance(value, Mapping):
        per: dict[int, int] = {}
        for k, v in value.items():
            if not isinstance(k, int) or not isinstance(v, int) or v < 0:
                raise InvalidInputError(f"{path}: {where}: expected NUMA id: count (whole numbers), got {k!r}: {v!r}")
            per[k] = v
        missing = sorted(set(per) - numa_ids)
        if missing:
            raise InvalidInputError(f"{path}: {where}: NUMA node {missing[0]} does not exist on machine "
                                    f"{machine.name} (it has {sorted(numa_ids)}); use those ids")
        return devices_per_numa(resource, per, f"{pool}-{resource.split('/')[-1]}")
    else:
        raise InvalidInputError(f"{path}: {where}: expected {{numa: count}} or a devices file, got {value!r}")
    if bad:
        raise InvalidInputError(f"{path}: {where}: device {bad[0].id} is on NUMA nodes {list(bad[0].topology or ())}, "
                                f"not on machine {machine.name} (it has {sorted(numa_ids)})")
    return devs


def _config(obj: Mapping[str, Any], path: Path, where: str, machine: Machine) -> KubeletConfig:
    from numalign.k8s.kubeletconfig import load_yaml_mapping

    file = obj.get("kubeletConfig")
    inline = obj.get("kubelet")
    if file is None and inline is None:
        return example_config(machine)
    base: dict[str, Any] = {"apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration"}
    source = f"{path}: {where}.kubelet"
    if file is None:
        # The example configuration stands in for the missing file, as it does for `admit` without --config.
        example = EXAMPLE_CONFIG_FILE.read_text(encoding="utf-8")
        base.update(load_yaml_mapping(example, "built-in example-kubelet-config"))
        # Fitted to the pool's machine as example_config(machine) and `admit` fit it: its first core.
        base["reservedSystemCPUs"] = format_cpuset(first_core(machine))
    else:
        cfg_path = path.parent / str(file)
        if not cfg_path.is_file():
            raise InvalidInputError(f"{path}: {where}.kubeletConfig: {cfg_path} does not exist; expected a "
                                    "KubeletConfiguration file (relative to the cluster file)")
        from numalign.adapters.textfiles import read_text_file
        from numalign.k8s.kubeletconfig import EXPECTED_CONFIG

        text = read_text_file(cfg_path, "the kubelet config file", EXPECTED_CONFIG, ConfigError)
        base.update(load_yaml_mapping(text, str(cfg_path)))
        source = str(cfg_path)
    if inline is not None:
        if not isinstance(inline, Mapping):
            raise InvalidInputError(f"{path}: {where}.kubelet: expected KubeletConfiguration fields, got {inline!r}")
        base.update(inline)
    return config_from_dict(base, source)


def _taint(obj: Any, path: Path, where: str) -> Taint:
    if not isinstance(obj, Mapping) or not isinstance(obj.get("key"), str):
        raise InvalidInputError(f"{path}: {where}: expected {{key, value, effect}}, got {obj!r}")
    effect = obj.get("effect", "NoSchedule")
    if effect not in TAINT_EFFECTS:
        raise InvalidInputError(f"{path}: {where}.effect: {effect!r}; expected one of {', '.join(TAINT_EFFECTS)}")
    return Taint(obj["key"], str(obj.get("value", "")), effect)
