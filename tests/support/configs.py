"""The KubeletConfiguration most tests and the benchmark admit under: static CPU manager, Static memory
manager with the reservation the kubelet demands (kube + system reserved + hard eviction on NUMA 0),
and the Topology Manager policy, scope and options under test."""

from __future__ import annotations

from numalign.k8s.kubeletconfig import KubeletConfig
from numalign.k8s.kubeletconfig_read import config_from_yaml

STATIC_NODE_YAML = """
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cpuManagerPolicy: static
reservedSystemCPUs: "{reserved}"
memoryManagerPolicy: Static
topologyManagerPolicy: {policy}
topologyManagerScope: {scope}
topologyManagerPolicyOptions: {{{options}}}
kubeReserved: {{memory: 1Gi}}
systemReserved: {{memory: 1Gi}}
evictionHard: {{memory.available: 100Mi}}
reservedMemory:
- numaNode: 0
  limits: {{memory: 2148Mi}}
"""


def static_node_yaml(
    policy: str = "single-numa-node", scope: str = "container", options: str = "", reserved: str = "0"
) -> str:
    """`options` is the inside of a flow mapping, e.g. '"max-allowable-numa-nodes": "64"'."""
    return STATIC_NODE_YAML.format(policy=policy, scope=scope, options=options, reserved=reserved)


def static_node_config(
    policy: str = "single-numa-node", scope: str = "container", options: str = "", reserved: str = "0"
) -> KubeletConfig:
    return config_from_yaml(static_node_yaml(policy, scope, options, reserved))
