"""KubeletConfiguration file, kubelet flags, validation messages, node-allocatable reservation."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from numalign.cli.options.kubeletflags import add_kubelet_flags, config_from_args
from numalign.errors import ConfigError, InvalidInputError
from numalign.k8s.cpuset import parse_go_cpuset
from numalign.k8s.kubeletconfig import (
    DEFAULT_EVICTION_HARD,
    KubeletConfig,
    KubeletConfigValidationError,
    ReservedMemory,
    aggregate_errors,
)
from numalign.k8s.kubeletconfig_flags import apply_flags
from numalign.k8s.kubeletconfig_read import config_from_yaml, parse_go_bool, parse_go_duration
from numalign.k8s.quantity import Quantity

Q = Quantity.parse
HEADER = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"

FULL = HEADER + """
topologyManagerPolicy: single-numa-node
topologyManagerScope: pod
topologyManagerPolicyOptions: {prefer-closest-numa-nodes: "true", max-allowable-numa-nodes: "16"}
cpuManagerPolicy: static
cpuManagerPolicyOptions: {full-pcpus-only: "true"}
cpuManagerReconcilePeriod: 1m30s
memoryManagerPolicy: Static
reservedSystemCPUs: "0-1,8"
reservedMemory:
- numaNode: 0
  limits: {memory: 1100Mi, hugepages-1Gi: 1Gi}
- numaNode: 1
  limits: {memory: 1Gi}
