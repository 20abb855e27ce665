"""Properties of the pure Kubernetes model: manifest round trips and the two QoS formulations."""

from __future__ import annotations

from typing import Any

import yaml
from hypothesis import given, settings
from support.strategies import manifest_pods

from numalign.k8s.manifest import pods_from_yaml
from numalign.k8s.pod import Container, Pod
from numalign.k8s.qos import QOSClass, compute_pod_qos
from numalign.k8s.quantity import Quantity
from numalign.k8s.requests import container_requests


def _manifest(pod: Pod) -> dict[str, Any]:
    def ctr(c: Container) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": c.name,
            "resources": {
                "requests": {k: str(v) for k, v in c.requests.items()},
                "limits": {k: str(v) for k, v in c.limits.items()},
            },
        }
        if c.restart_policy:
            out["restartPolicy"] = c.restart_policy
        return out

    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": pod.name, "namespace": pod.namespace, "uid": pod.uid},
        "spec": {
            "initContainers": [ctr(c) for c in pod.init_containers],
            "containers": [ctr(c) for c in pod.containers],
        },
    }


@settings(max_examples=100)
@given(manifest_pods())
def test_manifest_round_trip_applies_only_defaulting(pod: Pod) -> None:
    [back] = pods_from_yaml(yaml.safe_dump(_manifest(pod)), "gen.yaml")
    assert (back.name, back.namespace, back.uid) == (pod.name, pod.namespace, pod.uid)
    for got, want in zip(back.all_containers(), pod.all_containers(), strict=True):
        assert (got.name, got.is_init, got.is_sidecar) == (want.name, want.is_init, want.is_sidecar)
        assert dict(got.limits) == dict(want.limits)
        assert dict(got.requests) == container_requests(want)


def _per_container_qos(pod: Pod) -> QOSClass:
    """The newest upstream form: class each container, then combine."""
    classes = set()
    for c in pod.all_containers():
        requests = container_requests(c)
        names = [n for n in ("cpu", "memory") if not requests.get(n, Quantity(0)).is_zero()
                 or not c.limits.get(n, Quantity(0)).is_zero()]
        if not names:
            classes.add(QOSClass.BEST_EFFORT)
        elif all(
            n in c.limits and not c.limits[n].is_zero() and requests.get(n) == c.limits[n] for n in ("cpu", "memory")
        ):
            classes.add(QOSClass.GUARANTEED)
        else:
            classes.add(QOSClass.BURSTABLE)
    if len(classes) == 1:
        return classes.pop()
    return QOSClass.BURSTABLE


@settings(max_examples=200)
@given(manifest_pods())
def test_classic_and_per_container_qos_agree_on_valid_pods(pod: Pod) -> None:
    assert compute_pod_qos(pod) is _per_container_qos(pod)
