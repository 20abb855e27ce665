"""QoS class (qos_test.go cases) and effective pod requests/limits with sidecars."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from support.strategies import sidecar_cpu_pods

from numalign.errors import InvalidInputError
from numalign.k8s.pod import Container, Pod
from numalign.k8s.qos import QOSClass, compute_pod_qos, get_pod_qos
from numalign.k8s.quantity import Quantity
from numalign.k8s.requests import container_requests, pod_limits, pod_requests, sum_resources


def rl(**values: str) -> dict[str, Quantity]:
    """A resource list; "__" in a keyword stands for "/" and "_" for "-" (nvidia__com/gpu...)."""
    return {k.replace("__", ".com/").replace("_", "-"): Quantity.parse(v) for k, v in values.items()}


def ctr(
    name: str,
    requests: dict[str, Quantity] | None = None,
    limits: dict[str, Quantity] | None = None,
    *,
    init: bool = False,
    sidecar: bool = False,
) -> Container:
    return Container(
        name=name,
        requests=requests or {},
        limits=limits or {},
        is_init=init or sidecar,
        restart_policy="Always" if sidecar else None,
    )


def pod(*containers: Container, overhead: dict[str, Quantity] | None = None, qos: str | None = None) -> Pod:
    return Pod(
        name="p",
        uid="u",
        init_containers=tuple(c for c in containers if c.is_init),
        containers=tuple(c for c in containers if not c.is_init),
        overhead=overhead or {},
        status_qos_class=qos,
    )


G = rl(cpu="100m", memory="100Mi")
GPU = rl(cpu="100m", memory="100Mi", nvidia__gpu="2")

QOS_CASES: list[tuple[str, Pod, QOSClass]] = [
    ("best-effort-no-resources", pod(ctr("a"), ctr("b")), QOSClass.BEST_EFFORT),
    ("best-effort-extended", pod(ctr("a", rl(nvidia__gpu="2"), rl(nvidia__gpu="2"))), QOSClass.BEST_EFFORT),
    ("best-effort-zero", pod(ctr("a", rl(cpu="0", memory="0"))), QOSClass.BEST_EFFORT),
    ("guaranteed", pod(ctr("a", G, G), ctr("b", G, G)), QOSClass.GUARANTEED),
    ("guaranteed-extended", pod(ctr("a", GPU, GPU)), QOSClass.GUARANTEED),
    ("guaranteed-limits-only", pod(ctr("a", None, rl(cpu="2", memory="1Gi"))), QOSClass.GUARANTEED),
    ("guaranteed-equal-units", pod(ctr("a", rl(cpu="1", memory="1Gi"), rl(cpu="1000m", memory="1024Mi"))),
     QOSClass.GUARANTEED),
    ("burstable-mixed", pod(ctr("a", G, G), ctr("b")), QOSClass.BURSTABLE),
    ("burstable-request-below-limit", pod(ctr("a", rl(cpu="100m", memory="100Mi"), rl(cpu="200m", memory="100Mi"))),
     QOSClass.BURSTABLE),
    ("burstable-no-memory-limit", pod(ctr("a", rl(cpu="100m", memory="100Mi"), rl(cpu="100m"))),
     QOSClass.BURSTABLE),
    ("burstable-requests-only", pod(ctr("a", rl(cpu="100m"))), QOSClass.BURSTABLE),
    ("burstable-1G-vs-1Gi", pod(ctr("a", rl(cpu="1", memory="1G"), rl(cpu="1", memory="1Gi"))),
     QOSClass.BURSTABLE),
    ("guaranteed-init", pod(ctr("i", G, G, init=True), ctr("a", G, G)), QOSClass.GUARANTEED),
    ("burstable-best-effort-init", pod(ctr("i", init=True), ctr("a", G, G)), QOSClass.BURSTABLE),
    ("burstable-sidecar-requests", pod(ctr("s", rl(cpu="1"), sidecar=True), ctr("a")), QOSClass.BURSTABLE),
    ("guaranteed-sidecar", pod(ctr("s", G, G, sidecar=True), ctr("a", G, G)), QOSClass.GUARANTEED),
    ("guaranteed-with-overhead", pod(ctr("a", G, G), overhead=rl(cpu="1", memory="1Gi")), QOSClass.GUARANTEED),
    ("guaranteed-hugepages", pod(ctr("a", rl(cpu="1", memory="1Gi", hugepages_2Mi="4Mi"),
                                     rl(cpu="1", memory="1Gi", hugepages_2Mi="4Mi"))), QOSClass.GUARANTEED),
    ("best-effort-hugepages-only", pod(ctr("a", rl(hugepages_2Mi="4Mi"), rl(hugepages_2Mi="4Mi"))),
     QOSClass.BEST_EFFORT),
]


@pytest.mark.parametrize(("case", "p", "expected"), QOS_CASES, ids=[c[0] for c in QOS_CASES])
def test_compute_pod_qos(case: str, p: Pod, expected: QOSClass) -> None:
    assert compute_pod_qos(p) is expected
    assert get_pod_qos(p) is expected


def test_status_qos_class_wins_and_is_checked() -> None:
    assert get_pod_qos(pod(ctr("a"), qos="Guaranteed")) is QOSClass.GUARANTEED
    with pytest.raises(InvalidInputError, match="unknown QoS class 'guaranteed'"):
        get_pod_qos(pod(ctr("a"), qos="guaranteed"))
    assert str(QOSClass.BEST_EFFORT) == "BestEffort"


def test_container_requests_default_to_limits() -> None:
    c = ctr("a", rl(cpu="1"), rl(cpu="2", memory="1Gi", nvidia__gpu="1"))
    assert container_requests(c) == rl(cpu="1", memory="1Gi", nvidia__gpu="1")


def test_pod_requests_apps_plus_sidecars_vs_init_peak() -> None:
    p = pod(
        ctr("init-1", rl(cpu="2", memory="1Gi"), init=True),
        ctr("sidecar", rl(cpu="500m", memory="100Mi"), sidecar=True),
        ctr("init-2", rl(cpu="1", memory="3Gi"), init=True),
        ctr("app-1", rl(cpu="1", memory="1Gi")),
        ctr("app-2", rl(cpu="250m")),
    )
    got = pod_requests(p)
    # cpu: max(1.25 + 0.5, 2, 0.5 + 1) = 2; memory: max(1Gi + 100Mi, 1Gi, 100Mi + 3Gi) = 3Gi + 100Mi
    assert got == rl(cpu="2", memory=str(Quantity.parse("3Gi") + Quantity.parse("100Mi")))


def test_sidecar_before_init_counts_in_init_peak() -> None:
    p = pod(
        ctr("sidecar", rl(cpu="3"), sidecar=True),
        ctr("init", rl(cpu="2"), init=True),
        ctr("app", rl(cpu="1")),
    )
    # init runs next to the sidecar: 3 + 2 = 5 > apps + sidecars = 4
    assert pod_requests(p) == rl(cpu="5")
    # the same init container *before* the sidecar only needs 2
    p2 = pod(ctr("init", rl(cpu="2"), init=True), ctr("sidecar", rl(cpu="3"), sidecar=True), ctr("app", rl(cpu="1")))
    assert pod_requests(p2) == rl(cpu="4")


def test_overhead() -> None:
    p = pod(ctr("a", rl(cpu="1"), rl(cpu="2")), overhead=rl(cpu="250m", memory="120Mi"))
    assert pod_requests(p) == rl(cpu="1250m", memory="120Mi")
    assert pod_requests(p, exclude_overhead=True) == rl(cpu="1")
    # Overhead only raises limits that exist: memory has no limit (unlimited), so it stays absent.
    assert pod_limits(p) == rl(cpu="2250m")
    assert pod_limits(p, exclude_overhead=True) == rl(cpu="2")


def test_zero_entries_are_absent() -> None:
    p = pod(ctr("a", rl(cpu="0", memory="1Gi"), rl(cpu="0", memory="1Gi")))
    assert pod_requests(p) == rl(memory="1Gi")
    assert pod_limits(p) == rl(memory="1Gi")
    assert sum_resources([rl(cpu="1"), rl(cpu="-1", memory="1")]) == rl(memory="1")


def test_limits_use_the_same_rule() -> None:
    p = pod(
        ctr("init", rl(nvidia__gpu="4"), rl(nvidia__gpu="4"), init=True),
        ctr("app", rl(nvidia__gpu="1"), rl(nvidia__gpu="1")),
        ctr("app2", rl(nvidia__gpu="1"), rl(nvidia__gpu="1")),
    )
    assert pod_limits(p) == rl(nvidia__gpu="4")
    assert pod_requests(p) == rl(nvidia__gpu="4")


@settings(max_examples=150)
@given(sidecar_cpu_pods())
def test_effective_cpu_matches_a_direct_simulation(p: Pod) -> None:
    # Simulate the pod's life: each regular init container runs alone next to the sidecars started
    # before it; finally apps run next to every sidecar. The peak is the effective request.
    running = 0
    peak = 0
    for c in p.init_containers:
        milli = c.requests["cpu"].milli_value()
        if c.is_sidecar:
            running += milli
            peak = max(peak, running)
        else:
            peak = max(peak, running + milli)
    peak = max(peak, running + sum(c.requests["cpu"].milli_value() for c in p.containers))
    got = pod_requests(p).get("cpu", Quantity(0))
    assert got.milli_value() == peak


def test_a_pod_of_one_container_requests_what_the_aggregate_makes_of_it() -> None:
    from numalign.k8s import requests as r

    q = Quantity.parse
    for req, lim in (({"cpu": q("500m"), "memory": q("0")}, {"cpu": q("1")}),  # a zero request dropped
                     ({}, {"cpu": q("2"), "memory": q("1Gi"), "example.com/gpu": q("1")}),  # limits request
                     ({"memory": q("1Gi")}, {}), ({}, {})):
        pod = Pod("p", containers=(Container("c", req, lim),))
        general = r._non_zero(r._aggregate(pod, r.container_requests))
        got = r.pod_requests(pod)
        assert got == general and list(got) == list(general)
        assert r.pod_requests(pod, exclude_overhead=True) == general
