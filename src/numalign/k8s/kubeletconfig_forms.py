"""The forms a KubeletConfiguration is held in, unwrapped to the configuration itself (pure: text in).

Platform engineers rarely hold /var/lib/kubelet/config.yaml; they hold what their platform keeps:
- OpenShift's KubeletConfig custom resource (machineconfiguration.openshift.io/v1): the configuration
  under spec.kubeletConfig, often without apiVersion/kind (the Machine Config Operator merges it over
  its own rendered template, which is not in the resource: fields it omits take the kubelet's defaults
  here, and a note says so);
- kubeadm's kube-system/kubelet-config ConfigMap: the configuration as text under data.kubelet;
- a multi-document file (a kustomize or helm output, a `kubectl get -o yaml` of several objects): the
  one KubeletConfiguration document among them, named in a note.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

from numalign.errors import ConfigError
from numalign.k8s.documents import parse_documents
from numalign.k8s.kubeletconfig import API_VERSION, EXPECTED_CONFIG, KIND

OPENSHIFT_API_GROUP: Final = "machineconfiguration.openshift.io"
OPENSHIFT_KIND: Final = "KubeletConfig"
KUBEADM_CONFIGMAP_KEY: Final = "kubelet"

FORMS: Final = (
    f"a KubeletConfiguration ({API_VERSION}), an OpenShift {OPENSHIFT_KIND} ({OPENSHIFT_API_GROUP}/v1, "
    f"spec.kubeletConfig) or kubeadm's kube-system/kubelet-config ConfigMap (data.{KUBEADM_CONFIGMAP_KEY})"
)


def _describe(doc: object) -> str:
    if not isinstance(doc, Mapping):
        return type(doc).__name__
    name = (doc.get("metadata") or {}).get("name") if isinstance(doc.get("metadata"), Mapping) else None
    return f"{doc.get('kind')!s}" + (f" {name}" if name else "")


def _is_configuration(doc: object) -> bool:
    return isinstance(doc, Mapping) and doc.get("kind") == KIND and doc.get("apiVersion") == API_VERSION


def _is_openshift_cr(doc: object) -> bool:
    return (
        isinstance(doc, Mapping)
        and doc.get("kind") == OPENSHIFT_KIND
        and str(doc.get("apiVersion", "")).startswith(OPENSHIFT_API_GROUP + "/")
    )


def _is_kubeadm_configmap(doc: object) -> bool:
    if not (isinstance(doc, Mapping) and doc.get("kind") == "ConfigMap" and doc.get("apiVersion") == "v1"):
        return False
    data = doc.get("data")
    return isinstance(data, Mapping) and KUBEADM_CONFIGMAP_KEY in data


def _candidate(doc: object) -> bool:
    return _is_configuration(doc) or _is_openshift_cr(doc) or _is_kubeadm_configmap(doc)


def _unwrap(doc: Mapping[str, Any], source: str, note: Callable[[str], None]) -> Mapping[str, Any]:
    if _is_configuration(doc):
        return doc
    if _is_openshift_cr(doc):
        spec = doc.get("spec")
        inner = spec.get("kubeletConfig") if isinstance(spec, Mapping) else None
        if not isinstance(inner, Mapping):
            raise ConfigError(
                f"{source}: {_describe(doc)}: spec.kubeletConfig is missing or not a mapping; expected the "
                "KubeletConfiguration fields under spec.kubeletConfig (as `oc get kubeletconfig NAME -o yaml` "
                "shows them)"
            )
        note(
            f"{source}: read spec.kubeletConfig of the OpenShift {_describe(doc)}; fields it leaves out take the "
            "kubelet's defaults here, not the Machine Config Operator's template (for the node's exact "
            "configuration pass /etc/kubernetes/kubelet.conf from the node)"
        )
        return {"apiVersion": API_VERSION, "kind": KIND, **inner}
    text = doc["data"][KUBEADM_CONFIGMAP_KEY]
    where = f"{source}: ConfigMap data.{KUBEADM_CONFIGMAP_KEY}"
    if not isinstance(text, str):
        raise ConfigError(f"{where}: expected the KubeletConfiguration as text (a YAML string), got "
                          f"{type(text).__name__}")
    inner_docs = [d for d in parse_documents(text, where, EXPECTED_CONFIG, ConfigError) if d is not None]
    if len(inner_docs) != 1 or not _is_configuration(inner_docs[0]):
        raise ConfigError(f"{where}: expected one KubeletConfiguration (apiVersion: {API_VERSION}, kind: {KIND}), "
                          f"got {', '.join(_describe(d) for d in inner_docs) or 'nothing'}")
    note(f"{source}: read the KubeletConfiguration under data.{KUBEADM_CONFIGMAP_KEY} of the ConfigMap "
         f"{_describe(doc).removeprefix('ConfigMap ')}")
    result: Mapping[str, Any] = inner_docs[0]
    return result


def kubelet_config_mapping(text: str, source: str, note: Callable[[str], None]) -> Mapping[str, Any]:
    """The KubeletConfiguration mapping held in `text`, in any of FORMS; `note` hears which document
    and which form was read (stderr in the CLI). A file holding none, or more than one, is one
    ConfigError naming what it holds."""
    docs = [d for d in parse_documents(text, source, EXPECTED_CONFIG, ConfigError) if d is not None]
    if len(docs) == 1 and isinstance(docs[0], Mapping) and docs[0].get("kind") == "List":
        items = docs[0].get("items")
        docs = list(items) if isinstance(items, list) else []
    found = [(i, d) for i, d in enumerate(docs, 1) if _candidate(d)]
    if not found:
        if len(docs) == 1 and isinstance(docs[0], Mapping):
            got = f"apiVersion {docs[0].get('apiVersion')!r}, kind {docs[0].get('kind')!r}"
        else:
            got = f"{len(docs)} document(s): {', '.join(_describe(d) for d in docs[:5]) or 'nothing'}"
        raise ConfigError(
            f"{source}: not a KubeletConfiguration: got {got}; expected {FORMS}; pass the kubelet's config "
            "file (on a node usually /var/lib/kubelet/config.yaml; on OpenShift "
            "/etc/kubernetes/kubelet.conf, which KubeletConfigs and PerformanceProfiles are rendered into)"
        )
    if len(found) > 1:
        raise ConfigError(
            f"{source}: {len(found)} kubelet configurations (documents "
            f"{', '.join(f'{i} ({_describe(d)})' for i, d in found)}); expected one: keep the one the node uses"
        )
    index, doc = found[0]
    if len(docs) > 1:
        note(f"{source}: read document {index} of {len(docs)} ({_describe(doc)}); the others are not kubelet "
             "configurations and are skipped")
    return _unwrap(doc, source, note)
