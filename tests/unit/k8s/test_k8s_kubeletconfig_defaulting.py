"""The kubelet's v1beta1 defaulting of the fields numalign reads, and the Node's own validation."""

from __future__ import annotations

import pytest

from numalign.k8s.kubeletconfig import KubeletConfig

HEADER = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"


def test_empty_policy_fields_take_the_kubelet_defaults() -> None:
    # SetDefaults_KubeletConfiguration: `if obj.TopologyManagerScope == "" {...}` and so on.
    c = KubeletConfig.from_yaml(
        HEADER + 'topologyManagerScope: ""\ntopologyManagerPolicy: ""\ncpuManagerPolicy: ""\n'
        'memoryManagerPolicy: ""\ncpuManagerReconcilePeriod: 0s\n'
    )
    assert (c.topology_manager_scope, c.topology_manager_policy) == ("container", "none")
    assert (c.cpu_manager_policy, c.memory_manager_policy) == ("none", "None")
    assert c.cpu_manager_reconcile_period == 10.0  # zeroDuration -> 10s
    c.validate()  # the kubelet starts with these


def test_json_empty_strings_default_too() -> None:
    c = KubeletConfig.from_yaml(
        '{"apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration", '
        '"topologyManagerPolicy": "", "topologyManagerScope": ""}'
    )
    assert (c.topology_manager_policy, c.topology_manager_scope) == ("none", "container")


def test_fields_without_a_zero_value_default_keep_what_the_file_says() -> None:
    # reservedSystemCPUs/cgroups default to "" anyway; an explicit empty enforceNodeAllocatable list is
    # not nil, so the kubelet keeps it empty rather than defaulting it to [pods].
    c = KubeletConfig.from_yaml(HEADER + 'reservedSystemCPUs: ""\nkubeReservedCgroup: ""\nenforceNodeAllocatable: []\n')
    assert c.reserved_system_cpus == ""
    assert c.kube_reserved_cgroup == ""
    assert c.enforce_node_allocatable == ()


@pytest.mark.parametrize("flag", ["--topology-manager-scope", "--topology-manager-policy"])
def test_an_empty_flag_is_not_defaulted(flag: str) -> None:
    # Flags are applied after the file's defaulting, so the kubelet validates "" and refuses it.
    c = KubeletConfig().with_flags([(flag, "")])
    assert any('""' in m for m in c.validation_errors())