kubeReserved: {cpu: "1", memory: 1Gi, pid: "1000"}
systemReserved: {memory: 500Mi, ephemeral-storage: 1Gi}
evictionHard: {memory.available: 100Mi, nodefs.available: 10%}
enforceNodeAllocatable: [pods]
featureGates: {CPUManagerPolicyAlphaOptions: true}
address: 0.0.0.0
authentication: {anonymous: {enabled: false}}
"""


def test_defaults() -> None:
    c = KubeletConfig()
    assert (c.topology_manager_policy, c.topology_manager_scope) == ("none", "container")
    assert (c.cpu_manager_policy, c.memory_manager_policy) == ("none", "None")
    assert c.cpu_manager_reconcile_period == 10.0
    assert c.eviction_hard == DEFAULT_EVICTION_HARD
    assert c.enforce_node_allocatable == ("pods",)
    assert c.reserved_memory == () and c.reserved_system_cpus == ""
    c.validate()
    assert config_from_yaml(HEADER) == c


def test_full_file() -> None:
    c = config_from_yaml(FULL, "kubelet.yaml")
    assert c.topology_manager_policy == "single-numa-node" and c.topology_manager_scope == "pod"
    assert c.topology_manager_policy_options == {"prefer-closest-numa-nodes": "true", "max-allowable-numa-nodes": "16"}
    assert c.cpu_manager_policy_options == {"full-pcpus-only": "true"}
    assert c.cpu_manager_reconcile_period == 90.0
    assert c.reserved_cpus() == frozenset({0, 1, 8})
    assert c.reserved_memory == (
        ReservedMemory(0, {"memory": Q("1100Mi"), "hugepages-1Gi": Q("1Gi")}),
        ReservedMemory(1, {"memory": Q("1Gi")}),
    )
    numa_node, limits = c.reserved_memory[1]  # a plain (numa_node, limits) pair too
    assert numa_node == 1 and limits == {"memory": Q("1Gi")}
    assert c.kube_reserved == {"cpu": Q("1"), "memory": Q("1Gi"), "pid": Q("1000")}
    assert c.feature_gates == {"CPUManagerPolicyAlphaOptions": True}
    c.validate()
    # kube 1Gi + system 500Mi + eviction 100Mi; pid is never a node resource
    assert c.node_allocatable_reservation() == {"cpu": Q("1"), "memory": Q("1624Mi")}


def test_reservation_with_capacity_and_percentages() -> None:
    c = KubeletConfig(
        kube_reserved={"cpu": Q("500m")},
        system_reserved={"ephemeral-storage": Q("1Gi")},
        eviction_hard={"memory.available": "5%", "nodefs.available": "10%"},
    )
    capacity = {"cpu": Q("8"), "memory": Q("16Gi"), "ephemeral-storage": Q("100Gi"), "pods": Q("110"),
                "hugepages-2Mi": Q("0")}
    got = c.node_allocatable_reservation(capacity)
    # int64(float64(capacity) * float64(float32(5)/100)) as the kubelet computes it
    assert got["memory"] == Quantity.from_int(int(float(16 * 1024**3) * 0.05000000074505806))
    assert got["cpu"] == Q("500m")
    assert got["ephemeral-storage"] == Q("1Gi") + Quantity.from_int(int(float(100 * 1024**3) * 0.10000000149011612))
    assert set(got) == {"cpu", "memory", "ephemeral-storage"}
    with pytest.raises(ConfigError, match="percentage threshold needs the node's memory capacity"):
        c.node_allocatable_reservation()


def test_disabled_eviction_thresholds_reserve_nothing() -> None:
    c = KubeletConfig(eviction_hard={"memory.available": "0%"})
    assert c.node_allocatable_reservation() == {}
    assert KubeletConfig(eviction_hard={}).node_allocatable_reservation() == {}


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("kubeReserved: {cpu: 1}", 'kubeReserved.cpu: expected a string, got int 1 (quote it: "1"'),
        ("topologyManagerPolicy: 3", "topologyManagerPolicy: expected a string"),
        ("featureGates: {A: \"yes\"}", "featureGates.A: expected true or false"),
        ("enforceNodeAllocatable: pods", "enforceNodeAllocatable: expected a list of strings"),
        ("cpuManagerReconcilePeriod: 10", "cpuManagerReconcilePeriod: expected a string"),
        ("cpuManagerReconcilePeriod: 10x", 'time: invalid duration "10x"'),
        ("kubeReserved: {gpu: \"1\"}", 'cannot reserve "gpu" resource'),
        ("kubeReserved: {memory: \"-1Gi\"}", 'resource quantity for "memory" cannot be negative'),
        ("systemReserved: {memory: \"1 Gi\"}", 'failed to parse quantity "1 Gi" for "memory" resource'),
        ("reservedMemory: [{numaNode: x, limits: {memory: 1Gi}}]", "reservedMemory[0].numaNode"),
        ("reservedMemory: [{numaNode: 0, limits: {memory: 1GB}}]", "reservedMemory[0].limits.memory: invalid quantity"),
        ("evictionHard: {memory.available: 1GB}", "evictionHard"),
        ("evictionHard: {memory.free: 1Gi}", "unsupported eviction signal memory.free"),
        ("evictionHard: {memory.available: \"0\"}", "eviction threshold memory.available must be positive: 0"),
        ("evictionHard: {nodefs.available: 101%}", "must be <= 100%: 101%"),
    ],
)
def test_file_type_errors(body: str, expected: str) -> None:
    with pytest.raises(ConfigError) as info:
        config_from_yaml(HEADER + body + "\n", "k.yaml")
    assert str(info.value).startswith("k.yaml")
    assert expected in str(info.value)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("kind: KubeletConfiguration\n", "expected apiVersion: kubelet.config.k8s.io/v1beta1"),
        ("apiVersion: v1\nkind: Pod\n", "not a KubeletConfiguration"),
        ("- a\n", "expected one KubeletConfiguration mapping"),
        ("a: [\n", "not valid YAML"),
        (HEADER + "---\n" + HEADER, "got 2 document(s)"),
    ],
)
def test_not_a_config(text: str, expected: str) -> None:
    with pytest.raises(ConfigError, match=None) as info:
        config_from_yaml(text, "k.yaml")
    assert expected in str(info.value)


def test_json_config_and_null_keeps_default() -> None:
    c = config_from_yaml(
        '{"apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration", '
        '"topologyManagerPolicy": "restricted", "evictionHard": null}'
    )
    assert c.topology_manager_policy == "restricted"
    assert c.eviction_hard == DEFAULT_EVICTION_HARD


# ---- flags ----------------------------------------------------------------------------------------------


def test_flags_override_the_file() -> None:
    base = config_from_yaml(FULL)
    c = apply_flags(base, [
        ("--topology-manager-policy", "restricted"),
        ("--topology-manager-scope", "container"),
        ("--topology-manager-policy-options", "prefer-closest-numa-nodes=false"),
        ("--topology-manager-policy-options", "max-allowable-numa-nodes=9"),
        ("--cpu-manager-policy", "none"),
        ("--cpu-manager-reconcile-period", "500ms"),
        ("--memory-manager-policy", "None"),
        ("--reserved-cpus", "2-3"),
        ("--reserved-memory", "0:memory=1Gi,hugepages-1Gi=2Gi;1:memory=1Gi"),
        ("--reserved-memory", "2:memory=512Mi"),
        ("--kube-reserved", "cpu=2, memory=2Gi"),
        ("--kube-reserved", "ephemeral-storage=5Gi"),
        ("--system-reserved", "cpu=500m"),
        ("--eviction-hard", "memory.available<200Mi,nodefs.available<5%"),
        ("--enforce-node-allocatable", "pods,system-reserved"),
        ("--system-reserved-cgroup", "/system.slice"),
        ("--enforce-node-allocatable", "kube-reserved"),
        ("--feature-gates", "A=true,CPUManagerPolicyAlphaOptions=false"),
        ("cgroups-per-qos", "true"),
    ])
    assert c.topology_manager_policy == "restricted" and c.topology_manager_scope == "container"
    # the first use of a map flag replaces the file's map, later uses add to it
    assert c.topology_manager_policy_options == {"prefer-closest-numa-nodes": "false", "max-allowable-numa-nodes": "9"}
    assert c.cpu_manager_policy_options == {"full-pcpus-only": "true"}  # untouched by flags
    assert c.cpu_manager_reconcile_period == 0.5
    assert c.reserved_system_cpus == "2-3"
    assert c.reserved_memory == (
        ReservedMemory(0, {"memory": Q("1Gi"), "hugepages-1Gi": Q("2Gi")}),
        ReservedMemory(1, {"memory": Q("1Gi")}),
        ReservedMemory(2, {"memory": Q("512Mi")}),
    )
    assert c.kube_reserved == {"cpu": Q("2"), "memory": Q("2Gi"), "ephemeral-storage": Q("5Gi")}
    assert c.system_reserved == {"cpu": Q("500m")}
    assert c.eviction_hard == {"memory.available": "200Mi", "nodefs.available": "5%"}
    assert c.enforce_node_allocatable == ("pods", "system-reserved", "kube-reserved")
    # feature gates merge: flags win per gate, the file's other gates stay
    assert c.feature_gates == {"A": True, "CPUManagerPolicyAlphaOptions": False}
    assert base.topology_manager_policy == "single-numa-node"  # immutable
    # reservedSystemCPUs cannot go with reserved cgroups, and kube-reserved needs its cgroup
    assert [e.split(":")[1].split("(")[0].strip() for e in c.validation_errors()] == [
        "kubeReservedCgroup", "can't use reservedSystemCPUs"
    ]
    assert c.node_allocatable_reservation() == {"cpu": Q("2500m"), "memory": Q("2Gi") + Q("200Mi")}


@pytest.mark.parametrize(
    ("flag", "value", "expected"),
    [
        ("--kube-reserved", "cpu", "malformed pair, expect string=string"),
        ("--kube-reserved", "gpu=1", 'cannot reserve "gpu" resource'),
        ("--eviction-hard", "memory.available=100Mi", 'the kubelet form is signal<quantity'),
        ("--eviction-hard", "memory.available<-1", "must be positive"),
        ("--feature-gates", "A=maybe", "invalid value of A: maybe"),
        ("--reserved-memory", "0-memory=1Gi", "the reserved memory has incorrect format"),
        ("--reserved-memory", "x:memory=1Gi", "failed to convert the NUMA node ID"),
        ("--reserved-memory", "0:cpu=1", 'memory type conversion error, unknown type: "cpu"'),
        ("--reserved-memory", "0:memory=1GB", "failed to parse the quantatity"),
        ("--reserved-memory", "0:memory", "the reserved limit has incorrect value"),
        ("--topology-manager-policy-options", "prefer-closest-numa-nodes", "malformed pair"),
        ("--topology-manager-policy-options", "a=true,b=1", "one key=value per use"),
        ("--cpu-manager-reconcile-period", "10", "invalid duration"),
        ("--cgroups-per-qos", "yes", "ParseBool"),
        ("--max-pods", "ten", "strconv.ParseInt: parsing \"ten\": invalid syntax"),
        ("--pod-max-pids", "10", "unknown kubelet flag --pod-max-pids"),
    ],
)
def test_flag_errors(flag: str, value: str, expected: str) -> None:
    with pytest.raises(ConfigError) as info:
        apply_flags(KubeletConfig(), [(flag, value)])
    assert expected in str(info.value)


def test_empty_reserved_memory_flag_clears_and_enforce_none() -> None:
    c = KubeletConfig(reserved_memory=(ReservedMemory(0, {"memory": Q("1Gi")}),))
    assert apply_flags(c, [("--reserved-memory", "")]).reserved_memory == ()
    assert apply_flags(c, [("--enforce-node-allocatable", "")]).enforce_node_allocatable == ()


# ---- validation -----------------------------------------------------------------------------------------


def test_single_error_message_is_kubelet_text() -> None:
    with pytest.raises(KubeletConfigValidationError) as info:
        KubeletConfig(topology_manager_policy="numa").validate()
    assert str(info.value) == (
        'invalid configuration: topologyManagerPolicy (--topology-manager-policy) "numa" must be one of: '
        '["none" "best-effort" "restricted" "single-numa-node"]'
    )
    assert isinstance(info.value, ConfigError) and isinstance(info.value, InvalidInputError)


def test_aggregated_messages_in_upstream_order() -> None:
    c = KubeletConfig(
        topology_manager_policy="x",
        topology_manager_scope="node",
        reserved_system_cpus="3-1",
        kube_reserved_cgroup="/kube",
        reserved_memory=(
            ReservedMemory(0, {"memory": Q("0"), "cpu": Q("1")}),
            ReservedMemory(0, {"memory": Q("1Gi")}),
        ),
    )
    errors = c.validation_errors()
    assert errors == [
        'invalid configuration: topologyManagerPolicy (--topology-manager-policy) "x" must be one of: '
        '["none" "best-effort" "restricted" "single-numa-node"]',
        'invalid configuration: topologyManagerScope (--topology-manager-scope) "node" must be one of: '
        '"container", or "pod"',
        "invalid configuration: can't use reservedSystemCPUs (--reserved-cpus) with systemReservedCgroup "
        "(--system-reserved-cgroup) or kubeReservedCgroup (--kube-reserved-cgroup)",
        'invalid configuration: unable to parse reservedSystemCPUs (--reserved-cpus) 3-1, error: invalid range "3-1" '
        "(3 > 1)",
        'invalid configuration: reserved memory may not be zero for NUMA node 0 and resource "memory"',
        'invalid configuration: the limit type "cpu" for NUMA node 0 is not supported, only '
        "[memory hugepages-<HugePageSize>] is accepted",
        'invalid configuration: the reserved memory has a duplicate value for NUMA node 0 and resource "memory"',
    ]
    with pytest.raises(KubeletConfigValidationError) as info:
        c.validate()
    assert info.value.messages == tuple(errors)
    assert str(info.value) == "[" + ", ".join(errors) + "]"


@pytest.mark.parametrize(
    ("enforce", "kwargs", "expected"),
    [
        (("pods", "system-reserved"), {}, "systemReservedCgroup (--system-reserved-cgroup) must be specified when "
         '"system-reserved" or "system-reserved-compressible" included in enforceNodeAllocatable'),
        (("kube-reserved",), {}, "kubeReservedCgroup (--kube-reserved-cgroup) must be specified"),
        (("none", "pods"), {}, 'may not contain additional enforcements when "none" is specified'),
        (("pods", "pods"), {}, 'duplicated enforcements "pods"'),
        (("pod",), {}, 'option "pod" specified for enforceNodeAllocatable (--enforce-node-allocatable). '
         'Valid options are "pods", "system-reserved", "system-reserved-compressible", "kube-reserved", '
         '"kube-reserved-compressible" or "none"'),
        (("kube-reserved", "kube-reserved-compressible"), {"kube_reserved_cgroup": "/k"},
         'both "kube-reserved" and "kube-reserved-compressible" cannot be specified together'),
        (("pods",), {"cgroups_per_qos": False}, 'cgroupsPerQOS (--cgroups-per-qos) must be set to true when "pods"'),
    ],
)
def test_enforce_node_allocatable(enforce: tuple[str, ...], kwargs: dict[str, object], expected: str) -> None:
    errors = KubeletConfig(enforce_node_allocatable=enforce, **kwargs).validation_errors()  # type: ignore[arg-type]
    assert any(expected in e for e in errors), errors


def test_valid_enforcements() -> None:
    KubeletConfig(enforce_node_allocatable=("none",), cgroups_per_qos=False).validate()
    KubeletConfig(
        enforce_node_allocatable=("pods", "system-reserved", "kube-reserved"),
        system_reserved_cgroup="/s", kube_reserved_cgroup="/k",
    ).validate()


def test_helpers() -> None:
    assert aggregate_errors(["a", "a"]) == "a"
    assert aggregate_errors(["a", "b", "a"]) == "[a, b]"
    assert parse_go_cpuset("") == frozenset()
    assert parse_go_cpuset("0-2,5,7-7") == frozenset({0, 1, 2, 5, 7})
    for bad in ("0-", " 1", "a", "1,,2", "1-2-3"):
        with pytest.raises(ValueError):
            parse_go_cpuset(bad)
    with pytest.raises(ValueError, match="expected ids from 0 to 8191"):
        parse_go_cpuset("0-999999999")  # refused at once, not built (Go would run out of memory)
    assert parse_go_duration("1h2m3.5s") == 3723.5
    assert parse_go_duration("0") == 0.0 and parse_go_duration("-1.5ms") == -0.0015
    assert parse_go_duration("100us") == pytest.approx(1e-4)
    for bad in ("", "1", "s", "1d", "1.s5"):
        with pytest.raises(ValueError):
            parse_go_duration(bad)
    assert parse_go_bool("T") and not parse_go_bool("0")
    with pytest.raises(ValueError):
        parse_go_bool("yes")
    with pytest.raises(ConfigError, match="unable to parse reservedSystemCPUs"):
        KubeletConfig(reserved_system_cpus="x").reserved_cpus()


# ---- argparse glue --------------------------------------------------------------------------------------


def test_argparse_helper(tmp_path: Path) -> None:
    config_file = tmp_path / "kubelet.yaml"
    config_file.write_text(FULL)
    parser = argparse.ArgumentParser()
    parser.add_argument("--other")
    add_kubelet_flags(parser)
    args = parser.parse_args([
        "--config", str(config_file),
        "--topology-manager-policy", "best-effort",
        "--topology-manager-policy-options", "prefer-closest-numa-nodes=true",
        "--topology-manager-policy-options=max-allowable-numa-nodes=12",
        "--other", "x",
    ])
    c = config_from_args(args)
    assert c.topology_manager_policy == "best-effort"
    assert c.topology_manager_policy_options == {"prefer-closest-numa-nodes": "true", "max-allowable-numa-nodes": "12"}
    assert c.cpu_manager_policy == "static"  # from the file
    assert config_from_args(parser.parse_args([])) == KubeletConfig()
    with pytest.raises(KubeletConfigValidationError, match="topologyManagerScope"):
        config_from_args(parser.parse_args(["--topology-manager-scope", "node"]))
    with pytest.raises(ConfigError, match="cannot read the kubelet config file"):
        config_from_args(parser.parse_args(["--config", str(tmp_path / "missing.yaml")]))


def test_split_kubelet_args() -> None:
    from numalign.k8s.kubeletconfig_flags import split_kubelet_args

    pairs = split_kubelet_args([
        "--topology-manager-policy=single-numa-node", "--reserved-memory", "0:memory=1Gi",
        "--cgroups-per-qos", "--feature-gates=A=true",
    ])
    assert pairs == [
        ("--topology-manager-policy", "single-numa-node"), ("--reserved-memory", "0:memory=1Gi"),
        ("--cgroups-per-qos", "true"), ("--feature-gates", "A=true"),
    ]
    c = apply_flags(KubeletConfig(), pairs)
    assert c.topology_manager_policy == "single-numa-node" and c.feature_gates == {"A": True}
    with pytest.raises(ConfigError, match="flag needs an argument"):
        split_kubelet_args(["--reserved-cpus"])
    with pytest.raises(ConfigError, match="expected --flag=value"):
        split_kubelet_args(["static"])


def test_a_performance_profile_is_refused_naming_the_file_openshift_renders_it_into() -> None:
    # An OpenShift user's first guess is the PerformanceProfile; the node's kubelet.conf holds its result.
    from numalign.k8s.kubeletconfig_forms import kubelet_config_mapping

    profile = ("apiVersion: performance.openshift.io/v2\nkind: PerformanceProfile\nmetadata: {name: p}\n"
               "spec: {cpu: {reserved: 0-1, isolated: 2-63}, numa: {topologyPolicy: single-numa-node}}\n")
    with pytest.raises(ConfigError) as info:
        kubelet_config_mapping(profile, "pp.yaml", lambda _: None)
    message = str(info.value)
    assert message.startswith("pp.yaml: not a KubeletConfiguration: got apiVersion 'performance.openshift.io/v2', "
                              "kind 'PerformanceProfile'")
    assert "on OpenShift /etc/kubernetes/kubelet.conf, which KubeletConfigs and PerformanceProfiles are rendered" \
           in message and "\n" not in message
