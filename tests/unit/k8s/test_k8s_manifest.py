"""Manifest reading: kinds, defaulting, identity, errors that name file, document and field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from numalign.adapters.textfiles import load_pods
from numalign.errors import InvalidInputError
from numalign.k8s.manifest import pod_from_dict, pod_uid, pods_from_object, pods_from_yaml
from numalign.k8s.qos import QOSClass, get_pod_qos
from numalign.k8s.quantity import Quantity
from numalign.k8s.requests import pod_requests

POD = """
apiVersion: v1
kind: Pod
metadata:
  name: web
  namespace: prod
spec:
  initContainers:
  - name: setup
    resources:
      requests: {cpu: "2", memory: 1Gi}
  - name: proxy
    restartPolicy: Always
    resources:
      limits: {cpu: 500m, memory: 100Mi}
  containers:
  - name: app
    resources:
      requests: {cpu: 1, memory: 0.5Gi}
      limits: {cpu: 2, memory: 1Gi, nvidia.com/gpu: 1}
  overhead: {cpu: 100m}
"""


def test_single_pod_with_sidecar_and_defaulting() -> None:
    [pod] = pods_from_yaml(POD, "pod.yaml")
    assert pod.key == "prod/web"
    assert pod.uid == pod_uid("prod", "web")
    assert pod.source == "pod.yaml: document 1"
    setup, proxy = pod.init_containers
    assert setup.is_init and not setup.is_sidecar
    assert proxy.is_sidecar and proxy.restart_policy == "Always"
    # requests default to limits per resource
    assert proxy.requests == {"cpu": Quantity.parse("500m"), "memory": Quantity.parse("100Mi")}
    app = pod.containers[0]
    assert app.requests["nvidia.com/gpu"] == Quantity.parse("1")
    assert app.requests["cpu"] == Quantity.parse("1")
    assert app.requests["memory"] == Quantity.parse("512Mi")
    assert pod.overhead == {"cpu": Quantity.parse("100m")}
    assert get_pod_qos(pod) is QOSClass.BURSTABLE
    # max(app 1 + sidecar 0.5, setup 2 which runs before the sidecar starts) + overhead 0.1
    assert pod_requests(pod)["cpu"] == Quantity.parse("2100m")


def test_uid_is_stable_and_explicit_uid_wins() -> None:
    text = "kind: Pod\nmetadata: {name: a}\nspec: {containers: [{name: c}]}\n"
    first = pods_from_yaml(text)[0]
    assert first.uid == pods_from_yaml(text)[0].uid == pod_uid("default", "a")
    assert first.namespace == "default"
    assert pod_uid("default", "a") != pod_uid("other", "a")
    explicit = pods_from_yaml("kind: Pod\nmetadata: {name: a, uid: abc-123}\nspec: {containers: [{name: c}]}\n")
    assert explicit[0].uid == "abc-123"


def test_multi_document_list_and_empty_documents() -> None:
    text = """
---
kind: Pod
metadata: {name: a}
spec: {containers: [{name: c, resources: {limits: {cpu: 1, memory: 1Gi}}}]}
---
---
apiVersion: v1
kind: List
items:
- kind: Pod
  metadata: {name: b}
  spec: {containers: [{name: c}]}
- kind: Deployment
  metadata: {name: dep, namespace: ns}
  spec:
    replicas: 3
    template:
      metadata: {labels: {app: x}}
      spec: {containers: [{name: c, resources: {requests: {cpu: 250m}}}]}
