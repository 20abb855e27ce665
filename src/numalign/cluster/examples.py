"""Built-in clusters and the built-in workload, so every cluster command runs with no files."""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from numalign.cluster.model import Cluster, NodePool, devices_per_numa, example_config, with_devices
from numalign.cluster.workload import Shape, Workload, generate, load_mix
from numalign.errors import InvalidInputError
from numalign.machine.examples import example
from numalign.machine.topology import Machine
from numalign.paths import DATA_DIR

GPU: Final = "nvidia.com/gpu"
EXAMPLE_MIX: Final = DATA_DIR / "example-mix.yaml"


def gpu_node(gpus_per_numa: int = 2) -> Machine:
    """dual-socket (2 sockets, 4 NUMA nodes, SMT2, 128 CPUs, 1 TiB) with 2 GPUs per NUMA node."""
    m = example("dual-socket")
    per = dict.fromkeys(m.numa_ids(), gpus_per_numa)
    return with_devices(m, {GPU: devices_per_numa(GPU, per, "gpu")})


def _example() -> Cluster:
    return Cluster("example", (
        NodePool("gpu", 8, gpu_node(), example_config(gpu_node()), labels={"pool": "gpu"}),
        NodePool("cpu", 4, example("epyc-nps4"), example_config(example("epyc-nps4")), labels={"pool": "cpu"}),
    ))


def _bench() -> Cluster:
    return Cluster("bench", (NodePool("gpu", 1000, gpu_node(), example_config(gpu_node())),))


CLUSTERS: Final[dict[str, Callable[[], Cluster]]] = {"example": _example, "bench": _bench}


def example_cluster(name: str = "example") -> Cluster:
    make = CLUSTERS.get(name)
    if make is None:
        raise InvalidInputError(f"--cluster {name!r}: not a built-in cluster ({', '.join(CLUSTERS)}) and no such "
                                "file; check the name or the path")
    return make()


def example_shapes() -> tuple[list[Shape], int]:
    shapes, count = load_mix(EXAMPLE_MIX)
    return shapes, count or 100


def example_workload(seed: int, count: int | None = None) -> Workload:
    shapes, default_count = example_shapes()
    return generate(shapes, count or default_count, seed)
