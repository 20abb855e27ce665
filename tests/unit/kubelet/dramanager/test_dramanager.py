"""The kubelet's DRA manager: reservations, release (a template's claim deleted with its pod, a shared
claim kept until its last pod goes), the scheduler's view of the node, and the life cycle around
admission with the scheduler's allocator."""

from __future__ import annotations

from numalign.k8s.dra.documents import pods_and_dra_from_yaml
from numalign.k8s.dra.types import DRAObjects, ResourceClaim
from numalign.k8s.pod import Pod
from numalign.kubelet.dramanager.lifecycle import ClaimLifecycle
from numalign.kubelet.dramanager.manager import DRAManager
from numalign.kubelet.dramanager.state import HeldClaim, PodReference
from numalign.scheduler.dra.scheduling import NodeDRA, PodClaims

OBJECTS = """apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: gpus}
spec:
  driver: gpu.example.com
  nodeName: node-a
  pool: {name: node-a, generation: 1, resourceSliceCount: 1}
  devices: [{name: gpu-0}, {name: gpu-1}]
---
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: gpu}
spec:
  selectors: [{cel: {expression: 'device.driver == "gpu.example.com"'}}]
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: one-gpu}
spec:
  spec:
    devices:
      requests: [{name: gpu, exactly: {deviceClassName: gpu}}]
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: shared}
spec:
  devices:
    requests: [{name: gpu, exactly: {deviceClassName: gpu}}]
"""
POD = """---
apiVersion: v1
kind: Pod
metadata: {{name: {name}}}
spec:
  resourceClaims: [{{name: gpu, {source}}}]
  containers:
  - name: main
    image: x
    resources: {{claims: [{{name: gpu}}]}}
  - name: side
    image: x
"""


def setup(*pods: tuple[str, str]) -> tuple[dict[str, Pod], DRAObjects]:
    text = OBJECTS + "".join(POD.format(name=n, source=s) for n, s in pods)
    found, objects = pods_and_dra_from_yaml(text, "test.yaml")
    return {p.name: p for p in found}, objects


TEMPLATE = "resourceClaimTemplateName: one-gpu"
SHARED = "resourceClaimName: shared"


def lifecycle(manager: DRAManager, objects: DRAObjects) -> ClaimLifecycle[PodClaims]:
    return ClaimLifecycle(manager, objects, lambda view: NodeDRA(view, "node-a"))


def admit(life: ClaimLifecycle[PodClaims], pod: Pod) -> list[str]:
    outcome = life.allocate(pod)
    assert outcome is not None and outcome.failure is None
    life.commit(outcome)
    return [d.device for d in outcome.devices]


def test_a_templates_claim_is_deleted_with_its_pod_and_made_again_for_the_next_version() -> None:
    pods, objects = setup(("a", TEMPLATE), ("b", TEMPLATE))
    manager = DRAManager()
    life = lifecycle(manager, objects)
    assert admit(life, pods["a"]) == ["gpu-0"]
    assert [h.key for h in manager.held()] == ["default/a-gpu"]
    assert manager.release(pods["a"].uid) == ["default/a-gpu"]
    assert manager.held() == []
    # Its next version (same name, same uid) gets a claim with devices again, from the template.
    assert admit(life, pods["a"]) == ["gpu-0"]
    assert admit(life, pods["b"]) == ["gpu-1"]  # gpu-0 is a's


def test_a_shared_claim_keeps_its_device_until_its_last_pod_is_released() -> None:
    pods, objects = setup(("a", SHARED), ("b", SHARED))
    manager = DRAManager()
    life = lifecycle(manager, objects)
    assert admit(life, pods["a"]) == ["gpu-0"]
    assert admit(life, pods["b"]) == ["gpu-0"]
    (held,) = manager.held()
    assert [r.name for r in held.reserved_for] == ["a", "b"]
    assert manager.release(pods["a"].uid) == []
    assert manager.view(objects).claims["default/shared"].allocation == held.claim.allocation
    assert manager.release(pods["b"].uid) == ["default/shared"]
    assert manager.view(objects).claims["default/shared"].allocation is None  # as given: unallocated


def test_the_containers_devices_come_from_the_claims_the_pod_reserves() -> None:
    pods, objects = setup(("a", TEMPLATE))
    manager = DRAManager()
    admit(lifecycle(manager, objects), pods["a"])
    [(held, result)] = manager.container_devices(pods["a"], "main")
    assert (held.key, result.device) == ("default/a-gpu", "gpu-0")
    assert manager.container_devices(pods["a"], "side") == []  # it names no claim


def test_reservations_by_pods_the_node_does_not_list_are_dropped_on_restore() -> None:
    pods, objects = setup(("a", TEMPLATE))
    manager = DRAManager()
    admit(lifecycle(manager, objects), pods["a"])
    ghost = HeldClaim(ResourceClaim("ghost", "default"), (PodReference("default", "g", "g"),))
    manager.restore([*manager.held(), ghost])
    lines = manager.reconcile({pods["a"].uid: pods["a"]})
    assert [h.key for h in manager.held()] == ["default/a-gpu"]
    assert len(lines) == 1 and "default/ghost" in lines[0]
