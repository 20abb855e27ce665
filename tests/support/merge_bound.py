"""A node whose Topology Manager merge meets numalign's work bound (core/implicit/merge.py), for the tests of
how such a pod is answered: a numa-64 machine, best-effort, whose free CPUs (2 a node) and memory sit on the
same 40 NUMA nodes (reservedSystemCPUs and reservedMemory take the rest), so a pod of 40 CPUs and 530Gi has
no preferred placement and ranking the intersections of its two hint lists is a partition problem."""

from __future__ import annotations

from numalign.machine.examples import example

SHORT_BOUND = 20_000  # tests lower MERGE_WORK_BOUND to this: the bound is met in milliseconds, as at 1,000,000
BIG = ("40", "530Gi")  # the pod over the bound (20 of the 40 NUMA nodes' CPUs, 21 nodes' memory)


def kubelet_yaml(policy: str = "best-effort", scope: str = "container") -> str:
    nodes = example("numa-64").numa_nodes
    # every CPU of nodes 0-23, 14 of the 16 of each other node
    reserved = [c for n in nodes[:24] for c in sorted(n.cpus)] + [c for n in nodes[24:] for c in sorted(n.cpus)[:14]]
    # Each NUMA node has 32Gi, 6Gi of them hugepages: reserving 26Gi on nodes 0-23 leaves them no memory.
    memory = "".join(f"- numaNode: {n.id}\n  limits: {{memory: 26624Mi}}\n" for n in nodes[:24])
    return (
        "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\ncpuManagerPolicy: static\n"
        f'reservedSystemCPUs: "{",".join(map(str, reserved))}"\nmemoryManagerPolicy: Static\n'
        f"topologyManagerPolicy: {policy}\ntopologyManagerScope: {scope}\n"
        'topologyManagerPolicyOptions: {"max-allowable-numa-nodes": "64"}\n'
        f"kubeReserved: {{memory: {24 * 26624 - 100}Mi}}\nevictionHard: {{memory.available: 100Mi}}\n"
        f"reservedMemory:\n{memory}"
    )


def pod_yaml(name: str, cpu: str, memory: str) -> str:
    return (
        f"apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, namespace: default}}\nspec:\n  containers:\n"
        f"  - name: app\n    image: app\n    resources:\n"
        f'      requests: {{cpu: "{cpu}", memory: {memory}}}\n      limits: {{cpu: "{cpu}", memory: {memory}}}\n'
    )
