"""Hypothesis: random admit / remove / health-update sequences keep the device books consistent."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from support.strategies import device_ops, device_topology_lists

from numalign.core.hint import TopologyHint
from numalign.errors import AllocationError
from numalign.k8s.deviceplugin import ContainerAllocateResponse, Device
from numalign.k8s.pod import Container, Pod
from numalign.k8s.quantity import Quantity
from numalign.kubelet.devicemanager.endpoint import StaticEndpoint
from numalign.kubelet.devicemanager.manager import DeviceManager

R = "vendor.com/gpu"


class MaskAffinity:
    def __init__(self) -> None:
        self.mask: int | None = None

    def get_affinity(self, pod_uid: str, container_name: str) -> TopologyHint:
        return TopologyHint(self.mask, True)


def check_books(m: DeviceManager) -> None:
    # allocatedDevices is exactly what podDevices records.
    assert m.allocated.get(R, set()) == m.pod_devices.devices().get(R, set())
    # No device is held by two pods, nor by two app containers of one pod.
    owners: dict[str, str] = {}
    for pod_uid, containers in m.pod_devices.devs.items():
        app_ids: list[str] = []
        for name, resources in containers.items():
            info = resources.get(R)
            if info is None:
                continue
            ids = {d for lst in info.device_ids.values() for d in lst}
            for d in ids:
                assert owners.setdefault(d, pod_uid) == pod_uid, f"{d} given to two pods"
            if name.startswith("app"):
                app_ids.extend(ids)
        assert len(app_ids) == len(set(app_ids)), "two app containers share a device"
    # A snapshot restores the same allocations.
    restored = DeviceManager([0, 1], MaskAffinity())
    restored.restore(m.snapshot(), now=0.0)
    assert restored.pod_devices.devs == m.pod_devices.devs


@settings(max_examples=120)
@given(topologies=device_topology_lists, ops=st.lists(device_ops, max_size=12))
def test_random_sequences_never_double_allocate(
    topologies: list[tuple[int, ...] | None], ops: list[tuple[object, ...]]
) -> None:
    devices = [Device(f"gpu{i}", topology=t) for i, t in enumerate(topologies)]
    affinity = MaskAffinity()
    m = DeviceManager([0, 1], affinity)
    m.register_endpoint(R, StaticEndpoint(R, devices, allocate_fn=lambda ids: ContainerAllocateResponse()))
    m.update_devices(R, devices)
    serial = 0
    for op in ops:
        if op[0] == "admit":
            _, init_n, app_n, sidecar, mask = op
            assert isinstance(init_n, int) and isinstance(app_n, int)
            serial += 1
            init = (Container("init", limits={R: Quantity.from_int(init_n)}, is_init=True,
                              restart_policy="Always" if sidecar else None),)  # fmt: skip
            apps = (Container("app1", limits={R: Quantity.from_int(app_n)}),
                    Container("app2", limits={R: Quantity.from_int(1)}))  # fmt: skip
            pod = Pod(f"p{serial}", uid=f"uid{serial}", init_containers=init, containers=apps)
            affinity.mask = mask if isinstance(mask, int) else None
            try:
                for c in pod.all_containers():
                    m.allocate_now(pod, c)
            except AllocationError:
                m.remove_pod(pod.uid)  # the admission layer's rollback of a rejected pod
        elif op[0] == "remove":
            idx = op[1]
            assert isinstance(idx, int)
            pods = sorted(m.pod_devices.pods())
            if pods:
                m.remove_pod(pods[idx % len(pods)])
        else:
            bits = op[1]
            assert isinstance(bits, int)
            m.update_devices(R, [Device(d.id, "Unhealthy" if bits >> i & 1 else "Healthy", d.topology)
                                 for i, d in enumerate(devices)])  # fmt: skip
        check_books(m)
