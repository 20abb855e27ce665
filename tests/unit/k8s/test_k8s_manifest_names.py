"""A manifest's pod, namespace and container names are checked as the API server checks them
(ValidatePodCreate): one line naming the field, the value (escaped) and the rule."""

from __future__ import annotations

import json

import pytest

from numalign.errors import InvalidInputError
from numalign.k8s.manifest import pods_from_yaml


def _pod(name: object, namespace: object = "default", containers: tuple[object, ...] = ("main",),
         init: tuple[object, ...] = ()) -> str:
    spec: dict[str, object] = {"containers": [{"name": c, "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}
                                              for c in containers]}
    if init:
        spec["initContainers"] = [{"name": c} for c in init]
    return json.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace},
                       "spec": spec})


@pytest.mark.parametrize(("text", "field", "shown"), [
    (_pod("a/b", "x"), "metadata.name", "'a/b'"),
    (_pod("Foo_Bar"), "metadata.name", "'Foo_Bar'"),
    (_pod("ev\"il\n# HELP fake"), "metadata.name", "'ev\"il\\n# HELP fake'"),
    (_pod("p\u202e\x1b[31mred"), "metadata.name", "'p\\u202e\\x1b[31mred'"),
    (_pod("a" * 254), "metadata.name", "(254 characters)"),
    (_pod("b", "x/a"), "metadata.namespace", "'x/a'"),
    (_pod("b", "a" * 64), "metadata.namespace", repr("a" * 64)),
    (_pod("b", "Prod"), "metadata.namespace", "'Prod'"),
    (_pod("b", containers=("c\x00\n d",)), "spec.containers[0].name", "'c\\x00\\n d'"),
    (_pod("b", init=("Setup",)), "spec.initContainers[0].name", "'Setup'"),
])
def test_an_invalid_name_is_one_line_naming_field_and_value(text: str, field: str, shown: str) -> None:
    with pytest.raises(InvalidInputError) as err:
        pods_from_yaml(text, "pod.yaml")
    message = str(err.value)
    assert f"pod.yaml: document 1: {field}: " in message
    assert shown in message
    assert "\n" not in message and "\x1b" not in message and "\u202e" not in message
    assert "RFC 1123" in message


def test_pods_that_shared_a_uid_through_a_slash_are_refused_not_merged() -> None:
    # Before: pod "a/b" in namespace "x" and pod "b" in namespace "x/a" were one uid (x/a/b).
    for text in (_pod("a/b", "x"), _pod("b", "x/a")):
        with pytest.raises(InvalidInputError):
            pods_from_yaml(text, "pod.yaml")


def test_valid_names_read_as_before() -> None:
    longest = ".".join(["a" * 63] * 4)[:253]
    pods = pods_from_yaml("\n---\n".join([
        _pod("web-0"), _pod("db.prod.example", "team-a"), _pod(longest, "a" * 63),
        _pod("x", containers=("app", "sidecar-1"), init=("init",)),
    ]), "pods.yaml")
    assert [p.name for p in pods] == ["web-0", "db.prod.example", longest, "x"]
    assert pods[2].namespace == "a" * 63


def test_a_workload_name_that_makes_invalid_pod_names_is_refused() -> None:
    deploy = json.dumps({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "Web_App"},
                         "spec": {"replicas": 2, "template": {"spec": {"containers": [{"name": "main"}]}}}})
    with pytest.raises(InvalidInputError, match=r"metadata.name \(the pods' names: NAME-0, NAME-1, \.\.\.\): "
                                                r"invalid pod name 'Web_App-0'"):
        pods_from_yaml(deploy, "deploy.yaml", expand_replicas=True)
