"""Misspelt fields of pod manifests are named (k8s/podfields.py): a typo must not silently change the answer."""

from __future__ import annotations

from pathlib import Path

import pytest

from numalign.cli.main import main
from numalign.k8s.documents import parse_documents
from numalign.k8s.podfields import MAX_WARNINGS, unknown_pod_field_warnings

POD = """apiVersion: v1
kind: Pod
metadata: {name: p, namespace: ml}
spec:
  containers:
  - name: c
    resource:
      limits: {cpu: "2", memory: 4Gi}
"""


def _warnings(text: str) -> list[str]:
    return unknown_pod_field_warnings(parse_documents(text, "p.yaml", "pods"), "p.yaml")


def test_a_misspelt_resources_is_named_with_the_field_meant() -> None:
    assert _warnings(POD) == [
        'p.yaml: document 1: Pod ml/p: unknown field "spec.containers[0].resource" (ignored, as the kubelet ignores '
        'it; kubectl apply refuses it, so the answer is for the pod without it); did you mean "resources"?']


@pytest.mark.parametrize(("text", "field", "meant"), [
    ("kind: Pod\nmetadata: {name: p}\nspec:\n  containers: [{name: c, resources: {limit: {cpu: 1}}}]\n",
     "spec.containers[0].resources.limit", "limits"),
    ("kind: Pod\nmetadata: {name: p}\nspec:\n  initcontainers: [{name: i}]\n  containers: [{name: c}]\n",
     "spec.initcontainers", "initContainers"),
    ("kind: Deployment\nmetadata: {name: d}\nspec:\n  template:\n    spec:\n      containers:\n"
     "      - {name: c, resources: {requets: {cpu: 1}}}\n", "spec.template.spec.containers[0].resources.requets",
     "requests"),
    ("kind: CronJob\nmetadata: {name: j}\nspec:\n  jobTemplate:\n    spec:\n      template:\n        spec:\n"
     "          containers: [{name: c, imagePullPolicy: Always, volumeMount: []}]\n",
     "spec.jobTemplate.spec.template.spec.containers[0].volumeMount", "volumeMounts"),
    ("kind: List\nitems:\n- kind: Pod\n  metadata: {name: p}\n  spec: {containers: [{name: c}], nodeselector: {}}\n",
     "spec.nodeselector", "nodeSelector"),
])
def test_every_kind_numalign_reads_is_walked(text: str, field: str, meant: str) -> None:
    (line,) = _warnings(text)
    assert f'unknown field "{field}"' in line and line.endswith(f'did you mean "{meant}"?')


def test_real_fields_of_every_level_are_not_named() -> None:
    text = """kind: Pod
metadata: {name: p}
spec:
  resources: {limits: {cpu: "4"}}
  resourceClaims: [{name: g, resourceClaimName: gpus}]
  schedulingGates: [{name: wait}]
  hostUsers: false
  os: {name: linux}
  initContainers:
  - {name: s, restartPolicy: Always, resizePolicy: [], startupProbe: {exec: {command: [true]}}}
  containers:
  - name: c
    image: i
    resources: {limits: {cpu: "2"}, requests: {cpu: "2"}, claims: [{name: g}]}
    securityContext: {privileged: false}
    terminationMessagePolicy: FallbackToLogsOnError
  ephemeralContainers: [{name: e, targetContainerName: c}]
"""
    assert _warnings(text) == []


def test_other_kinds_and_malformed_documents_are_left_to_the_reader() -> None:
    text = ("kind: Service\nspec: {selectr: {}}\n---\nkind: Pod\nspec: 3\n---\n- a\n---\n"
            "kind: Pod\nspec:\n  containers: 3\n")
    assert _warnings(text) == []


def test_a_file_of_many_typos_is_bounded() -> None:
    pods = "\n---\n".join(POD.replace("name: p,", f"name: p{i},") for i in range(MAX_WARNINGS + 5))
    lines = _warnings(pods)
    assert len(lines) == MAX_WARNINGS + 1 and lines[-1] == "p.yaml: 5 more unknown field(s) not listed"


def test_admit_warns_on_stderr_and_still_answers(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "pod.yaml"
    path.write_text(POD)
    assert main(["admit", str(path)]) == 0
    out, err = capsys.readouterr()
    assert "1/1 pods admitted" in out
    assert err.splitlines() == [
        f'warning: {path}: document 1: Pod ml/p: unknown field "spec.containers[0].resource" (ignored, as the kubelet '
        'ignores it; kubectl apply refuses it, so the answer is for the pod without it); did you mean "resources"?']


def test_the_other_readers_of_pod_files_say_it_too(tmp_path: Path) -> None:
    # nrt and run read through load_pods(warn=...); simulate and capacity through load_workload's notes.
    from numalign.adapters.textfiles import load_pods
    from numalign.cluster.workload import load_workload

    path = tmp_path / "pod.yaml"
    path.write_text(POD)
    said: list[str] = []
    (pod,) = load_pods(path, warn=said.append)
    assert pod.name == "p" and len(said) == 1 and 'did you mean "resources"?' in said[0]
    notes: list[str] = []
    load_workload([path], notes=notes)
    assert [n for n in notes if "unknown field" in n] == said
    assert load_pods(path) and load_workload([path]).groups  # without warn or notes: read as before, silently
