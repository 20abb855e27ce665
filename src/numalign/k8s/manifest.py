"""Read Pods from Kubernetes manifests (YAML or JSON), the way the API server would hand them over.

Accepted documents: a Pod; a List / PodList / <Kind>List (its `items`); a top-level JSON array; the
pod template of a Deployment, StatefulSet, ReplicaSet, ReplicationController, DaemonSet, Job,
CronJob (spec.jobTemplate.spec.template) or PodTemplate. Multi-document YAML is read in order;
empty documents are skipped.

API behaviour applied, because the kubelet only ever sees pods after it:
- defaulting (SetDefaults_Pod): a resource with a limit but no request requests its limit;
  namespace defaults to "default";
- the resource-requirement validation that decides what managers see (ValidateResourceRequirements):
  non-negative values, integer extended resources, request <= limit, request == limit for extended
  resources and hugepages, hugepages only next to cpu or memory, container resource names;
- unique container names across init and app containers.

Identity: `metadata.uid` when given, otherwise a uuid5 of "<namespace>/<name>" so state files stay
stable from run to run. A workload template becomes a pod named "<workload>-0" (with
expand_replicas, "<workload>-0" … "<workload>-<n-1>" for spec.replicas / spec.parallelism).

Every error is an InvalidInputError naming the file, the document (1-based) and the field path.
Pure: reading manifest files is adapters.textfiles.load_pods.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from numalign.errors import InvalidInputError
from numalign.k8s.documents import parse_documents
from numalign.k8s.dra.names import dns_label_problem
from numalign.k8s.dra.podclaims import check_container_claims, container_claims, pod_resource_claims
from numalign.k8s.pod import Container, Pod
from numalign.k8s.qos import QOSClass
from numalign.k8s.quantity import Quantity
from numalign.k8s.resources import (
    RESOURCE_CPU,
    RESOURCE_EPHEMERAL_STORAGE,
    RESOURCE_MEMORY,
    hugepage_size_from_resource_name,
    is_dns1123_subdomain,
    is_extended_resource_name,
    is_hugepage_resource_name,
    is_integer_resource_name,
    is_native_resource_name,
    is_overcommit_allowed,
    is_pod_level_resource,
    is_qualified_name,
)
from numalign.limits import check_replicas, quote

# A fixed namespace for derived pod uids; changing it would change every derived uid.
POD_UID_NAMESPACE: Final = uuid.UUID("6f1d2a34-6b0e-5c1a-9e53-6e756d616c67")

# kind -> path of the pod template inside the object.
WORKLOAD_TEMPLATES: Final[Mapping[str, tuple[str, ...]]] = {
    "Deployment": ("spec", "template"),
    "StatefulSet": ("spec", "template"),
    "ReplicaSet": ("spec", "template"),
    "ReplicationController": ("spec", "template"),
    "DaemonSet": ("spec", "template"),
    "Job": ("spec", "template"),
    "CronJob": ("spec", "jobTemplate", "spec", "template"),
    "PodTemplate": ("template",),
}
# Where each workload keeps its pod count (only read with expand_replicas).
_REPLICA_FIELDS: Final[Mapping[str, tuple[str, ...]]] = {
    "Deployment": ("spec", "replicas"),
    "StatefulSet": ("spec", "replicas"),
    "ReplicaSet": ("spec", "replicas"),
    "ReplicationController": ("spec", "replicas"),
    "Job": ("spec", "parallelism"),
}
SUPPORTED_KINDS: Final = ("Pod", "List (and PodList, <Kind>List)", *WORKLOAD_TEMPLATES)
EXPECTED_MANIFEST: Final = "Kubernetes manifests (YAML or JSON) of kind " + ", ".join(SUPPORTED_KINDS)
_STANDARD_CONTAINER_RESOURCES: Final = frozenset({RESOURCE_CPU, RESOURCE_MEMORY, RESOURCE_EPHEMERAL_STORAGE})
_INIT_RESTART_POLICIES: Final = ("Always", "OnFailure", "Never")
_SUBDOMAIN_RULE: Final = ("a lowercase RFC 1123 subdomain: at most 253 characters of a-z, 0-9, '-' and '.', "
                          "starting and ending with a letter or digit, e.g. 'web-0'")
_LABEL_RULE: Final = ("a lowercase RFC 1123 label: at most 63 characters of a-z, 0-9 and '-', starting and "
                      "ending with a letter or digit, e.g. 'main'")


# Offered every object of a kind that is not a pod or a workload; returns True when it took it (the DRA
# reader takes DeviceClasses, ResourceClaims, ResourceClaimTemplates and ResourceSlices this way).
Collector = Callable[[Mapping[str, Any], str], bool]


def pod_uid(namespace: str, name: str) -> str:
    """The uid numalign gives a pod whose manifest has none: stable for a given namespace/name."""
    return str(uuid.uuid5(POD_UID_NAMESPACE, f"{namespace}/{name}"))


# ---- entry points ----------------------------------------------------------------------------------


def pods_from_yaml(
    text: str, source: str = "<input>", *, expand_replicas: bool = False, skipped: list[str] | None = None
) -> list[Pod]:
    """Pods from manifest text (YAML, multi-document YAML or JSON). `source` names it in errors."""
    return pods_from_documents(parse_documents(text, source, EXPECTED_MANIFEST), source,
                               expand_replicas=expand_replicas, skipped=skipped)


@dataclass
class Expansion:
    """How workloads become pods: `replicas` copies of each (None: its own spec.replicas, or
    spec.parallelism for a Job); `expanded` collects one note per workload expanded."""

    replicas: int | None = None
    expanded: list[str] = field(default_factory=list)
    # --replicas N beside a bare Pod: said once (a Pod is one pod, as `kubectl scale` refuses a Pod).
    bare_pod_noted: bool = False


def pods_from_documents(
    docs: list[Any],
    source: str,
    *,
    expand_replicas: bool | Expansion = False,
    skipped: list[str] | None = None,
    collect: Collector | None = None,
) -> list[Pod]:
    """Pods from decoded documents (k8s.documents.parse_documents); empty documents are skipped.

    With `skipped`, objects of other kinds (a Service, a ConfigMap: what `helm template` prints beside
    a Deployment) are noted there and left out instead of being an error."""
    pods: list[Pod] = []
    for index, doc in enumerate(docs, start=1):
        if doc is None:
            continue
        where = f"{source}: document {index}"
        pods.extend(pods_from_object(doc, where, expand_replicas=expand_replicas, skipped=skipped, collect=collect))
    return pods


def pods_from_object(
    obj: object,
    where: str,
    *,
    expand_replicas: bool | Expansion = False,
    skipped: list[str] | None = None,
    collect: Collector | None = None,
) -> list[Pod]:
    """Pods from one decoded document: a Pod, a List, a workload or a JSON array of those."""
    if isinstance(obj, list):
        return _items(obj, where, "", expand_replicas, skipped, collect)
    if not isinstance(obj, Mapping):
        raise InvalidInputError(
            f"{where}: expected a mapping (a Pod, a List or a workload such as a Deployment), "
            f"got {_type_name(obj)}"
        )
    kind = obj.get("kind")
    if kind is None and isinstance(obj.get("spec"), Mapping) and "containers" in obj["spec"]:
        kind = "Pod"  # a bare pod spec with metadata, as people write in tests
    if kind == "Pod":
        pod = pod_from_dict(obj, where)
        check_names(pod, where, "spec")
        if isinstance(expand_replicas, Expansion) and expand_replicas.replicas is not None \
                and not expand_replicas.bare_pod_noted:
            expand_replicas.bare_pod_noted = True
            expand_replicas.expanded.append(
                f"Pod {pod.namespace}/{pod.name}: 1 pod; --replicas {expand_replicas.replicas} applies to workloads "
                "(Deployment, StatefulSet, Job, ...) and a bare Pod is one pod, as `kubectl scale` refuses a Pod "
                "(the same for every bare Pod given); wrap it in a Deployment for copies")
        return [pod]
    if isinstance(kind, str) and kind.endswith("List"):
        items = obj.get("items")
        if items is None:
            return []
        if not isinstance(items, list):
            raise InvalidInputError(f"{where}: items: expected a list of objects, got {_type_name(items)}")
        return _items(items, where, "items", expand_replicas, skipped, collect)
    if isinstance(kind, str) and kind in WORKLOAD_TEMPLATES:
        return _workload_pods(obj, kind, where, expand_replicas)
    if collect is not None and isinstance(kind, str) and collect(obj, where):
        return []
    if skipped is not None and isinstance(kind, str) and kind:
        name = obj.get("metadata", {}).get("name") if isinstance(obj.get("metadata"), Mapping) else None
        skipped.append(f"{where}: {kind}{f' {name}' if isinstance(name, str) else ''} skipped (no pod template)")
        return []
    if kind is None or kind == "":
        raise InvalidInputError(
            f"{where}: kind: the document has no kind; expected a Pod, a List or a workload "
            f"({', '.join(SUPPORTED_KINDS)}) with apiVersion and kind set (a machine file goes to --machine, "
            "a kubelet configuration to --config)"
        )
    raise InvalidInputError(
        f"{where}: kind: unsupported kind {quote(kind)}; supported kinds: {', '.join(SUPPORTED_KINDS)}"
    )


def pod_from_dict(obj: Mapping[str, Any], where: str = "pod") -> Pod:
    """One Pod object (kind Pod, or a bare {metadata, spec}), defaulted and validated."""
    metadata = _mapping(obj.get("metadata"), where, "metadata")
    name = _pod_name(metadata, where)
    namespace = _namespace(metadata, where, "metadata")
    uid = _optional_str(metadata.get("uid"), where, "metadata.uid") or pod_uid(namespace, name)
    spec = _mapping(obj.get("spec"), where, "spec", required=True)
    status = _mapping(obj.get("status"), where, "status")
    qos = _optional_str(status.get("qosClass"), where, "status.qosClass")
    if qos:
        QOSClass.parse(qos, where=f"{where}: status.qosClass")
    return _build_pod(spec, "spec", where, name=name, namespace=namespace, uid=uid, qos=qos or None)


def _items(
    items: list[Any], where: str, path: str, expand_replicas: bool | Expansion, skipped: list[str] | None,
    collect: Collector | None,
) -> list[Pod]:
    pods: list[Pod] = []
    for i, item in enumerate(items):
        label = f"{path}[{i}]"
        if item is None:
            continue
        pods.extend(pods_from_object(item, f"{where}: {label}", expand_replicas=expand_replicas, skipped=skipped,
                                     collect=collect))
    return pods


def _workload_pods(obj: Mapping[str, Any], kind: str, where: str, expand_replicas: bool | Expansion) -> list[Pod]:
    metadata = _mapping(obj.get("metadata"), where, "metadata")
    workload = metadata.get("name")
    if not isinstance(workload, str) or not workload:
        raise InvalidInputError(f"{where}: metadata.name: a {kind} needs a name (non-empty string)")
    namespace = _namespace(metadata, where, "metadata")
    node: Any = obj
    path = ""
    for key in WORKLOAD_TEMPLATES[kind]:
        path = f"{path}.{key}" if path else key
        node = _mapping(node.get(key), where, path, required=True, what=f"the {kind}'s pod template")
    template_spec = _mapping(node.get("spec"), where, f"{path}.spec", required=True)
    if isinstance(expand_replicas, Expansion):
        own = _replicas(obj, kind, where)
        count = own if expand_replicas.replicas is None else expand_replicas.replicas
        field_path = ".".join(_REPLICA_FIELDS.get(kind, ()))
        why = f"its {field_path}" if field_path else f"a {kind} makes one pod per node"
        if expand_replicas.replicas is not None:
            why = f"--replicas {count}; " + (f"its {field_path} is {own}" if field_path else why)
        expand_replicas.expanded.append(f"{kind} {namespace}/{workload}: {count} pod(s) ({why})")
    else:
        count = _replicas(obj, kind, where) if expand_replicas else 1
    pods = []
    for i in range(count):
        name = f"{workload}-{i}"
        pod = _build_pod(template_spec, f"{path}.spec", where, name=name, namespace=namespace,
                         uid=pod_uid(namespace, name), qos=None)
        if i == 0:  # the copies differ only by the index in their names
            check_names(pod, where, f"{path}.spec", name_path="metadata.name (the pods' names: NAME-0, NAME-1, ...)")
        pods.append(pod)
    return pods


def _replicas(obj: Mapping[str, Any], kind: str, where: str) -> int:
    fields = _REPLICA_FIELDS.get(kind)
    if fields is None:
        return 1
    node: Any = obj
    for key in fields:
        node = node.get(key) if isinstance(node, Mapping) else None
    if node is None:
        return 1
    if isinstance(node, bool) or not isinstance(node, int) or node < 0:
        raise InvalidInputError(
            f"{where}: {'.'.join(fields)}: expected a non-negative integer, got {quote(node)}"
        )
    return check_replicas(node, f"{where}: {'.'.join(fields)}")


# ---- pod spec --------------------------------------------------------------------------------------


def _build_pod(
    spec: Mapping[str, Any], path: str, where: str, *, name: str, namespace: str, uid: str, qos: str | None
) -> Pod:
    raw_containers = spec.get("containers")
    if not isinstance(raw_containers, list) or not raw_containers:
        raise InvalidInputError(
            f"{where}: {path}.containers: a pod needs a non-empty list of containers, "
            f"got {_type_name(raw_containers)}"
        )
    raw_init = spec.get("initContainers") or []
    if not isinstance(raw_init, list):
        raise InvalidInputError(f"{where}: {path}.initContainers: expected a list, got {_type_name(raw_init)}")
    # lists then tuples, not tuple(generator): a generator is an object per call in the compiled core
    init = tuple([_container(c, path, "initContainers", i, where, is_init=True) for i, c in enumerate(raw_init)])
    apps = tuple([_container(c, path, "containers", i, where, is_init=False) for i, c in enumerate(raw_containers)])
    every = init + apps
    seen: set[str] = set()
    claimed = False  # some container uses a DRA claim (looked at in the same pass)
    for c in every:
        if c.name in seen:
            raise InvalidInputError(
                f"{where}: {path}: duplicate container name {c.name!r}; init and app containers share "
                "one name space, rename one of them"
            )
        seen.add(c.name)
        if c.claims:
            claimed = True
    raw_overhead = spec.get("overhead")
    overhead = {} if raw_overhead is None else _resource_list(raw_overhead, f"{path}.overhead", where)
    raw_claims = spec.get("resourceClaims")
    resource_claims = () if raw_claims is None else pod_resource_claims(raw_claims, f"{path}.resourceClaims", where)
    if resource_claims or claimed:
        check_container_claims(every, resource_claims, path, where)
    raw_resources = spec.get("resources")
    pod_requests, pod_limits = (None, None) if raw_resources is None else _pod_level_resources(
        raw_resources, f"{path}.resources", where)
    return Pod(
        name=name,
        namespace=namespace,
        uid=uid,
        init_containers=init,
        containers=apps,
        overhead=overhead,
        status_qos_class=qos,
        source=where,
        pod_requests=pod_requests,
        pod_limits=pod_limits,
        resource_claims=resource_claims,
    )


def _pod_level_resources(
    obj: object, path: str, where: str
) -> tuple[dict[str, Quantity] | None, dict[str, Quantity] | None]:
    """spec.resources: (requests, limits), requests defaulted from limits; (None, None) when absent."""
    if obj is None:
        return None, None
    resources = _mapping(obj, where, path)
    limits = _resource_list(resources.get("limits"), f"{path}.limits", where)
    requests = _resource_list(resources.get("requests"), f"{path}.requests", where)
    for name in [*limits, *requests]:
        if not is_pod_level_resource(name):
            raise InvalidInputError(
                f"{where}: {path}: {name!r} is not supported at pod level; pod-level resources may name "
                "cpu, memory and hugepages-<size> (put other resources on the containers)"
            )
    # SetDefaults_PodSpec: a pod-level limit without a request requests the limit.
    for name, limit in limits.items():
        requests.setdefault(name, limit)
    _validate_requirements(requests, limits, path, where)
    return requests, limits


def _container(obj: object, spec_path: str, member: str, index: int, where: str, *, is_init: bool) -> Container:
    """One container of spec.<field>[index]. Its path in messages is built only for a message: every pod
    read reads its containers (a few f-strings each, about a tenth of a pod's read)."""
    if type(obj) is not dict and not isinstance(obj, Mapping):
        raise InvalidInputError(f"{where}: {spec_path}.{member}[{index}]: expected a container mapping, "
                                f"got {_type_name(obj)}")
    name = obj.get("name")
    if not isinstance(name, str) or not name:
        raise InvalidInputError(f"{where}: {spec_path}.{member}[{index}].name: every container needs a name "
                                "(non-empty string)")
    raw = obj.get("resources")
    resources = raw if type(raw) is dict else _mapping(raw, where, f"{spec_path}.{member}[{index}].resources")
    requests, limits = _container_resources(resources, spec_path, member, index, where)
    restart_policy = obj.get("restartPolicy")
    if restart_policy is not None:
        path = f"{spec_path}.{member}[{index}]"
        restart_policy = _optional_str(restart_policy, where, f"{path}.restartPolicy")
        if is_init and restart_policy is not None and restart_policy not in _INIT_RESTART_POLICIES:
            raise InvalidInputError(
                f"{where}: {path}.restartPolicy: unsupported value {restart_policy!r}; expected \"Always\" "
                "(a sidecar) or leave it out"
            )
    raw_claims = resources.get("claims")
    claims = () if raw_claims is None else container_claims(
        raw_claims, f"{spec_path}.{member}[{index}].resources.claims", where)
    return Container(name, requests, limits, restart_policy, is_init, claims)


def _container_resources(
    resources: Mapping[str, Any], spec_path: str, member: str, index: int, where: str
) -> tuple[dict[str, Quantity], dict[str, Quantity]]:
    """A container's requests (defaulted from its limits) and limits, validated. Containers of a few
    shapes are read over and over (every pod of a workload, every generated pod of a shape): the answer
    for the same texts is kept (_VALIDATED, bounded) and handed out as fresh dicts of the same Quantities
    (immutable). Only texts are keys: 1, 1.0 and true hash alike but do not read alike."""
    raw_limits, raw_requests = resources.get("limits"), resources.get("requests")
    key: tuple[tuple[tuple[str, str], ...], tuple[tuple[str, str], ...]] | None = None
    if (raw_limits is None or type(raw_limits) is dict) and (raw_requests is None or type(raw_requests) is dict):
        limit_texts, request_texts = _text_items(raw_limits), _text_items(raw_requests)
        if limit_texts is not None and request_texts is not None:
            key = (limit_texts, request_texts)
            known = _VALIDATED.get(key)
            if known is not None:
                return dict(known[0]), dict(known[1])
    path = f"{spec_path}.{member}[{index}].resources"
    limits = _resource_list(raw_limits, f"{path}.limits", where)
    requests = _resource_list(raw_requests, f"{path}.requests", where)
    # SetDefaults_Pod: a limit without a request requests the limit.
    for resource, limit in limits.items():
        requests.setdefault(resource, limit)
    _validate_requirements(requests, limits, path, where)
    if key is not None:
        if len(_VALIDATED) >= _VALIDATED_KEPT:
            _VALIDATED.clear()
        _VALIDATED[key] = (dict(requests), dict(limits))
    return requests, limits


def _text_items(obj: dict[str, Any] | None) -> tuple[tuple[str, str], ...] | None:
    """The (name, text) pairs of a resource list whose names and quantities are all strings, in order;
    None when one is not (such a list is read and validated every time)."""
    if not obj:
        return ()
    items: list[tuple[str, str]] = []
    for name, value in obj.items():
        if type(name) is not str or type(value) is not str:
            return None
        items.append((name, value))
    return tuple(items)


# (limits' texts, requests' texts) -> (requests, limits) of a container read and validated before.
_VALIDATED: dict[
    tuple[tuple[tuple[str, str], ...], tuple[tuple[str, str], ...]], tuple[dict[str, Quantity], dict[str, Quantity]]
] = {}
_VALIDATED_KEPT = 1024


def _resource_list(obj: object, path: str, where: str) -> dict[str, Quantity]:
    if obj is None:
        return {}
    if type(obj) is not dict and not isinstance(obj, Mapping):
        raise InvalidInputError(
            f"{where}: {path}: expected a mapping of resource name to quantity (e.g. cpu: 500m), "
            f"got {_type_name(obj)}"
        )
    out: dict[str, Quantity] = {}
    for key, value in obj.items():
        if not isinstance(key, str):
            raise InvalidInputError(f"{where}: {path}: resource names must be strings, got {key!r}")
        # A quantity text read before is that Quantity again (immutable); the field's name is only
        # written out for a text that fails.
        q = _QUANTITIES.get(value) if type(value) is str else None
        if q is None:
            q = Quantity.parse(value, where=f"{where}: {path}.{key}")
            if type(value) is str:
                if len(_QUANTITIES) >= _QUANTITIES_KEPT:
                    _QUANTITIES.clear()
                _QUANTITIES[value] = q
        out[key] = q
    return out


_QUANTITIES: dict[str, Quantity] = {}
_QUANTITIES_KEPT = 4096


def _validate_requirements(
    requests: Mapping[str, Quantity], limits: Mapping[str, Quantity], path: str, where: str
) -> None:
    """The parts of ValidateContainerResourceRequirements that shape what the managers see."""
    for kind, values in (("limits", limits), ("requests", requests)):
        for resource, quantity in values.items():
            problem, integer, page = _name_facts(resource)
            if problem is not None:
                raise InvalidInputError(f"{where}: {path}.{kind}.{resource}: {problem}")
            if quantity.sign() < 0:
                raise InvalidInputError(f"{where}: {path}.{kind}.{resource}: {quantity} must be greater than or "
                                        "equal to 0")
            if integer and quantity.as_int64() is None:
                raise InvalidInputError(f"{where}: {path}.{kind}.{resource}: {quantity} must be an integer "
                                        "(extended resources are counted)")
            if page and quantity.value() % page:
                # validateResourceQuantityHugePageValue: whole pages only.
                raise InvalidInputError(
                    f"{where}: {path}.{kind}.{resource}: {quantity} is not positive integer multiple of "
                    f"{resource} (hugepages are requested in whole pages)"
                )
    for resource, request in requests.items():
        limit = limits.get(resource)
        if limit is None:
            if not is_overcommit_allowed(resource):
                raise InvalidInputError(
                    f"{where}: {path}.limits: Limit must be set for non overcommitable resources "
                    f"({resource} has a request of {request} but no limit; set limits.{resource} equal to it)"
                )
            continue
        if request != limit and not is_overcommit_allowed(resource):
            raise InvalidInputError(f"{where}: {path}.requests.{resource}: {request} must be equal to {resource} "
                                    f"limit of {limit}")
        if request > limit:
            raise InvalidInputError(f"{where}: {path}.requests.{resource}: {request} must be less than or equal "
                                    f"to {resource} limit of {limit}")
    if any(_name_facts(n)[2] for n in (*requests, *limits)) and not (set(requests) | set(limits)) & {
            RESOURCE_CPU, RESOURCE_MEMORY}:
        raise InvalidInputError(f"{where}: {path}: HugePages require cpu or memory (add a cpu or memory request)")


# Per resource name: (what is wrong with it as a container resource name, or None; is it counted in
# integers; its hugepage size in bytes, 0 for other resources). Every pod read asks for its names;
# the answers depend on the name alone. Bounded: emptied when full.
_NAME_FACTS: dict[str, tuple[str | None, bool, int]] = {}
_NAME_FACTS_KEPT = 4096


def _name_facts(resource: str) -> tuple[str | None, bool, int]:
    facts = _NAME_FACTS.get(resource)
    if facts is None:
        problem = _resource_name_problem(resource)
        page = 0
        if problem is None and is_hugepage_resource_name(resource):
            page = hugepage_size_from_resource_name(resource).value()
        facts = (problem, problem is None and is_integer_resource_name(resource), page)
        if len(_NAME_FACTS) >= _NAME_FACTS_KEPT:
            _NAME_FACTS.clear()
        _NAME_FACTS[resource] = facts
    return facts


def _resource_name_problem(resource: str) -> str | None:
    """validateContainerResourceName: what is wrong with the name, None when nothing is."""
    if not is_qualified_name(resource):
        return f"{resource!r} is not a valid resource name"
    if "/" not in resource:
        if resource in _STANDARD_CONTAINER_RESOURCES:
            return None
        if is_hugepage_resource_name(resource):
            size = hugepage_size_from_resource_name(resource)
            if size.sign() <= 0:
                return f"{resource!r}: the hugepage size must be positive"
            return None
        return (f"{resource!r} must be a standard resource for containers (cpu, memory, "
                "ephemeral-storage, hugepages-<size>) or an extended resource like example.com/device")
    if not is_native_resource_name(resource) and not is_extended_resource_name(resource):
        return f"{resource!r} doesn't follow extended resource name standard"
    return None


# ---- small field readers ---------------------------------------------------------------------------


def _type_name(obj: object) -> str:
    if obj is None:
        return "nothing"
    return {dict: "a mapping", list: "a list", str: "a string", bool: "a boolean"}.get(
        type(obj), type(obj).__name__
    )


def _mapping(
    obj: object, where: str, path: str, *, required: bool = False, what: str = ""
) -> Mapping[str, Any]:
    if obj is None:
        if required:
            raise InvalidInputError(f"{where}: {path}: missing{' ' + what if what else ''} (expected a mapping)")
        return {}
    if type(obj) is not dict and not isinstance(obj, Mapping):  # a plain dict without the ABC's check
        raise InvalidInputError(f"{where}: {path}: expected a mapping, got {_type_name(obj)}")
    return obj


def _optional_str(obj: object, where: str, path: str) -> str | None:
    if obj is None:
        return None
    if not isinstance(obj, str):
        raise InvalidInputError(f"{where}: {path}: expected a string, got {_type_name(obj)} {obj!r}")
    return obj


def _namespace(metadata: Mapping[str, Any], where: str, path: str) -> str:
    return _optional_str(metadata.get("namespace"), where, f"{path}.namespace") or "default"


def _pod_name(metadata: Mapping[str, Any], where: str) -> str:
    name = _optional_str(metadata.get("name"), where, "metadata.name")
    if name:
        return name
    generate = _optional_str(metadata.get("generateName"), where, "metadata.generateName")
    if generate:
        return generate + "0"  # deterministic stand-in for the API server's random suffix
    raise InvalidInputError(f"{where}: metadata.name: a Pod needs a name (or metadata.generateName)")


def check_names(pod: Pod, where: str, spec_path: str, name_path: str = "metadata.name") -> None:
    """The names the API server's ValidatePodCreate checks (and the kubelet, reading a static pod): the pod's
    a DNS-1123 subdomain, its namespace's and each container's a DNS-1123 label.
    A manifest's only: the pod record read back holds what passed here. Decided: refused, not read, since
    the uid is derived from namespace/name (pod "a/b" in "x" and pod "b" in "x/a" were one pod) and names
    reach the terminal, the logs and PodResources as written (a newline forged a log line)."""
    if not is_dns1123_subdomain(pod.name):
        raise InvalidInputError(f"{where}: {name_path}: invalid pod name {quote(pod.name)}: expected "
                                f"{_SUBDOMAIN_RULE}, as the API server requires; rename it")
    if not _is_label(pod.namespace):
        raise InvalidInputError(f"{where}: metadata.namespace: invalid namespace {quote(pod.namespace)}: expected "
                                f"{_LABEL_RULE}, as the API server requires; correct it")
    for member, containers in (("initContainers", pod.init_containers), ("containers", pod.containers)):
        for i, c in enumerate(containers):  # (a name used twice is refused where the pod is built)
            if not _is_label(c.name):
                raise InvalidInputError(f"{where}: {spec_path}.{member}[{i}].name: invalid container name "
                                        f"{quote(c.name)}: expected {_LABEL_RULE}, as the API server requires; "
                                        "rename it")


def _is_label(value: str) -> bool:
    """validation.IsDNS1123Label (a namespace, a container's name): the DRA names' check, one rule."""
    return dns_label_problem(value) is None
