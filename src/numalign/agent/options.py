"""The node agent's options: what `numalign serve` passes to Agent (cli/serve.py builds them)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from numalign.adapters.grpc.plugin_client import CALL_TIMEOUT_S, DIAL_TIMEOUT_S
from numalign.adapters.grpc.podresources import DEFAULT_POD_RESOURCES_SOCKET
from numalign.adapters.grpc.registration import DEFAULT_DEVICE_PLUGIN_DIR
from numalign.k8s.kubeletconfig import KubeletConfig
from numalign.k8s.previews import NO_PREVIEWS, Previews
from numalign.k8s.version import DEFAULT as DEFAULT_KUBELET_VERSION
from numalign.k8s.version import KubeletVersion
from numalign.kubelet.devicemanager.manager import ENDPOINT_STOP_GRACE_PERIOD
from numalign.machine.topology import Machine
from numalign.paths import DEFAULT_STATE_DIR


@dataclass
class AgentOptions:
    machine: Machine
    config: KubeletConfig
    device_plugin_dir: Path = DEFAULT_DEVICE_PLUGIN_DIR
    pod_resources_socket: Path = DEFAULT_POD_RESOURCES_SOCKET
    manifests: Path | None = None
    state_dir: Path = DEFAULT_STATE_DIR
    metrics_address: str | None = None
    socket_group: str | None = None
    endpoint_grace_period: float = ENDPOINT_STOP_GRACE_PERIOD
    poll_interval: float = 0.5
    capacity_interval: float = 1.0
    dial_timeout: float = DIAL_TIMEOUT_S
    call_timeout: float = CALL_TIMEOUT_S
    # Not the kubelet's behaviour (opt-in): hold pods whose device plugin has not reported devices yet.
    wait_for_device_plugins: bool = False
    # Not the kubelet's behaviour (opt-in): make device plugins' Allocate calls without holding up
    # other pods' admission (the kubelet admits one pod at a time, Allocate included).
    parallel_allocate: bool = False
    # The kubelet names static pods `<name>-<node name>`; False keeps the manifests' names (opt-in).
    mirror_pod_names: bool = True
    # Back-off between attempts to start a pod's containers after PreStartContainer failed: doubles
    # from the first value up to the second, as the kubelet's container restart back-off (10 s, 5 min).
    start_backoff: float = 10.0
    start_backoff_max: float = 300.0
    # NodeResourceTopology v1alpha2 of this node, rewritten (atomically) whenever it changes, as the
    # NFD topology-updater would publish it.
    nrt_file: Path | None = None
    # The kubelet's node name (its --hostname-override, else the host name, lower-cased): the NRT
    # object's metadata.name and the suffix of static pods' names.
    node_name: str = "node"
    # The kubelet version decided as (kubelet/versions) and the previews on (k8s/previews).
    kubelet_version: KubeletVersion = DEFAULT_KUBELET_VERSION
    previews: Previews = NO_PREVIEWS
