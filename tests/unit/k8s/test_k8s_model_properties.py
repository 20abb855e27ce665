"""Properties of the pure Kubernetes model: manifest round trips and the two QoS formulations."""

from __future__ import annotations

from typing import Any

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from numalign.k8s.manifest import pods_from_yaml
from numalign.k8s.pod import Container, Pod
from numalign.k8s.qos import QOSClass, compute_pod_qos
from numalign.k8s.quantity import Quantity, QuantityFormat
from numalign.k8s.requests import container_requests

_cpu = st.integers(min_value=0, max_value=4000).map(Quantity.from_milli)
_memory = st.integers(min_value=0, max_value=8).map(lambda n: Quantity.from_int(n * 2**28, QuantityFormat.BINARY_SI))
_gpu = st.integers(min_value=0, max_value=4).map(Quantity.from_int)


@st.composite
def resources(draw: st.DrawFn) -> tuple[dict[str, Quantity], dict[str, Quantity]]:
    """Valid requirements: request <= limit for cpu/memory, request == limit for the extended resource."""
    requests: dict[str, Quantity] = {}
    limits: dict[str, Quantity] = {}
    for name, strategy in (("cpu", _cpu), ("memory", _memory)):
        mode = draw(st.sampled_from(["none", "request", "limit", "both", "equal"]))
        a, b = draw(strategy), draw(strategy)
        low, high = min(a, b), max(a, b)
        if mode in ("request", "both"):
            requests[name] = low
        if mode in ("limit", "both"):
            limits[name] = high
        if mode == "equal":
            requests[name] = limits[name] = high
    if draw(st.booleans()):
        requests["example.com/gpu"] = limits["example.com/gpu"] = draw(_gpu)
    return requests, limits


@st.composite
def pods(draw: st.DrawFn) -> Pod:
    def container(i: int, is_init: bool) -> Container:
        requests, limits = draw(resources())
        sidecar = is_init and draw(st.booleans())
        return Container(
            name=f"{'i' if is_init else 'c'}{i}", requests=requests, limits=limits,
            is_init=is_init, restart_policy="Always" if sidecar else None,
        )

    return Pod(
        name="p",
        namespace="ns",
        uid="uid-1",
        init_containers=tuple(container(i, True) for i in range(draw(st.integers(0, 2)))),
        containers=tuple(container(i, False) for i in range(draw(st.integers(1, 3)))),
    )


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
@given(pods())
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
@given(pods())
def test_classic_and_per_container_qos_agree_on_valid_pods(pod: Pod) -> None:
    assert compute_pod_qos(pod) is _per_container_qos(pod)