"""
    pods = pods_from_yaml(text, "all.yaml")
    assert [p.key for p in pods] == ["default/a", "default/b", "ns/dep-0"]
    assert get_pod_qos(pods[0]) is QOSClass.GUARANTEED
    assert pods[1].source == "all.yaml: document 3: items[0]"
    assert pods[2].uid == pod_uid("ns", "dep-0")
    expanded = pods_from_yaml(text, "all.yaml", expand_replicas=True)
    assert [p.name for p in expanded[2:]] == ["dep-0", "dep-1", "dep-2"]


@pytest.mark.parametrize(
    ("kind", "template_yaml"),
    [
        ("Deployment", "spec:\n  template:\n    spec: {containers: [{name: c}]}"),
        ("StatefulSet", "spec:\n  template:\n    spec: {containers: [{name: c}]}"),
        ("ReplicaSet", "spec:\n  template:\n    spec: {containers: [{name: c}]}"),
        ("DaemonSet", "spec:\n  template:\n    spec: {containers: [{name: c}]}"),
        ("Job", "spec:\n  template:\n    spec: {containers: [{name: c}]}"),
        ("ReplicationController", "spec:\n  template:\n    spec: {containers: [{name: c}]}"),
        ("CronJob", "spec:\n  jobTemplate:\n    spec:\n      template:\n        spec: {containers: [{name: c}]}"),
        ("PodTemplate", "template:\n  spec: {containers: [{name: c}]}"),
    ],
)
def test_workload_templates(kind: str, template_yaml: str) -> None:
    text = f"kind: {kind}\nmetadata: {{name: w, namespace: n}}\n{template_yaml}\n"
    [pod] = pods_from_yaml(text, "w.yaml")
    assert pod.key == "n/w-0"
    assert [c.name for c in pod.containers] == ["c"]


def test_json_inputs() -> None:
    pod = {"kind": "Pod", "metadata": {"name": "j"}, "spec": {"containers": [{"name": "c"}]}}
    assert [p.name for p in pods_from_yaml(json.dumps(pod), "p.json")] == ["j"]
    plist = {"kind": "PodList", "items": [pod, {**pod, "metadata": {"name": "k"}}]}
    assert [p.name for p in pods_from_yaml(json.dumps(plist, indent="\t"), "p.json")] == ["j", "k"]
    assert [p.name for p in pods_from_yaml(json.dumps([pod]), "p.json")] == ["j"]
    assert pod_from_dict(pod).name == "j"
    assert pods_from_object({"kind": "List"}, "x") == []


def test_status_qos_class_is_kept() -> None:
    text = "kind: Pod\nmetadata: {name: a}\nspec: {containers: [{name: c}]}\nstatus: {qosClass: Guaranteed}\n"
    [pod] = pods_from_yaml(text)
    assert pod.status_qos_class == "Guaranteed"
    assert get_pod_qos(pod) is QOSClass.GUARANTEED


def test_load_pods_from_file(tmp_path: Path) -> None:
    f = tmp_path / "pods.yaml"
    f.write_text(POD)
    [pod] = load_pods(f)
    assert pod.source == f"{f}: document 1"
    with pytest.raises(InvalidInputError, match="cannot read the manifest"):
        load_pods(tmp_path / "missing.yaml")


def _error(text: str) -> str:
    with pytest.raises(InvalidInputError) as info:
        pods_from_yaml(text, "bad.yaml")
    return str(info.value)


def test_bad_quantity_names_file_document_and_field() -> None:
    message = _error(
        "kind: Pod\nmetadata: {name: a}\nspec: {containers: [{name: c}]}\n---\nkind: Pod\nmetadata: {name: b}\n"
        "spec: {containers: [{name: c}, {name: d, resources: {requests: {cpu: 1 core}}}]}\n"
    )
    assert message.startswith("bad.yaml: document 2: spec.containers[1].resources.requests.cpu: invalid quantity")
    assert "'1 core'" in message


def test_bad_quantity_in_a_deployment_names_the_template_path() -> None:
    message = _error(
        "kind: Deployment\nmetadata: {name: d}\nspec:\n  template:\n    spec:\n      containers:\n"
        "      - name: c\n        resources: {limits: {memory: 1GB}}\n"
    )
    assert "bad.yaml: document 1: spec.template.spec.containers[0].resources.limits.memory" in message


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("- 1\n- 2\n", "expected a mapping"),
        ("just a string\n", "expected a mapping"),
        ("kind: Service\nmetadata: {name: s}\n", "unsupported kind 'Service'; supported kinds: Pod"),
        ("kind: Pod\nmetadata: {name: a}\nspec: {}\n", "spec.containers: a pod needs a non-empty list"),
        ("kind: Pod\nmetadata: {name: a}\n", "spec: missing"),
        ("kind: Pod\nspec: {containers: [{name: c}]}\n", "metadata.name: a Pod needs a name"),
        ("kind: Pod\nmetadata: {name: a}\nspec: {containers: [{}]}\n", "containers[0].name"),
        ("kind: Pod\nmetadata: {name: a}\nspec: {containers: [{name: c}, {name: c}]}\n", "duplicate container"),
        ("kind: Pod\nmetadata: {name: a}\nspec: {containers: [{name: c, resources: {requests: {cpu: -1}}}]}\n",
         "must be greater than or equal to 0"),
        ("kind: Pod\nmetadata: {name: a}\nspec: {containers: [{name: c, resources: "
         "{requests: {cpu: 2}, limits: {cpu: 1}}}]}\n", "must be less than or equal to cpu limit of 1"),
        ("kind: Pod\nmetadata: {name: a}\nspec: {containers: [{name: c, resources: "
         "{requests: {example.com/dev: 1}, limits: {example.com/dev: 2}}}]}\n",
         "must be equal to example.com/dev limit of 2"),
        ("kind: Pod\nmetadata: {name: a}\nspec: {containers: [{name: c, resources: "
         "{requests: {example.com/dev: 1}}}]}\n", "Limit must be set for non overcommitable resources"),
        ("kind: Pod\nmetadata: {name: a}\nspec: {containers: [{name: c, resources: "
         "{limits: {example.com/dev: 500m}}}]}\n", "must be an integer"),
        ("kind: Pod\nmetadata: {name: a}\nspec: {containers: [{name: c, resources: "
         "{limits: {hugepages-2Mi: 4Mi}}}]}\n", "HugePages require cpu or memory"),
        ("kind: Pod\nmetadata: {name: a}\nspec: {containers: [{name: c, resources: "
         "{limits: {gpu: 1}}}]}\n", "must be a standard resource for containers"),
        ("kind: Pod\nmetadata: {name: a}\nspec: {containers: [{name: c, resources: "
         "{limits: {memory: 1Gi, hugepages-2Mi: 3Mi}}}]}\n", "3Mi is not positive integer multiple of hugepages-2Mi"),
        ("kind: Pod\nmetadata: {name: a}\nspec: {containers: [{name: c, resources: "
         "{limits: {requests.example.com/gpu: 1}}}]}\n", "doesn't follow extended resource name standard"),
        ("kind: Pod\nmetadata: {name: a}\nspec: {containers: [{name: c, resources: []}]}\n",
         "resources: expected a mapping"),
        ("kind: Pod\nmetadata: {name: a}\nspec: {initContainers: [{name: i, restartPolicy: Sometimes}], "
         "containers: [{name: c}]}\n", "restartPolicy: unsupported value 'Sometimes'"),
        ("kind: Pod\nmetadata: {name: a}\nspec: {containers: [{name: c}]}\nstatus: {qosClass: Gold}\n",
         "unknown QoS class 'Gold'"),
        ("kind: Pod\nmetadata: {name: a\nspec: {}\n", "bad.yaml: line 3, column 5: "),
        ("kind: Deployment\nmetadata: {name: d}\nspec: {}\n", "spec.template: missing the Deployment's pod template"),
        ("kind: List\nitems: {a: 1}\n", "items: expected a list"),
        ("kind: List\nitems:\n- kind: Secret\n", "document 1: items[0]: kind: unsupported kind 'Secret'"),
        ("cpus: 4\nmemory: 1Gi\n", "kind: the document has no kind; expected a Pod, a List or a workload"),
    ],
)
def test_errors(text: str, expected: str) -> None:
    message = _error(text)
    assert message.startswith("bad.yaml")
    assert expected in message


def test_replicas_must_be_a_count() -> None:
    text = (
        "kind: Deployment\nmetadata: {name: d}\n"
        "spec: {replicas: many, template: {spec: {containers: [{name: c}]}}}\n"
    )
    assert len(pods_from_yaml(text)) == 1  # replicas are only read when expanding
    with pytest.raises(InvalidInputError, match=r"spec\.replicas: expected a non-negative integer"):
        pods_from_yaml(text, expand_replicas=True)
