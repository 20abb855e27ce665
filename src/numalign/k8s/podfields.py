"""Misspelt fields in pod manifests: warnings, as `kubectl apply --validate=strict` would refuse them.

The pod reader (k8s/manifest.py) reads the fields numalign needs and ignores the rest, as the kubelet
decodes a static pod's manifest leniently. A misspelt `resources` (`resource:`) then silently makes a
Guaranteed pod BestEffort and `admit` answers "admitted": a wrong answer with nothing said. This walks
the documents before they are read and names every key that is no field of a Pod's spec, a container
or its resources (k8s.io/api core/v1 up to 1.37, so a real field is never named), with the field most
likely meant. Decided: a warning, not an error, as for the KubeletConfiguration's unknown fields
(kubeletconfig_read.unknown_field_warnings): the kubelet itself ignores them.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterator, Mapping
from typing import Any, Final

# core/v1 PodSpec, Container (and EphemeralContainer's one more) and ResourceRequirements, 1.33-1.37.
POD_SPEC_FIELDS: Final = frozenset({
    "volumes", "initContainers", "containers", "ephemeralContainers", "restartPolicy",
    "terminationGracePeriodSeconds", "activeDeadlineSeconds", "dnsPolicy", "nodeSelector",
    "serviceAccountName", "serviceAccount", "automountServiceAccountToken", "nodeName", "hostNetwork",
    "hostPID", "hostIPC", "shareProcessNamespace", "securityContext", "imagePullSecrets", "hostname",
    "subdomain", "affinity", "schedulerName", "tolerations", "hostAliases", "priorityClassName", "priority",
    "dnsConfig", "readinessGates", "runtimeClassName", "enableServiceLinks", "preemptionPolicy", "overhead",
    "topologySpreadConstraints", "setHostnameAsFQDN", "os", "hostUsers", "schedulingGates", "resourceClaims",
    "resources", "hostnameOverride", "workloadRef",
})
CONTAINER_FIELDS: Final = frozenset({
    "name", "image", "command", "args", "workingDir", "ports", "envFrom", "env", "resources", "resizePolicy",
    "restartPolicy", "restartPolicyRules", "volumeMounts", "volumeDevices", "livenessProbe", "readinessProbe",
    "startupProbe", "lifecycle", "terminationMessagePath", "terminationMessagePolicy", "imagePullPolicy",
    "securityContext", "stdin", "stdinOnce", "tty", "targetContainerName",
})
RESOURCES_FIELDS: Final = frozenset({"limits", "requests", "claims"})

# Where each kind keeps its pod template's spec (the kinds k8s/manifest.py reads).
_TEMPLATE_PATHS: Final = {
    "Pod": ("spec",),
    "PodTemplate": ("template", "spec"),
    "Deployment": ("spec", "template", "spec"),
    "StatefulSet": ("spec", "template", "spec"),
    "ReplicaSet": ("spec", "template", "spec"),
    "ReplicationController": ("spec", "template", "spec"),
    "DaemonSet": ("spec", "template", "spec"),
    "Job": ("spec", "template", "spec"),
    "CronJob": ("spec", "jobTemplate", "spec", "template", "spec"),
}
MAX_WARNINGS: Final = 20  # per file: a file of a thousand copies of one typo needs a few lines, not a thousand


def unknown_pod_field_warnings(docs: list[Any], source: str) -> list[str]:
    """One line per unknown key, naming the document, the object and the field path, with the field
    most likely meant; at most MAX_WARNINGS, then how many more."""
    out: list[str] = []
    for index, doc in enumerate(docs, start=1):
        for obj in _objects(doc):
            out.extend(f"{source}: document {index}: {line}" for line in _object_warnings(obj))
    if len(out) > MAX_WARNINGS:
        out = [*out[:MAX_WARNINGS], f"{source}: {len(out) - MAX_WARNINGS} more unknown field(s) not listed"]
    return out


def _objects(doc: Any) -> Iterator[Mapping[str, Any]]:
    if not isinstance(doc, Mapping):
        return
    kind = doc.get("kind")
    if isinstance(kind, str) and kind.endswith("List") and isinstance(doc.get("items"), list):
        for item in doc["items"]:
            if isinstance(item, Mapping):
                yield item
    else:
        yield doc


def _object_warnings(obj: Mapping[str, Any]) -> Iterator[str]:
    kind = obj.get("kind")
    path = _TEMPLATE_PATHS.get(kind) if isinstance(kind, str) else None
    if path is None:
        return
    spec: Any = obj
    for key in path:
        spec = spec.get(key) if isinstance(spec, Mapping) else None
    if not isinstance(spec, Mapping):
        return
    meta = obj.get("metadata")
    name = meta.get("name") if isinstance(meta, Mapping) else None
    namespace = meta.get("namespace") if isinstance(meta, Mapping) else None
    who = f"{kind} {namespace + '/' if isinstance(namespace, str) else ''}{name if isinstance(name, str) else ''}"
    prefix = ".".join(path)
    for field, known in _unknown(spec, prefix, POD_SPEC_FIELDS):
        yield _line(who, field, known)
    for group in ("initContainers", "containers", "ephemeralContainers"):
        containers = spec.get(group)
        if not isinstance(containers, list):
            continue
        for i, container in enumerate(containers):
            if not isinstance(container, Mapping):
                continue
            where = f"{prefix}.{group}[{i}]"
            for field, known in _unknown(container, where, CONTAINER_FIELDS):
                yield _line(who, field, known)
            resources = container.get("resources")
            if isinstance(resources, Mapping):
                for field, known in _unknown(resources, f"{where}.resources", RESOURCES_FIELDS):
                    yield _line(who, field, known)
    resources = spec.get("resources")
    if isinstance(resources, Mapping):
        for field, known in _unknown(resources, f"{prefix}.resources", RESOURCES_FIELDS):
            yield _line(who, field, known)


def _unknown(obj: Mapping[str, Any], where: str, fields: frozenset[str]) -> Iterator[tuple[str, frozenset[str]]]:
    for key in obj:
        if str(key) not in fields:
            yield f"{where}.{key}", fields


def _line(who: str, field: str, known: frozenset[str]) -> str:
    key = field.rsplit(".", 1)[1]
    by_lower = {f.lower(): f for f in known}
    guess = by_lower.get(key.lower()) or next(iter(difflib.get_close_matches(key, sorted(known), n=1, cutoff=0.7)),
                                              None)
    hint = f'; did you mean "{guess}"?' if guess else ""
    return (f'{who}: unknown field "{field}" (ignored, as the kubelet ignores it; kubectl apply refuses it, '
            f"so the answer is for the pod without it){hint}")
