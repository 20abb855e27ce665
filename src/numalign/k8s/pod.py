"""Typed Pod model: the parts of a Pod the resource managers look at.

Parsing of manifests (YAML/JSON, Lists, workload templates) lives in numalign.k8s.manifest.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from numalign.k8s.dra.types import ContainerClaim, PodResourceClaim
from numalign.k8s.quantity import Quantity
from numalign.k8s.resources import is_pod_level_resource


class PodMemo:
    """What admission works out from a pod once and asks for again: its QoS class (k8s/qos.py), its
    requests in the scheduler's units (kubelet/admission/predicate.py) and its shape for the cluster
    scheduler (cluster/state.py). A Pod is frozen, so none of them goes stale. Declared attributes
    rather than entries in the instance __dict__: a class compiled by mypyc (scripts/compiled-modules)
    has no __dict__."""

    def __init__(self) -> None:
        self.qos: str | None = None  # a k8s.qos.QOSClass (a str)
        self.fit: dict[str, int] | None = None
        self.shape: tuple[object, ...] | None = None
        # Per container name, its memory and hugepage requests in bytes (kubelet/memorymanager/requests.py):
        # the memory manager's Static policy asks at the container's hints and again at its Allocate.
        self.memory: dict[str, dict[str, int]] | None = None


@dataclass(frozen=True)
class Container:
    name: str
    requests: Mapping[str, Quantity] = field(default_factory=dict)
    limits: Mapping[str, Quantity] = field(default_factory=dict)
    # "Always" on an init container makes it a restartable init container (a sidecar).
    restart_policy: str | None = None
    is_init: bool = False
    # resources.claims (DRA): the pod claims (and requests of them) this container uses.
    claims: tuple[ContainerClaim, ...] = ()

    def __init__(
        self, name: str, requests: Mapping[str, Quantity] | None = None, limits: Mapping[str, Quantity] | None = None,
        restart_policy: str | None = None, is_init: bool = False, claims: tuple[ContainerClaim, ...] = (),
    ) -> None:
        # Written out, not generated: a dataclass's generated __init__ runs as interpreted Python even in the
        # compiled core (the decorator makes it at run time), about 1.8 us a container against 0.2 us for
        # this one, whose object.__setattr__ calls mypyc turns into native stores. Every pod read makes some.
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "requests", {} if requests is None else requests)
        object.__setattr__(self, "limits", {} if limits is None else limits)
        object.__setattr__(self, "restart_policy", restart_policy)
        object.__setattr__(self, "is_init", is_init)
        object.__setattr__(self, "claims", claims)

    @property
    def is_sidecar(self) -> bool:
        return self.is_init and self.restart_policy == "Always"

    def __reduce__(self) -> tuple[type[Container], tuple[object, ...]]:
        # Pickled as a constructor call (simulate's --jobs and --dask send pods to other processes):
        # mypyc's compiled class is otherwise restored field by field through the frozen __setattr__.
        return Container, (self.name, self.requests, self.limits, self.restart_policy, self.is_init, self.claims)


@dataclass(frozen=True)
class Pod:
    name: str
    namespace: str = "default"
    uid: str = ""
    init_containers: tuple[Container, ...] = ()
    containers: tuple[Container, ...] = ()
    # pod.spec.overhead (RuntimeClass); added to effective requests unless excluded.
    overhead: Mapping[str, Quantity] = field(default_factory=dict)
    # pod.status.qosClass when the manifest carries one; otherwise computed.
    status_qos_class: str | None = None
    # pod.spec.resources (pod-level resources, PodLevelResources: beta and on by default since 1.34).
    # None when the pod has no spec.resources; requests default from limits as the API server does.
    pod_requests: Mapping[str, Quantity] | None = None
    pod_limits: Mapping[str, Quantity] | None = None
    # spec.resourceClaims (DRA): the claims the pod uses, by claim or by template.
    resource_claims: tuple[PodResourceClaim, ...] = ()
    # Where the pod came from (file and document index), for error messages and reports.
    source: str = ""
    # Admission's memos (PodMemo): not part of the pod's value, so equality, hash, repr and
    # dataclasses.replace() leave them out (a replaced pod starts with empty ones).
    memo: PodMemo = field(init=False, repr=False, compare=False)

    def __init__(
        self, name: str, namespace: str = "default", uid: str = "", init_containers: tuple[Container, ...] = (),
        containers: tuple[Container, ...] = (), overhead: Mapping[str, Quantity] | None = None,
        status_qos_class: str | None = None, pod_requests: Mapping[str, Quantity] | None = None,
        pod_limits: Mapping[str, Quantity] | None = None, resource_claims: tuple[PodResourceClaim, ...] = (),
        source: str = "",
    ) -> None:
        # Written out for the reason Container's is (one per pod read: 2.8 us generated, 0.3 us this way).
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "namespace", namespace)
        object.__setattr__(self, "uid", uid)
        object.__setattr__(self, "init_containers", init_containers)
        object.__setattr__(self, "containers", containers)
        object.__setattr__(self, "overhead", {} if overhead is None else overhead)
        object.__setattr__(self, "status_qos_class", status_qos_class)
        object.__setattr__(self, "pod_requests", pod_requests)
        object.__setattr__(self, "pod_limits", pod_limits)
        object.__setattr__(self, "resource_claims", resource_claims)
        object.__setattr__(self, "source", source)
        # Set here, not by a default_factory: mypyc's compiled dataclass leaves an init=False field unset.
        object.__setattr__(self, "memo", PodMemo())

    def __reduce__(self) -> tuple[type[Pod], tuple[object, ...]]:
        # As Container's: a constructor call, the memos computed again on the other side.
        return Pod, (self.name, self.namespace, self.uid, self.init_containers, self.containers, self.overhead,
                     self.status_qos_class, self.pod_requests, self.pod_limits, self.resource_claims, self.source)

    def all_containers(self) -> Iterator[Container]:
        """Init containers (sidecars included) in spec order, then app containers: kubelet order."""
        yield from self.init_containers
        yield from self.containers

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def has_pod_level_resources(self) -> bool:
        """component-helpers IsPodLevelResourcesSet: spec.resources names a supported resource (cpu,
        memory, hugepages-*). The static CPU and memory manager policies leave such pods alone."""
        if self.pod_requests is None and self.pod_limits is None:
            return False  # most pods: asked several times per admission, answered without a scan
        return any(is_pod_level_resource(n) for n in [*(self.pod_requests or {}), *(self.pod_limits or {})])

    @property
    def has_pod_spec_resources(self) -> bool:
        """pod.spec.resources is present (then it alone decides the QoS class)."""
        return self.pod_requests is not None or self.pod_limits is not None

    def with_identity(self, *, name: str | None = None, uid: str | None = None) -> Pod:
        """This pod under another name and/or uid (a controller's next copy, a generated pod of a shape),
        keeping what was memoised from its spec (Pod.memo: the QoS class, numalign.k8s.qos; the requests,
        numalign.kubelet.admission.predicate; the simulator's shape key, numalign.cluster.resources):
        each reads the spec alone, never the name, namespace or uid, so it holds for the copy too and
        is not computed again for each of 20,000 generated pods."""
        copy = replace(self, name=self.name if name is None else name, uid=self.uid if uid is None else uid)
        mine, theirs = self.memo, copy.memo
        theirs.qos, theirs.fit, theirs.shape, theirs.memory = mine.qos, mine.fit, mine.shape, mine.memory
        return copy


def pod_to_manifest(pod: Pod) -> dict[str, Any]:
    """A minimal Pod manifest that reads back into the same Pod (for numalign's pod list)."""

    def res(c: Any) -> dict[str, Any]:
        out: dict[str, Any] = {
            "requests": {k: str(v) for k, v in c.requests.items()},
            "limits": {k: str(v) for k, v in c.limits.items()},
        }
        if c.claims:  # DRA: the claims the container uses, so a restored pod still finds its devices
            out["claims"] = [{"name": r.name, **({"request": r.request} if r.request else {})} for r in c.claims]
        return out

    def ctr(c: Any) -> dict[str, Any]:
        out: dict[str, Any] = {"name": c.name, "resources": res(c)}
        if c.restart_policy:
            out["restartPolicy"] = c.restart_policy
        return out

    spec: dict[str, Any] = {
        "containers": [ctr(c) for c in pod.containers],
    }
    if pod.init_containers:
        spec["initContainers"] = [ctr(c) for c in pod.init_containers]
    if pod.resource_claims:
        spec["resourceClaims"] = [
            {"name": r.name, **({"resourceClaimName": r.resource_claim_name} if r.resource_claim_name else
                                {"resourceClaimTemplateName": r.resource_claim_template_name})}
            for r in pod.resource_claims]
    if pod.overhead:
        spec["overhead"] = {k: str(v) for k, v in pod.overhead.items()}
    if pod.has_pod_spec_resources:
        spec["resources"] = {
            "requests": {k: str(v) for k, v in (pod.pod_requests or {}).items()},
            "limits": {k: str(v) for k, v in (pod.pod_limits or {}).items()},
        }
    manifest: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": pod.name, "namespace": pod.namespace, "uid": pod.uid},
        "spec": spec,
    }
    if pod.status_qos_class:
        manifest["status"] = {"qosClass": pod.status_qos_class}
    return manifest
