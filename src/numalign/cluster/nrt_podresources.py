"""A running kubelet's (or `numalign serve`'s) NodeResourceTopology, read as the NFD topology-updater
reads it: PodResources v1 GetAllocatableResources and List over the unix socket, aggregated per NUMA
node by the same rule as every other path (cluster/nrt_export.py).

The topology-updater asks the API server for each pod's QoS class; the socket does not say, so it is
inferred from what the kubelet gave the pod (nrt_export.is_watchable), which subtracts the same
amounts.
"""

from __future__ import annotations

from pathlib import Path

from numalign.cluster.nrt import NodeResourceTopology
from numalign.cluster.nrt_export import ListedPod, export
from numalign.errors import DiscoveryError, InvalidInputError
from numalign.k8s.kubeletconfig import KubeletConfig
from numalign.machine.topology import Machine


def nrt_from_pod_resources(socket: Path, machine: Machine, config: KubeletConfig, name: str,
                           timeout: float = 5.0) -> NodeResourceTopology:
    import grpc

    from numalign.adapters.grpc.gen.podresources.v1 import api_pb2 as pb
    from numalign.adapters.grpc.gen.podresources.v1 import api_pb2_grpc as pb_grpc

    if not socket.is_socket():
        raise InvalidInputError(f"--pod-resources-socket {socket}: not a socket; expected the PodResources socket "
                                "of a running kubelet or `numalign serve` (default /var/lib/kubelet/pod-resources/"
                                "kubelet.sock)")
    try:
        with grpc.insecure_channel(f"unix://{socket.resolve()}") as channel:
            stub = pb_grpc.PodResourcesListerStub(channel)
            alloc = stub.GetAllocatableResources(pb.AllocatableResourcesRequest(), timeout=timeout)
            listed = stub.List(pb.ListPodResourcesRequest(), timeout=timeout)
    except grpc.RpcError as e:
        raise DiscoveryError(f"--pod-resources-socket {socket}: PodResources call failed ({e.code().name}: "
                             f"{e.details()}); check that the kubelet (or numalign serve) runs and serves v1") from None
    devices = [(d.resource_name, dev_id, [n.ID for n in d.topology.nodes] if d.HasField("topology") else None)
               for d in alloc.devices for dev_id in d.device_ids]
    memory = [(m.memory_type, m.size, [n.ID for n in m.topology.nodes]) for m in alloc.memory]
    pods = [
        ListedPod(p.namespace, p.name, tuple(
            (list(c.cpu_ids), [(d.resource_name, dev_id) for d in c.devices for dev_id in d.device_ids],
             [(m.memory_type, m.size, [n.ID for n in m.topology.nodes]) for m in c.memory])
            for c in p.containers))
        for p in listed.pod_resources
    ]
    return export(machine, name, config.topology_manager_policy, config.topology_manager_scope,
                  list(alloc.cpu_ids), memory, devices, pods)
