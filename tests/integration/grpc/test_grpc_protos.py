"""The committed generated code matches proto/, and the wire contract matches upstream's api.proto."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from google.protobuf.descriptor import FieldDescriptor

from numalign.adapters.grpc.gen.deviceplugin.v1beta1 import api_pb2 as dp
from numalign.adapters.grpc.gen.podresources.v1 import api_pb2 as pr

ROOT = Path(__file__).resolve().parents[3]
GEN = ROOT / "src" / "numalign" / "adapters" / "grpc" / "gen"

_T = FieldDescriptor
STR, BOOL, I32, I64, U64, MSG = (
    _T.TYPE_STRING,
    _T.TYPE_BOOL,
    _T.TYPE_INT32,
    _T.TYPE_INT64,
    _T.TYPE_UINT64,
    _T.TYPE_MESSAGE,
)

# message -> {field name: (number, type, repeated)} as in upstream's api.proto files.
DEVICEPLUGIN_FIELDS: dict[str, dict[str, tuple[int, int, bool]]] = {
    "DevicePluginOptions": {
        "pre_start_required": (1, BOOL, False),
        "get_preferred_allocation_available": (2, BOOL, False),
    },
    "RegisterRequest": {
        "version": (1, STR, False),
        "endpoint": (2, STR, False),
        "resource_name": (3, STR, False),
        "options": (4, MSG, False),
    },
    "Empty": {},
    "ListAndWatchResponse": {"devices": (1, MSG, True)},
    "TopologyInfo": {"nodes": (1, MSG, True)},
    "NUMANode": {"ID": (1, I64, False)},
    "Device": {"ID": (1, STR, False), "health": (2, STR, False), "topology": (3, MSG, False)},
    "PreStartContainerRequest": {"devices_ids": (1, STR, True)},
    "PreStartContainerResponse": {},
    "PreferredAllocationRequest": {"container_requests": (1, MSG, True)},
    "ContainerPreferredAllocationRequest": {
        "available_deviceIDs": (1, STR, True),
        "must_include_deviceIDs": (2, STR, True),
        "allocation_size": (3, I32, False),
    },
    "PreferredAllocationResponse": {"container_responses": (1, MSG, True)},
    "ContainerPreferredAllocationResponse": {"deviceIDs": (1, STR, True)},
    "AllocateRequest": {"container_requests": (1, MSG, True)},
    "ContainerAllocateRequest": {"devices_ids": (1, STR, True)},
    "CDIDevice": {"name": (1, STR, False)},
    "AllocateResponse": {"container_responses": (1, MSG, True)},
    "ContainerAllocateResponse": {
        "envs": (1, MSG, True),
        "mounts": (2, MSG, True),
        "devices": (3, MSG, True),
        "annotations": (4, MSG, True),
        "cdi_devices": (5, MSG, True),
    },
    "Mount": {"container_path": (1, STR, False), "host_path": (2, STR, False), "read_only": (3, BOOL, False)},
    "DeviceSpec": {
        "container_path": (1, STR, False),
        "host_path": (2, STR, False),
        "permissions": (3, STR, False),
    },
}

PODRESOURCES_FIELDS: dict[str, dict[str, tuple[int, int, bool]]] = {
    "AllocatableResourcesRequest": {},
    "AllocatableResourcesResponse": {
        "devices": (1, MSG, True),
        "cpu_ids": (2, I64, True),
        "memory": (3, MSG, True),
    },
    "ListPodResourcesRequest": {},
    "ListPodResourcesResponse": {"pod_resources": (1, MSG, True)},
    "PodResources": {"name": (1, STR, False), "namespace": (2, STR, False), "containers": (3, MSG, True)},
    "ContainerResources": {
        "name": (1, STR, False),
        "devices": (2, MSG, True),
        "cpu_ids": (3, I64, True),
        "memory": (4, MSG, True),
        "dynamic_resources": (5, MSG, True),
    },
    "ContainerMemory": {"memory_type": (1, STR, False), "size": (2, U64, False), "topology": (3, MSG, False)},
    "ContainerDevices": {
        "resource_name": (1, STR, False),
        "device_ids": (2, STR, True),
        "topology": (3, MSG, False),
    },
    "TopologyInfo": {"nodes": (1, MSG, True)},
    "NUMANode": {"ID": (1, I64, False)},
    "DynamicResource": {
        "claim_name": (2, STR, False),
        "claim_namespace": (3, STR, False),
        "claim_resources": (4, MSG, True),
    },
    "ClaimResource": {
        "cdi_devices": (1, MSG, True),
        "driver_name": (2, STR, False),
        "pool_name": (3, STR, False),
        "device_name": (4, STR, False),
    },
    "CDIDevice": {"name": (1, STR, False)},
    "GetPodResourcesRequest": {"pod_name": (1, STR, False), "pod_namespace": (2, STR, False)},
    "GetPodResourcesResponse": {"pod_resources": (1, MSG, False)},
}


def _fields(module: object, expected: dict[str, dict[str, tuple[int, int, bool]]]) -> None:
    desc = module.DESCRIPTOR  # type: ignore[attr-defined]
    assert set(desc.message_types_by_name) == set(expected)
    for name, fields in expected.items():
        msg = desc.message_types_by_name[name]
        got = {f.name: (f.number, f.type, f.is_repeated) for f in msg.fields}
        assert got == fields, name


def test_grpc_deviceplugin_descriptor_matches_upstream_wire() -> None:
    assert dp.DESCRIPTOR.package == "v1beta1"
    _fields(dp, DEVICEPLUGIN_FIELDS)
    reg = dp.DESCRIPTOR.services_by_name["Registration"]
    assert [(m.name, m.input_type.name, m.output_type.name) for m in reg.methods] == [
        ("Register", "RegisterRequest", "Empty")
    ]
    plugin = dp.DESCRIPTOR.services_by_name["DevicePlugin"]
    methods = {
        m.full_name: (m.input_type.name, m.output_type.name, m.server_streaming) for m in plugin.methods
    }
    assert methods == {
        "v1beta1.DevicePlugin.GetDevicePluginOptions": ("Empty", "DevicePluginOptions", False),
        "v1beta1.DevicePlugin.ListAndWatch": ("Empty", "ListAndWatchResponse", True),
        "v1beta1.DevicePlugin.GetPreferredAllocation": (
            "PreferredAllocationRequest",
            "PreferredAllocationResponse",
            False,
        ),
        "v1beta1.DevicePlugin.Allocate": ("AllocateRequest", "AllocateResponse", False),
        "v1beta1.DevicePlugin.PreStartContainer": (
            "PreStartContainerRequest",
            "PreStartContainerResponse",
            False,
        ),
    }
    envs = dp.ContainerAllocateResponse.DESCRIPTOR.fields_by_name["envs"].message_type
    assert envs is not None
    assert envs.GetOptions().map_entry


def test_grpc_podresources_descriptor_matches_upstream_wire() -> None:
    assert pr.DESCRIPTOR.package == "v1"
    _fields(pr, PODRESOURCES_FIELDS)
    svc = pr.DESCRIPTOR.services_by_name["PodResourcesLister"]
    assert [(m.full_name, m.input_type.name, m.output_type.name) for m in svc.methods] == [
        ("v1.PodResourcesLister.List", "ListPodResourcesRequest", "ListPodResourcesResponse"),
        (
            "v1.PodResourcesLister.GetAllocatableResources",
            "AllocatableResourcesRequest",
            "AllocatableResourcesResponse",
        ),
        ("v1.PodResourcesLister.Get", "GetPodResourcesRequest", "GetPodResourcesResponse"),
    ]


def test_grpc_committed_generated_code_is_up_to_date(tmp_path: Path) -> None:
    # Copy the script and protos aside so regeneration never touches the working tree.
    work = tmp_path / "repo"
    (work / "scripts").mkdir(parents=True)
    shutil.copy2(ROOT / "scripts" / "gen-protos", work / "scripts" / "gen-protos")
    shutil.copytree(ROOT / "proto", work / "proto")
    out = tmp_path / "gen"
    env_py = {"PYTHON": sys.executable, "PATH": str(Path(sys.executable).parent) + ":/usr/bin:/bin"}
    subprocess.run(
        ["bash", str(work / "scripts" / "gen-protos"), str(out)],
        cwd=work,
        env=env_py,
        check=True,
        capture_output=True,
        timeout=60,
    )
    fresh = {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    committed = {
        p.relative_to(GEN): p.read_bytes()
        for p in GEN.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    }
    assert sorted(map(str, fresh)) == sorted(map(str, committed))
    stale = sorted(str(k) for k in fresh if fresh[k] != committed[k])
    assert not stale, f"generated code is stale; run scripts/gen-protos and commit: {stale}"
