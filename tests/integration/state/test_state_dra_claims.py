"""DRA claims in a state directory under every interruption: admissions, `--replace` (same uid or a new
one, with a template's claim, a shared claim or none) and removals, each killed at every write it makes
(the crash hook stops the commit there, as SIGKILL would). After each, the directory opened again must
never leave a device held by a pod that does not use it, nor a recorded pod without its claims."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.configs import static_node_config

from numalign.adapters.statedir.directory import StateDirectory
from numalign.k8s.dra.documents import pods_and_dra_from_yaml
from numalign.k8s.dra.podclaims import generated_claim_name
from numalign.k8s.dra.types import DRAObjects
from numalign.k8s.pod import Pod
from numalign.kubelet.dramanager.lifecycle import ClaimLifecycle
from numalign.kubelet.node import Node
from numalign.machine.dra import machine_slices
from numalign.machine.shorthand import parse_shorthand
from numalign.scheduler.dra.scheduling import NodeDRA, PodClaims

MACHINE = parse_shorthand("2s x 2n x 4c x 2t, 16Gi/node, dra:gpu.example.com=1/node{model=h100}")
CONFIG = static_node_config(reserved="0")
OBJECTS = """apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: gpu}
spec:
  selectors: [{cel: {expression: 'device.driver == "gpu.example.com"'}}]
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: one-gpu}
spec:
  spec: {devices: {requests: [{name: gpu, exactly: {deviceClassName: gpu}}]}}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: shared-gpu}
spec:
  devices: {requests: [{name: gpu, exactly: {deviceClassName: gpu}}]}
"""
SOURCES = {"template": "resourceClaimTemplateName: one-gpu", "shared": "resourceClaimName: shared-gpu"}


class Crash(BaseException):
    """SIGKILL at one write of a commit: nothing after it runs."""


def version(name: str, claims: str, uid: str = "") -> tuple[Pod, DRAObjects]:
    """Pod `name` with a template's claim, the shared claim, or none; `uid`: another version's uid."""
    meta = f"{{name: {name}{', uid: ' + uid if uid else ''}}}"
    claim = f"  resourceClaims: [{{name: gpu, {SOURCES[claims]}}}]\n" if claims in SOURCES else ""
    uses = "      claims: [{name: gpu}]\n" if claims in SOURCES else ""
    text = (f"{OBJECTS}---\napiVersion: v1\nkind: Pod\nmetadata: {meta}\nspec:\n{claim}  containers:\n"
            f"  - name: main\n    image: x\n    resources:\n      limits: {{cpu: '1', memory: 1Gi}}\n{uses}")
    (pod,), objects = pods_and_dra_from_yaml(text, f"{name}.yaml")
    return pod, objects


def open_node(state: Path, crash_at: int | None = None) -> Node:
    writes = iter(range(1, 1_000))

    def hook(what: str) -> None:
        if next(writes) == crash_at:
            raise Crash

    return Node(MACHINE, CONFIG, store=StateDirectory(state, before_write=None if crash_at is None else hook))


def admit(state: Path, pod: Pod, objects: DRAObjects, crash_at: int | None, *, remove_only: bool = False) -> None:
    """What `admit --replace` (or `remove`) does: the pod of that name or uid removed, the new version's
    claims allocated before the kubelet admits it and reserved after, in one transaction."""
    try:
        node = open_node(state, crash_at)  # a first open writes the files it finds missing
        life: ClaimLifecycle[PodClaims] = ClaimLifecycle(
            node.dra, objects,
            lambda view: NodeDRA(view, "node", extra_slices=machine_slices(MACHINE, "node")))
        with node.transaction():
            for old in [p for p in node.pods.values() if p.key == pod.key or p.uid == pod.uid]:
                node.remove(old.uid)
            if remove_only:
                return
            outcome = life.allocate(pod)
            if outcome is not None and outcome.failure is not None:
                return  # unschedulable here: the kubelet never sees it
            if node.admit(pod).result.admit and outcome is not None:
                life.commit(outcome)
    except Crash:
        pass


def check(state: Path) -> dict[str, set[str]]:
    """The invariants on the directory as the next process finds it; pod name -> its devices."""
    node = open_node(state)
    held = node.dra.held()
    by_device: dict[str, str] = {}
    for h in held:
        assert h.reserved_for, h
        assert all(r.uid in node.pods for r in h.reserved_for), (h, list(node.pods))  # no ghost holder
        assert h.devices, f"{h.key} is held with no device"
        for d in h.devices:
            assert by_device.setdefault(d, h.key) == h.key, f"{d} in {h.key} and {by_device[d]}"
    devices: dict[str, set[str]] = {}
    for pod in node.pods.values():
        mine = {h.key for h in node.dra.claims_of(pod.uid)}
        wanted = {f"{pod.namespace}/{pc.resource_claim_name or generated_claim_name(pod, pc)}"
                  for pc in pod.resource_claims}
        assert mine == wanted, f"pod {pod.key} holds {mine}, uses {wanted}"  # never lost, never extra
        devices[pod.name] = {d for h in node.dra.claims_of(pod.uid) for d in h.devices}
    return devices


def operations(seed: int) -> Iterator[tuple[str, str, str, int | None]]:
    rng = random.Random(seed)
    for step in range(40):
        yield (rng.choice("abcde"), rng.choice(["template", "shared", "none", "remove"]),
               rng.choice(["", "", f"v{step}"]), rng.choice([None, None, 1, 2, 3, 4, 5]))


@pytest.mark.parametrize("seed", range(4))
def test_no_interruption_leaves_a_device_with_a_pod_that_does_not_use_it_or_a_pod_without_its_claims(
    tmp_path: Path, seed: int
) -> None:
    state = tmp_path / "state"
    for name, claims, uid, crash_at in operations(seed):
        pod, objects = version(name, "none" if claims == "remove" else claims, uid)
        admit(state, pod, objects, crash_at, remove_only=claims == "remove")
        check(state)


def test_a_replace_killed_at_each_write_leaves_either_version_whole(tmp_path: Path) -> None:
    for crash_at in (1, 2, 3, 4, 5, None):
        state = tmp_path / f"state-{crash_at}"
        admit(state, *version("a", "template"), None)
        assert check(state) == {"a": {"gpu.example.com/node/gpu-0"}}
        admit(state, *version("b", "template"), None)
        admit(state, *version("a", "shared", uid="a-2"), crash_at)
        after = check(state)
        # the old version with its own device, the new one with the shared claim's, or (between the removal
        # and the admission) neither; b keeps its device throughout
        assert after["b"] == {"gpu.example.com/node/gpu-1"}
        assert after.get("a") in ({"gpu.example.com/node/gpu-0"}, None), after
