"""The kubelet's v1beta1 defaulting of the fields numalign reads, and the Node's own validation."""

from __future__ import annotations

import pytest

from numalign.errors import ConfigError
from numalign.k8s.kubeletconfig import KubeletConfig, KubeletConfigValidationError
from numalign.k8s.kubeletconfig_flags import apply_flags
from numalign.k8s.kubeletconfig_read import config_from_yaml
from numalign.kubelet.node import Node
from numalign.machine.examples import dual_socket

HEADER = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"


def test_empty_policy_fields_take_the_kubelet_defaults() -> None:
    # SetDefaults_KubeletConfiguration: `if obj.TopologyManagerScope == "" {...}` and so on.
    c = config_from_yaml(
        HEADER + 'topologyManagerScope: ""\ntopologyManagerPolicy: ""\ncpuManagerPolicy: ""\n'
        'memoryManagerPolicy: ""\ncpuManagerReconcilePeriod: 0s\n'
    )
    assert (c.topology_manager_scope, c.topology_manager_policy) == ("container", "none")
    assert (c.cpu_manager_policy, c.memory_manager_policy) == ("none", "None")
    assert c.cpu_manager_reconcile_period == 10.0  # zeroDuration -> 10s
    c.validate()  # the kubelet starts with these


def test_json_empty_strings_default_too() -> None:
    c = config_from_yaml(
        '{"apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration", '
        '"topologyManagerPolicy": "", "topologyManagerScope": ""}'
    )
    assert (c.topology_manager_policy, c.topology_manager_scope) == ("none", "container")


def test_fields_without_a_zero_value_default_keep_what_the_file_says() -> None:
    # reservedSystemCPUs/cgroups default to "" anyway; an explicit empty enforceNodeAllocatable list is
    # not nil, so the kubelet keeps it empty rather than defaulting it to [pods].
    c = config_from_yaml(HEADER + 'reservedSystemCPUs: ""\nkubeReservedCgroup: ""\nenforceNodeAllocatable: []\n')
    assert c.reserved_system_cpus == ""
    assert c.kube_reserved_cgroup == ""
    assert c.enforce_node_allocatable == ()


@pytest.mark.parametrize("flag", ["--topology-manager-scope", "--topology-manager-policy"])
def test_an_empty_flag_is_not_defaulted(flag: str) -> None:
    # Flags are applied after the file's defaulting, so the kubelet validates "" and refuses it.
    c = apply_flags(KubeletConfig(), [(flag, "")])
    assert any('""' in m for m in c.validation_errors())


# ---- Node: capacity for percentage thresholds, validation at construction ----------------------------


def _node(config: KubeletConfig) -> Node:
    return Node(dual_socket(), config)


def test_node_resolves_a_percentage_memory_threshold_against_the_machine_memory() -> None:
    machine = dual_socket()
    total = sum(machine.memory_by_node().values())
    # GetThresholdQuantity: int64(float64(capacity) * float64(float32(5)/100)).
    reserved = int(float(total) * 0.05000000074505806)
    config = config_from_yaml(
        HEADER + "memoryManagerPolicy: Static\nevictionHard: {memory.available: \"5%\"}\n"
        f"reservedMemory:\n- numaNode: 0\n  limits: {{memory: \"{reserved}\"}}\n"
    )
    Node(machine, config)  # the static memory manager accepts reservedMemory == the 5% reservation
    off_by_one = config_from_yaml(
        HEADER + "memoryManagerPolicy: Static\nevictionHard: {memory.available: \"5%\"}\n"
        f"reservedMemory:\n- numaNode: 0\n  limits: {{memory: \"{reserved + 1}\"}}\n"
    )
    assert reserved % 1024 == 0  # printed in BinarySI
    with pytest.raises(ConfigError, match=f'value "{reserved // 1024}Ki" determined by Node Allocatable'):
        Node(machine, off_by_one)


def test_node_validates_the_config_like_the_cli() -> None:
    config = config_from_yaml(HEADER + 'reservedSystemCPUs: "0-1"\nkubeReservedCgroup: /kube\n')
    with pytest.raises(KubeletConfigValidationError, match="can't use reservedSystemCPUs"):
        _node(config)
    with pytest.raises(KubeletConfigValidationError, match=r'topologyManagerScope .*"Pod" must be one of'):
        _node(config_from_yaml(HEADER + "topologyManagerScope: Pod\n"))


def test_a_validated_config_is_validated_once(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[KubeletConfig] = []
    original = KubeletConfig.validation_errors

    def counting(self: KubeletConfig) -> list[str]:
        calls.append(self)
        return original(self)

    monkeypatch.setattr(KubeletConfig, "validation_errors", counting)
    config = KubeletConfig(cpu_manager_policy="static", reserved_system_cpus="0")
    config.validate()
    _node(config)
    assert len(calls) == 1
    # A changed config (flags, replace) is a new value and is validated again.
    changed = apply_flags(config, [("--topology-manager-scope", "pod")])
    _node(changed)
    assert len(calls) == 2
