"""cluster.yaml pools: one rule for the kubelet configuration, and the pool settings the tables show."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from numalign.cluster.capacity import capacity
from numalign.cluster.model import example_config, load_cluster, pool_settings
from numalign.k8s.manifest import pods_from_yaml
from numalign.k8s.version import DEFAULT
from numalign.machine.examples import example

TRAIN = pods_from_yaml("""
apiVersion: v1
kind: Pod
metadata: {name: train, namespace: ml}
spec:
  containers:
  - name: c
    resources: {limits: {cpu: "8", memory: 16Gi}}
""")[0]


def _cluster(tmp_path: Path, pools: str) -> Path:
    path = tmp_path / "cluster.yaml"
    path.write_text(f"kind: Cluster\nname: c\npools:\n{pools}", encoding="utf-8")
    return path


def test_an_inline_kubelet_block_overrides_the_example_configuration_field_by_field(tmp_path: Path) -> None:
    cluster = load_cluster(_cluster(tmp_path, """
- {name: bare, count: 2, machine: epyc-nps4}
- {name: same, count: 2, machine: epyc-nps4, kubelet: {topologyManagerScope: container}}
- name: option
  count: 2
  machine: epyc-nps4
  kubelet: {topologyManagerPolicyOptions: {max-allowable-numa-nodes: "8"}}
- {name: pod-scope, count: 2, machine: epyc-nps4, kubelet: {topologyManagerScope: pod}}
"""))
    bare, same, option, pod_scope = (p.config for p in cluster.pools)
    # The example fitted to the pool's machine (its first core reserved, as admit reserves it).
    fitted = example_config(example("epyc-nps4"))
    assert bare == fitted == same
    # One field given, the rest still the example's: the static CPU manager with its reserved CPUs.
    assert option == dataclasses.replace(fitted, topology_manager_policy_options={"max-allowable-numa-nodes": "8"})
    assert pod_scope == dataclasses.replace(fitted, topology_manager_scope="pod")
    assert pod_scope.cpu_manager_policy == "static" and pod_scope.reserved_system_cpus == "0,128"
    # So capacity does not change when a no-op field is written out.
    counts = {p.pool: p.exact for p in capacity(cluster, TRAIN)}
    assert counts["bare"] == counts["same"] == counts["option"] > 0


def test_a_kubelet_config_file_starts_from_the_kubelets_defaults(tmp_path: Path) -> None:
    (tmp_path / "kubelet.yaml").write_text("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"
                                           "topologyManagerPolicy: restricted\n", encoding="utf-8")
    cluster = load_cluster(_cluster(tmp_path, """
- {name: file, machine: dual-socket, kubeletConfig: kubelet.yaml}
- {name: file-and-inline, machine: dual-socket, kubeletConfig: kubelet.yaml, kubelet: {cpuManagerPolicy: static}}
"""))
    file, both = (p.config for p in cluster.pools)
    assert (file.cpu_manager_policy, file.memory_manager_policy, file.topology_manager_policy) == (
        "none", "None", "restricted")
    assert (both.cpu_manager_policy, both.topology_manager_policy) == ("static", "restricted")
    assert pool_settings(cluster.pools[1]) == {
        "name": "file-and-inline", "nodes": 1, "machine": "dual-socket", "kubeletVersion": str(DEFAULT),
        "topologyManagerPolicy": "restricted",
        "topologyManagerScope": "container", "topologyManagerPolicyOptions": {}, "cpuManagerPolicy": "static",
        "cpuManagerPolicyOptions": {}, "reservedSystemCPUs": "", "memoryManagerPolicy": "None", "maxPods": 110}
