"""What a `numalign run` command learns about its devices: the environment a device plugin's Allocate
would give a container.

Devices come from the machine (this host's PCI devices, as `numalign discover` lists them, or a
machine file's `devices`) or from a devices file (`--devices RESOURCE=FILE`, the list `numalign
plugin --devices` serves). Each resource's Allocate answers with one variable naming the assigned
device ids (`--device-env RESOURCE=NAME`, by default NUMALIGN_DEVICES_<RESOURCE>, e.g.
NUMALIGN_DEVICES_EXAMPLE_COM_GPU). For nvidia.com/gpu whose ids are PCI addresses it also gives what
CUDA reads: CUDA_DEVICE_ORDER=PCI_BUS_ID and CUDA_VISIBLE_DEVICES as indices in PCI bus order among
all of the resource's devices, so the program sees exactly the GPUs it was given.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence

from numalign.k8s.deviceplugin import ContainerAllocateResponse

NVIDIA_GPU = "nvidia.com/gpu"
_PCI_ADDRESS = re.compile(r"^[0-9a-fA-F]{4,}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]$")


def default_env_name(resource: str) -> str:
    return "NUMALIGN_DEVICES_" + re.sub(r"[^A-Z0-9]+", "_", resource.upper()).strip("_")


def allocate_fn(
    resource: str, all_ids: Sequence[str], env_name: str | None = None
) -> Callable[[Sequence[str]], ContainerAllocateResponse]:
    """The Allocate answer of an in-process plugin for `resource` offering `all_ids`."""
    name = env_name or default_env_name(resource)
    order = sorted(all_ids, key=str.lower)
    cuda = resource == NVIDIA_GPU and env_name is None and all(_PCI_ADDRESS.match(i) for i in order)

    def allocate(ids: Sequence[str]) -> ContainerAllocateResponse:
        envs: dict[str, str] = {name: ",".join(ids)}
        if cuda:
            envs["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"
            envs["CUDA_VISIBLE_DEVICES"] = ",".join(str(order.index(i)) for i in sorted(ids, key=str.lower))
        return ContainerAllocateResponse(envs=envs)

    return allocate


def env_of(envs: Sequence[tuple[str, str]] | Mapping[str, str]) -> dict[str, str]:
    return dict(envs.items() if isinstance(envs, Mapping) else envs)
