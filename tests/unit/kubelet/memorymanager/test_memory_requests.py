"""What the memory manager counts as a request (upstream Test_getPodRequestedResources and
getRequestedResources)."""

from __future__ import annotations

import pytest

from numalign.errors import AllocationError
from numalign.k8s.pod import Container, Pod
from numalign.k8s.quantity import Quantity
from numalign.kubelet.memorymanager.requests import (
    container_requested,
    get_pod_requested_resources,
    get_requested_resources,
)

GB = 1024**3
HP1G = "hugepages-1Gi"


def c(name: str, mem_gi: int, hp_gi: int, *, sidecar: bool = False) -> Container:
    return Container(name, requests={"memory": Quantity.parse(f"{mem_gi}Gi"), HP1G: Quantity.parse(f"{hp_gi}Gi")},
                     restart_policy="Always" if sidecar else None)


@pytest.mark.parametrize(
    ("description", "apps", "inits", "expected"),
    [
        ("maximum resources of init containers > total resources of containers",
         [c("container1", 1, 1), c("container2", 2, 2)], [c("initContainer1", 1, 1), c("initContainer2", 4, 4)],
         {"memory": 4 * GB, HP1G: 4 * GB}),
        ("maximum resources of init containers < total resources of containers",
         [c("container1", 2, 2), c("container2", 3, 3)], [c("initContainer1", 1, 1), c("initContainer2", 3, 3)],
         {"memory": 5 * GB, HP1G: 5 * GB}),
        ("calculate different resources independently",
         [c("container1", 2, 1), c("container2", 3, 2)], [c("initContainer1", 1, 1), c("initContainer2", 3, 4)],
         {"memory": 5 * GB, HP1G: 4 * GB}),
        ("init peak > long running containers, including restartable init containers",
         [c("container1", 1, 1), c("container2", 2, 2)],
         [c("restartableInit1", 2, 2, sidecar=True), c("initContainer2", 4, 4)],
         {"memory": 6 * GB, HP1G: 6 * GB}),
        ("init peak < long running containers, including restartable init containers",
         [c("container1", 2, 2), c("container2", 3, 3)],
         [c("restartableInit1", 2, 2, sidecar=True), c("initContainer2", 4, 4)],
         {"memory": 7 * GB, HP1G: 7 * GB}),
    ],
)
def test_pod_requested_resources(description: str, apps: list[Container], inits: list[Container],
                                 expected: dict[str, int]) -> None:
    pod = Pod(name="p", containers=tuple(apps), init_containers=tuple(inits))
    assert get_pod_requested_resources(pod) == expected, description


def test_pod_request_only_names_resources_of_app_containers() -> None:
    init = Container("i", requests={"memory": Quantity.parse("1Gi"), HP1G: Quantity.parse("8Gi")})
    app = Container("a", requests={"memory": Quantity.parse("2Gi")})
    assert get_pod_requested_resources(Pod(name="p", containers=(app,), init_containers=(init,))) == {"memory": 2 * GB}


def test_container_request_keeps_memory_and_hugepages_only_and_defaults_from_limits() -> None:
    ctn = Container("a", requests={"cpu": Quantity.parse("2"), "nvidia.com/gpu": Quantity.parse("1")},
                    limits={"memory": Quantity.parse("1Gi"), "hugepages-2Mi": Quantity.parse("64Mi")})
    assert get_requested_resources(ctn) == {"memory": GB, "hugepages-2Mi": 64 * 1024 * 1024}


def test_container_request_must_be_whole_bytes() -> None:
    with pytest.raises(AllocationError, match=r"^\[memorymanager\] failed to represent quantity as int64"):
        get_requested_resources(Container("a", requests={"memory": Quantity.parse("100m")}))


def test_a_containers_request_is_worked_out_once_a_pod_and_a_refusal_each_time() -> None:
    app = c("app", 2, 1)
    pod = Pod("p", containers=(app,))
    first = container_requested(pod, app)
    assert first == get_requested_resources(app) == {"memory": 2 * GB, HP1G: GB}
    assert container_requested(pod, app) is first  # kept on the pod (Pod.memo) by the container's name
    assert pod.with_identity(name="q").memo.memory == {"app": first}  # the copy's spec is the same
    odd = Container("odd", requests={"memory": Quantity.parse("1.5")})  # not a whole number of bytes
    bad = Pod("b", containers=(odd,))
    for _ in range(2):
        with pytest.raises(AllocationError, match="failed to represent quantity as int64"):
            container_requested(bad, odd)
    assert bad.memo.memory == {}
