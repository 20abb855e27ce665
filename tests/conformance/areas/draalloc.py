"""The "dra-alloc" area: a pod's ResourceClaims allocated on one node, against the real structured
allocator as kube-scheduler's DynamicResources plugin drives it (conformance/area_draalloc.go; 1.33:
area_draalloc_k8s133.go), 1.33-1.37 (1.33-1.35 range over a Go map of pools: the harness answers with
every answer it saw, `equivalent`).

A case has the shape of the recorded vectors (../shared/oracle/dra): `gate_overrides`, `node`, `slices`,
`classes`, `claims` (allocated together, as for one pod) and `allocated` (claims other pods hold), the
objects as users and drivers write them (resource.k8s.io/v1, no defaults applied). Generated cases mix
drivers, pools split over slices (some incomplete, some for other nodes, per-device node selection),
partitionable devices and counter sets (in slices of their own; at 1.33 and 1.34 also beside the devices,
where those releases read them), consumable capacity and shared devices, taints, CEL selectors,
ExactCount/All requests, prioritized lists, admin access, matchAttribute/distinctAttribute constraints
and held devices (whole, or a share of a shared one). The answer: the devices per claim, or the verdict
(`unschedulable`, `error`, `timeout`) with the plugin's text.
"""

from __future__ import annotations

import random
from typing import Any

from support.dra_oracle import answer

NAME = "dra-alloc"
MINORS = ("1.33", "1.34", "1.35", "1.36", "1.37")

_DRIVERS = ("gpu.example.com", "nic.example.com", "dra.cpu")
_MODELS = ("h100", "h200", "l4", "a100", "B200")
_SELECTORS = (
    'device.attributes["{d}"].model == "h100"', 'device.attributes["{d}"].model != "l4"',
    'has(device.attributes["{d}"].index) && device.attributes["{d}"].index % 2 == 0',
    'device.attributes["resource.kubernetes.io"].numaNode == 0',
    'device.attributes["{d}"].model.startsWith("h")', 'device.attributes["{d}"].nosuch == 1',
    'device.capacity["{d}"].memory.compareTo(quantity("40Gi")) >= 0', "true",
)


def _meta(name: str, namespace: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if namespace:
        meta.update(namespace=namespace, uid=f"uid-{name}")
    return meta


def _device(rng: random.Random, driver: str, i: int, counters: bool, consumable: bool,
            fractional: bool = False, odd_counters: bool = False) -> dict[str, Any]:
    d: dict[str, Any] = {"name": f"{driver.split('.')[0]}-{i}", "attributes": {
        "index": {"int": i}, "model": {"string": rng.choice(_MODELS)},
        "resource.kubernetes.io/numaNode": {"int": rng.randrange(2)}}}
    if rng.random() < 0.5:
        d["attributes"]["resource.kubernetes.io/pcieRoot"] = {"string": f"pci0000:0{rng.randrange(3)}"}
    if rng.random() < 0.5:
        d["capacity"] = {"memory": {"value": rng.choice(("24Gi", "40Gi", "80Gi"))}}
    if consumable and rng.random() < 0.3:
        d["allowMultipleAllocations"] = True
        d.setdefault("capacity", {})["bandwidth"] = {"value": "10G", "requestPolicy": rng.choice((
            {"default": "1G", "validRange": {"min": "1G", "step": "1G"}},
            {"default": "5G", "validValues": ["5G", "10G"]}))}
        if fractional and rng.random() < 0.4:
            # 1.37's DRAFractionalCapacityRange rounds these in thousandths; without it, in whole units
            d["capacity"]["bandwidth"] = {"value": rng.choice(("10", "4")), "requestPolicy": rng.choice((
                {"default": "500m", "validRange": {"min": "500m", "max": "8", "step": "250m"}},
                {"validRange": {"min": "0.5", "step": "0.5"}},
                {"validRange": {"min": "1", "max": "3", "step": "1"}}))}
    if counters and rng.random() < 0.7:
        d["consumesCounters"] = [{"counterSet": rng.choice(("set-0", "set-0", "nope")),
                                  "counters": {"memory": {"value": rng.choice(("10Gi", "40Gi"))}}}]
        if odd_counters and rng.random() < 0.15:
            # a counter its set lacks: 1.33 refuses the device, 1.34 never checks it
            d["consumesCounters"][0]["counters"]["cores"] = {"value": "2"}
    if rng.random() < 0.1:
        d["taints"] = [{"key": "maint", "effect": rng.choice(("NoSchedule", "NoExecute"))}]
    return d


def _slices(rng: random.Random, node: str, minor: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    index = 0
    for driver in rng.sample(_DRIVERS, rng.randint(1, 3)):
        for p in range(rng.randint(1, 2)):
            pool = f"{driver.split('.')[0]}-pool-{p}"
            count = rng.randint(1, 3)
            # 1.35+: the counter sets in a slice of their own (1.33 and 1.34 read it as a device slice without
            # devices, whose sets no device draws on); 1.33 and 1.34 also publish them beside the devices
            # (`inline`), where their allocators read a device's counters from its own slice
            counters = rng.random() < 0.25
            inline = minor <= 34 and rng.random() < 0.3
            present = count if rng.random() < 0.9 else count - 1
            for s in range(present):
                spec: dict[str, Any] = {"driver": driver, "pool": {"name": pool, "generation": 1,
                                                                   "resourceSliceCount": count + counters}}
                where = rng.random()
                if where < 0.7:
                    spec["nodeName"] = node
                elif where < 0.8:
                    spec["nodeName"] = "node-b"
                elif where < 0.9:
                    spec["allNodes"] = True
                elif where < 0.95:
                    spec["nodeSelector"] = _zone_selector(rng)
                else:
                    spec["perDeviceNodeSelection"] = True  # (DRAPartitionableDevices: else left out)
                if inline and rng.random() < 0.8:
                    spec["sharedCounters"] = [{"name": "set-0", "counters": {"memory": {"value": rng.choice(
                        ("80Gi", "40Gi", "20Gi"))}}}]
                spec["devices"] = [_device(rng, driver, index + k, counters or inline, minor >= 34, minor >= 37,
                                           odd_counters=minor <= 34)
                                   for k in range(rng.randint(1, 4))]
                if spec.get("perDeviceNodeSelection"):
                    for d in spec["devices"]:
                        where = rng.random()
                        if where < 0.5:
                            d["nodeName"] = node
                        elif where < 0.7:
                            d["nodeName"] = "node-b"
                        elif where < 0.85:
                            d["allNodes"] = True
                        else:
                            d["nodeSelector"] = _zone_selector(rng)
                index += len(spec["devices"])
                out.append({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
                            "metadata": _meta(f"{node}-{pool}-{s}"), "spec": spec})
            if counters:
                spec = {"driver": driver, "pool": {"name": pool, "generation": 1, "resourceSliceCount": count + 1},
                        "nodeName": rng.choice((node, node, "node-b")),
                        "sharedCounters": [{"name": "set-0", "counters": {"memory": {"value": "80Gi"}}}]}
                out.append({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
                            "metadata": _meta(f"{node}-{pool}-counters"), "spec": spec})
    rng.shuffle(out)
    return out


def _zone_selector(rng: random.Random) -> dict[str, Any]:
    return {"nodeSelectorTerms": [{"matchExpressions": [
        {"key": "zone", "operator": "In", "values": [rng.choice(("a", "b"))]}]}]}


def _request(rng: random.Random, name: str, classes: list[str], minor: int) -> dict[str, Any]:
    def exact(admin: bool = True) -> dict[str, Any]:
        e: dict[str, Any] = {"deviceClassName": rng.choice(classes)}
        if rng.random() < 0.15:
            e["allocationMode"] = "All"
        elif rng.random() < 0.5:
            e["count"] = rng.randint(1, 3)
        if rng.random() < 0.3:
            driver = rng.choice(_DRIVERS)
            e["selectors"] = [{"cel": {"expression": rng.choice(_SELECTORS).format(d=driver)}}]
        if admin and rng.random() < 0.05:
            e["adminAccess"] = True  # the API server allows it in `exactly` only
        if rng.random() < 0.1:
            e["tolerations"] = [{"key": "maint", "operator": "Exists"}]
        if minor >= 34 and rng.random() < 0.1:
            e["capacity"] = {"requests": {"bandwidth": rng.choice(
                ("1G", "5G", "3G") + (("600m", "1.1", "2", "-1") if minor >= 37 else ()))}}
        return e

    if rng.random() < 0.2:
        subs = [dict(exact(admin=False), name=f"s{i}") for i in range(rng.randint(1, 3))]
        return {"name": name, "firstAvailable": subs}
    return {"name": name, "exactly": exact()}


def generate(rng: random.Random, version: str) -> dict[str, Any]:
    minor = int(version.split(".")[1])
    node = "node-a"
    slices = _slices(rng, node, minor)
    classes: list[dict[str, Any]] = []
    for driver in _DRIVERS:
        short = driver.split(".")[0]
        classes.append({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": _meta(short),
                        "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{driver}"'}}]}})
    names = [c["metadata"]["name"] for c in classes] + (["missing-class"] if rng.random() < 0.05 else [])
    claims = []
    for c in range(rng.randint(1, 2)):
        requests = [_request(rng, f"r{i}", names, minor) for i in range(rng.randint(1, 3))]
        devices: dict[str, Any] = {"requests": requests}
        if rng.random() < 0.3:
            key = rng.choice(("matchAttribute", "distinctAttribute") if minor >= 34 else ("matchAttribute",))
            devices["constraints"] = [{key: rng.choice(("resource.kubernetes.io/numaNode",
                                                        "resource.kubernetes.io/pcieRoot"))}]
        claims.append({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                       "metadata": _meta(f"c{c}", "default"), "spec": {"devices": devices}})
    allocated = []
    mine = [s for s in slices if s["spec"].get("nodeName") == node and s["spec"].get("devices")]
    for h in range(rng.randint(0, 2) if mine else 0):
        s = rng.choice(mine)
        d = rng.choice(s["spec"]["devices"])
        result = {"request": "req", "driver": s["spec"]["driver"], "pool": s["spec"]["pool"]["name"],
                  "device": d["name"]}
        if d.get("allowMultipleAllocations") and rng.random() < 0.7:
            # a share another pod holds: counters count it from 1.36.2 only
            result.update(shareID=f"6a2b0e4e-0000-4000-8000-00000000000{h}", consumedCapacity={"bandwidth": "1"})
        allocated.append({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                          "metadata": _meta(f"held-{h}", "other"),
                          "spec": {"devices": {"requests": [{"name": "req", "exactly": {"deviceClassName": "x"}}]}},
                          "status": {"allocation": {"devices": {"results": [result]}}}})
    gates: dict[str, bool] = {}
    partitions = any(s["spec"].get("sharedCounters") or s["spec"].get("perDeviceNodeSelection") for s in slices)
    if minor in (34, 35) and partitions and rng.random() < 0.6:
        # DRAPartitionableDevices is alpha there: on in most cases that have counters or per-device nodes
        gates["DRAPartitionableDevices"] = True
    if minor == 33:
        # DRA is beta and off by default in 1.33, its allocator's features alpha and off: the cluster turns
        # DynamicResourceAllocation on, and each feature half of the time.
        gates["DynamicResourceAllocation"] = True
        for name in ("DRAAdminAccess", "DRAPrioritizedList", "DRAPartitionableDevices", "DRADeviceTaints"):
            if rng.random() < 0.5:
                gates[name] = True
    elif rng.random() < 0.3:
        # 1.37's DRADeviceTaintRules (on) depends on DRADeviceTaints: turning that off is refused at start-up.
        # DRAPrioritizedList is locked on in 1.37.
        choices = ["DRAPartitionableDevices", "DRAConsumableCapacity"]
        if minor <= 36:
            choices += ["DRADeviceTaints", "DRAPrioritizedList"]
        if minor >= 36:
            choices.append("DRAListTypeAttributes")
        if minor >= 37:
            choices.append("DRAFractionalCapacityRange")
        gates[rng.choice(choices)] = rng.random() < 0.5
    return {"gate_overrides": gates, "node": {"name": node, "labels": {"zone": rng.choice(("a", "b"))}},
            "slices": slices, "classes": classes, "claims": claims, "allocated": allocated}


def _distinct_case(name: str, request: dict[str, Any], attribute: str, values: list[str]) -> dict[str, Any]:
    """One pool of GPUs whose `attribute` takes `values` in device order, and one claim of one request under
    distinctAttribute. DRAConsumableCapacity on, so that 1.34 and 1.35 take the generation that has the
    constraint (their default one calls it an empty constraint)."""
    devices = [{"name": f"gpu-{i}", "attributes": {attribute: {"string": v}}} for i, v in enumerate(values)]
    return {
        "gate_overrides": {"DRAConsumableCapacity": True}, "node": {"name": "node-a", "labels": {}},
        "slices": [{"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": name},
                    "spec": {"driver": "gpu.example.com", "pool": {"name": "gpus", "generation": 1,
                                                                   "resourceSliceCount": 1},
                             "nodeName": "node-a", "devices": devices}}],
        "classes": [{"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": _meta("gpu"),
                     "spec": {"selectors": [{"cel": {"expression": 'device.driver == "gpu.example.com"'}}]}}],
        "claims": [{"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": _meta("c0", "default"),
                    "spec": {"devices": {"requests": [{"name": "r0", "exactly": {"deviceClassName": "gpu", **request}}],
                                         "constraints": [{"distinctAttribute": attribute}]}}}],
        "allocated": [],
    }


def named_cases(version: str) -> list[tuple[str, dict[str, Any], str]]:
    """Cases run by name after the generated ones (the generated ones reach them now and then: seed 3,
    dra-alloc-407 and -504 at 1.37; seed 8, dra-alloc-191 at 1.34).

    distinct-every-device: three devices of one request under distinctAttribute, the values a, b, a, c.
    1.37 compares a device with every device added before it (gpu-0, gpu-1, gpu-3); 1.34-1.36 keep one
    value per request, its last device's, so gpu-2 is compared with gpu-1's b only and taken.
    distinct-all-names: allocationMode All over a, b, a: the constraint fails at gpu-2 in 1.37, an error
    naming it; 1.36 compares gpu-2 with b only and allocates the three."""
    minor = int(version.split(".")[1])
    if minor == 33:
        return _cases_133(minor) + _counter_cases(minor)
    root = "resource.kubernetes.io/pcieRoot"
    # capacity-at-index: gpu-0 without capacity, then gpu-1 shared with 10G of bandwidth; a request for 3G.
    # 1.34, taking gpu-1, checks the capacity of the slice's device at the request's device index (0:
    # gpu-0, which has no bandwidth), so nothing fits; 1.35+ check gpu-1 (seed 8, dra-alloc-191 at 1.34.4).
    capacity = _distinct_case("capacity", {"capacity": {"requests": {"bandwidth": "3G"}}}, root, ["a", "b"])
    capacity["claims"][0]["spec"]["devices"].pop("constraints")
    capacity["slices"][0]["spec"]["devices"][1].update({"allowMultipleAllocations": True, "capacity": {"bandwidth": {
        "value": "10G", "requestPolicy": {"default": "1G", "validRange": {"min": "1G", "step": "1G"}}}}})
    # all-used-capacity: every shared GPU (10G of bandwidth) for 5G each, gpu-0 with 8G held by another pod.
    # 1.37 lists gpu-0 anyway (its capacity is checked with nothing consumed) and then cannot take it:
    # unschedulable; before, the list leaves gpu-0 out and the request gets gpu-1.
    used = _distinct_case("used", {"allocationMode": "All", "capacity": {"requests": {"bandwidth": "5G"}}}, root,
                          ["a", "b"])
    used["claims"][0]["spec"]["devices"].pop("constraints")
    for d in used["slices"][0]["spec"]["devices"]:
        d.update({"allowMultipleAllocations": True, "capacity": {"bandwidth": {"value": "10G"}}})
    used["allocated"] = [_held("gpu.example.com", "gpus", "gpu-0", {
        "shareID": "6a2b0e4e-0000-4000-8000-000000000001", "consumedCapacity": {"bandwidth": "8G"}})]
    return [("distinct-every-device", _distinct_case("every", {"count": 3}, root, ["a", "b", "a", "c"]), "20s"),
            ("distinct-all-names", _distinct_case("all", {"allocationMode": "All"}, root, ["a", "b", "a"]), "20s"),
            ("capacity-at-index", capacity, "20s"), ("all-used-capacity", used, "20s"),
            # (1.34 reads each device's counters from its own slice: the counter slices' sets are never drawn on)
            ("counters-per-driver", _same_pool_name_case(), "20s"),
            *_capacity_cases(minor), *_cases_133(minor), *_counter_cases(minor),
            ("capacity-error-other-value", _capacity_error_case(), "20s"),
            ("counters-held-share", _held_share_case(), "20s"),
            ("stable-counter-slice", _stable_counter_slice_case(minor), "20s"),
            ("locked-gate", _locked_gate_case(), "20s")]


def _cases_133(minor: int) -> list[tuple[str, dict[str, Any], str]]:
    """What 1.33 decides otherwise, at every release (1.33 has neither distinctAttribute nor consumable
    capacity: the cases above are 1.34+).

    all-keeps-devices: c-first asks for one odd GPU, c0 for All GPUs under matchAttribute pcieRoot (gpu-0 and
    gpu-1 on root a, gpu-2 and gpu-3 on b). With c-first on gpu-1, c0 takes gpu-0 and finds gpu-1 in use; 1.33
    keeps gpu-0 taken, so with c-first on gpu-3 c0 finds gpu-0 in use: unschedulable. 1.34+ give gpu-0 back
    and then fail the constraint at gpu-2: an error naming it.
    admin-same-device: one claim, a GPU and a GPU with admin access, two GPUs. 1.33 marks nothing for admin
    access and gives both requests gpu-0; 1.34+ give the admin-access request gpu-1."""
    root = "resource.kubernetes.io/pcieRoot"
    gates = {"DynamicResourceAllocation": True} if minor == 33 else {}
    keeps = _distinct_case("keeps", {"allocationMode": "All"}, root, ["a", "a", "b", "b"])
    keeps["claims"][0]["spec"]["devices"]["constraints"] = [{"matchAttribute": root}]
    for i, d in enumerate(keeps["slices"][0]["spec"]["devices"]):
        d["attributes"]["odd"] = {"bool": i % 2 == 1}
    odd = [{"cel": {"expression": 'device.attributes["gpu.example.com"].odd'}}]
    keeps["claims"].insert(0, {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                               "metadata": _meta("c-first", "default"), "spec": {"devices": {"requests": [
                                   {"name": "r0", "exactly": {"deviceClassName": "gpu", "selectors": odd}}]}}})
    keeps["gate_overrides"] = gates
    admin = _distinct_case("admin", {}, root, ["a", "b"])
    admin["claims"][0]["spec"]["devices"] = {"requests": [
        {"name": "r0", "exactly": {"deviceClassName": "gpu"}},
        {"name": "r1", "exactly": {"deviceClassName": "gpu", "adminAccess": True}}]}
    admin["gate_overrides"] = dict(gates, DRAAdminAccess=True) if minor == 33 else {}
    return [("all-keeps-devices", keeps, "20s"), ("admin-same-device", admin, "20s")]


def _counter_cases(minor: int) -> list[tuple[str, dict[str, Any], str]]:
    """Shared counters published beside the devices, as 1.33 and 1.34 take them (a slice with both is
    refused by the API server from 1.35: these run at 1.33 and 1.34 only).

    counters-in-own-slice: pool `gpus` of two slices, each with counter set set-0 of 10Gi; slice a has gpu-0
    and gpu-1, slice b gpu-2, each consuming 10Gi of set-0; one claim for two GPUs. Each slice's devices
    draw on their own slice's set: gpu-0 spends slice a's, gpu-1 does not fit, gpu-2 draws on slice b's.
    counter-not-in-set: one slice with set-0 {memory: 20Gi}; gpu-0 consumes memory and `cores` (not in the
    set), gpu-1 memory only; one claim for one GPU. 1.33 refuses gpu-0 (a counter its set lacks) and takes
    gpu-1; 1.34 never checks a counter its set lacks: gpu-0.
    counters-held-in-slice: slice a's gpu-0 held by another pod, so slice a's set is spent: 1.33 and 1.34
    subtract what the slice's held devices consume; the claim for one GPU gets slice b's gpu-2."""
    if minor > 34:
        return []
    gates = {"DRAPartitionableDevices": True} | ({"DynamicResourceAllocation": True} if minor == 33 else {})

    def gpu(name: str, counters: dict[str, Any]) -> dict[str, Any]:
        return {"name": name, "consumesCounters": [{"counterSet": "set-0", "counters": counters}]}

    ten = {"memory": {"value": "10Gi"}}

    def case(slices: dict[str, tuple[str, list[dict[str, Any]]]], count: int) -> dict[str, Any]:
        base = _distinct_case("counters", {"count": count}, "resource.kubernetes.io/pcieRoot", [])
        base["claims"][0]["spec"]["devices"].pop("constraints")
        base["slices"] = [{"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": name},
                           "spec": {"driver": "gpu.example.com", "pool": {"name": "gpus", "generation": 1,
                                                                          "resourceSliceCount": len(slices)},
                                    "nodeName": "node-a", "devices": devices, "sharedCounters": [
                                        {"name": "set-0", "counters": {"memory": {"value": total}}}]}}
                          for name, (total, devices) in slices.items()]
        base["gate_overrides"] = gates
        return base

    own = case({"gpus-a": ("10Gi", [gpu("gpu-0", ten), gpu("gpu-1", ten)]), "gpus-b": ("10Gi", [gpu("gpu-2", ten)])},
               2)
    missing = case({"gpus": ("20Gi", [gpu("gpu-0", {**ten, "cores": {"value": "2"}}), gpu("gpu-1", ten)])}, 1)
    held = case({"gpus-a": ("10Gi", [gpu("gpu-0", ten), gpu("gpu-1", ten)]), "gpus-b": ("10Gi", [gpu("gpu-2", ten)])},
                1)
    held["allocated"] = [_held("gpu.example.com", "gpus", "gpu-0", {})]
    out = [("counters-in-own-slice", own, "20s"), ("counter-not-in-set", missing, "20s"),
           ("counters-held-in-slice", held, "20s")]
    if minor == 34:
        # counters-every-share: three shared GPUs of 10G bandwidth, each consuming 10Gi of a 20Gi set; one
        # claim for three shares of 1G. 1.34 takes the counters at every share (1.35+ once a device's capacity
        # is in use): two shares of gpu-0 spend the set, no third share fits anywhere: unschedulable.
        every = case({"gpus": ("20Gi", [dict(gpu(f"gpu-{i}", ten), allowMultipleAllocations=True, capacity={
            "bandwidth": {"value": "10G"}}) for i in range(3)])}, 3)
        every["claims"][0]["spec"]["devices"]["requests"][0]["exactly"]["capacity"] = {"requests": {"bandwidth": "1G"}}
        every["gate_overrides"] = dict(gates, DRAConsumableCapacity=True)
        out.append(("counters-every-share", every, "20s"))
    return out


def _capacity_error_case() -> dict[str, Any]:
    """capacity-error-other-value: two GPUs under matchAttribute numaNode, each asking for -1 of bandwidth (a
    claim stored before validation refused it); gpu-0 and gpu-2 (NUMA 0) have a validRange of at least 1G,
    to which -1 rounds up, gpu-1 (NUMA 1) no policy, so -1 is what it would consume. 1.37 takes gpu-0, then
    its scan checks gpu-1's capacity (another NUMA node, which the constraint would refuse) and aborts the
    allocation on the negative value; before 1.37 the request passes over gpu-1 and gets gpu-2."""
    case = _distinct_case("numa", {"count": 2, "capacity": {"requests": {"bandwidth": "-1"}}},
                          "resource.kubernetes.io/numaNode", [])
    case["claims"][0]["spec"]["devices"]["constraints"] = [{"matchAttribute": "resource.kubernetes.io/numaNode"}]
    at_least = {"validRange": {"min": "1G"}}
    case["slices"][0]["spec"]["devices"] = [
        {"name": f"gpu-{i}", "attributes": {"resource.kubernetes.io/numaNode": {"int": numa}},
         "capacity": {"bandwidth": {"value": "10G", **({} if numa else {"requestPolicy": at_least})}}}
        for i, numa in enumerate((0, 1, 0))]
    return case


def _held_share_case() -> dict[str, Any]:
    """counters-held-share: a counter set of 10Gi (a slice of its own); shared gpu-0 and whole gpu-1 each
    consume all of it, and another pod holds a share of gpu-0; one claim for a whole GPU. The counters count
    shares from 1.36.2 on: gpu-1 does not fit (unschedulable); in 1.35 only devices held whole count, and
    gpu-1 is taken. (1.34 never draws on another slice's counter set, but checks gpu-1's capacity as that of
    the slice's first device, gpu-0, whose bandwidth the held share uses: unschedulable, capacity-at-index.)"""
    case = _distinct_case("share", {"selectors": [{"cel": {"expression": "device.allowMultipleAllocations == false"}}]},
                          "resource.kubernetes.io/pcieRoot", [])
    case["claims"][0]["spec"]["devices"].pop("constraints")
    memory = {"counterSet": "set-0", "counters": {"memory": {"value": "10Gi"}}}
    spec = case["slices"][0]["spec"]
    spec["pool"]["resourceSliceCount"] = 2
    spec["devices"] = [{"name": "gpu-0", "allowMultipleAllocations": True, "capacity": {"bandwidth": {"value": "10G"}},
                        "consumesCounters": [memory]}, {"name": "gpu-1", "consumesCounters": [memory]}]
    case["slices"].append({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": _meta("counters"),
                           "spec": {k: v for k, v in spec.items() if k != "devices"} | {
                               "sharedCounters": [{"name": "set-0", "counters": {"memory": {"value": "10Gi"}}}]}})
    case["gate_overrides"] = {"DRAPartitionableDevices": True, "DRAConsumableCapacity": True}
    case["allocated"] = [_held("gpu.example.com", "gpus", "gpu-0", {
        "shareID": "6a2b0e4e-0000-4000-8000-000000000001", "consumedCapacity": {"bandwidth": "1G"}})]
    return case


def _stable_counter_slice_case(minor: int) -> dict[str, Any]:
    """stable-counter-slice: DRAPartitionableDevices off and the gates that keep the stable generation from
    being picked (1.34, 1.35: DRAAdminAccess and DRAPrioritizedList; 1.36+: DRAConsumableCapacity and
    DRADeviceBindingConditions) too, which the generated cases never turn off together; pool `gpus` of a
    slice with a counter set only and a slice with gpu-0. 1.34's and 1.35's stable generations gather the
    counter slice as a device slice without devices: the pool is complete, gpu-0 allocated. From 1.36 a slice
    with counter sets is left out without the gate, yet counts toward the pool's completeness: gpu-0 too."""
    case = _distinct_case("stable", {}, "resource.kubernetes.io/pcieRoot", [])
    case["claims"][0]["spec"]["devices"].pop("constraints")
    spec = case["slices"][0]["spec"]
    spec["pool"]["resourceSliceCount"] = 2
    spec["devices"] = [{"name": "gpu-0"}]
    case["slices"].append({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": _meta("counters"),
                           "spec": {k: v for k, v in spec.items() if k != "devices"} | {
                               "sharedCounters": [{"name": "set-0", "counters": {"memory": {"value": "10Gi"}}}]}})
    case["gate_overrides"] = {"DRAPartitionableDevices": False} | (
        {"DRAAdminAccess": False, "DRAPrioritizedList": False} if minor <= 35 else
        {"DRAConsumableCapacity": False, "DRADeviceBindingConditions": False})
    return case


def _locked_gate_case() -> dict[str, Any]:
    """locked-gate: one GPU asked with DRAAdminAccess off: allocated up to 1.35; from 1.36 the gate is GA and
    locked on, and kube-scheduler refuses to start ("cannot set feature gate DRAAdminAccess to false, ...")."""
    case = _distinct_case("locked", {}, "resource.kubernetes.io/pcieRoot", ["a"])
    case["claims"][0]["spec"]["devices"].pop("constraints")
    case["gate_overrides"] = {"DRAAdminAccess": False}
    return case


def _shared_bandwidth_case(name: str, requests: list[str], policy: dict[str, Any] | None, value: str = "10",
                           mode: str | None = None, gates: dict[str, bool] | None = None) -> dict[str, Any]:
    """Two shared GPUs with `value` of bandwidth under `policy`; one claim per entry of `requests`."""
    case = _distinct_case(name, {}, "resource.kubernetes.io/pcieRoot", ["a", "b"])
    bandwidth: dict[str, Any] = {"value": value}
    if policy:
        bandwidth["requestPolicy"] = policy
    for d in case["slices"][0]["spec"]["devices"]:
        d.update({"allowMultipleAllocations": True, "capacity": {"bandwidth": bandwidth}})
    claim = case["claims"][0]
    case["claims"] = []
    for i, amount in enumerate(requests):
        exactly: dict[str, Any] = {"deviceClassName": "gpu", "capacity": {"requests": {"bandwidth": amount}}}
        if mode:
            exactly["allocationMode"] = mode
        case["claims"].append({**claim, "metadata": _meta(f"{name}-{i}", "default"),
                               "spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}}})
    case["gate_overrides"] = {"DRAConsumableCapacity": True, **(gates or {})}
    return case


def _capacity_cases(minor: int) -> list[tuple[str, dict[str, Any], str]]:
    """Consumable capacity at the edges 1.37 changed (scheduler/dra/capacity.py).

    negative-capacity-request: a stored claim asking for -1 (admission refuses it today): 1.37 aborts
    ("capacity value is negative"), before it the device is shared with -1 consumed. From 1.37 only:
    fractional-range: DRAFractionalCapacityRange on, 600m and 1.1 over {min 500m, max 8, step 250m}: 750m
    and 1250m (off: 1 and 2, the whole-unit rounding); fractional-unrepresentable: 100Ei (read as int64's
    largest) is no whole number of thousandths in int64: the allocation aborts; fractional-all-mode: All
    devices for -1: the error names the device without its driver and pool; fractional-needs-consumable:
    DRAFractionalCapacityRange without DRAConsumableCapacity: the scheduler does not start."""
    if minor < 34:
        return []
    out = [("negative-capacity-request", _shared_bandwidth_case("negative", ["-1"], None), "20s")]
    if minor < 37:
        return out
    on = {"DRAFractionalCapacityRange": True}
    steps = {"default": "500m", "validRange": {"min": "500m", "max": "8", "step": "250m"}}
    whole = {"validRange": {"min": "1", "step": "1"}}
    return [
        *out,
        ("fractional-range", _shared_bandwidth_case("fractional", ["600m", "1.1"], steps, gates=on), "20s"),
        ("fractional-range-off", _shared_bandwidth_case("whole", ["600m", "1.1"], steps), "20s"),
        ("fractional-unrepresentable", _shared_bandwidth_case("huge", ["100Ei"], whole, "200Ei", gates=on), "20s"),
        ("fractional-all-mode", _shared_bandwidth_case("all", ["-1"], None, mode="All", gates=on), "20s"),
        ("fractional-needs-consumable", dict(_shared_bandwidth_case("gates", ["600m"], steps), gate_overrides={
            "DRAFractionalCapacityRange": True, "DRAConsumableCapacity": False}), "20s"),
    ]


def _held(driver: str, pool: str, device: str, extra: dict[str, Any]) -> dict[str, Any]:
    """A claim another pod holds, with one device."""
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": _meta("held", "other"),
            "spec": {"devices": {"requests": [{"name": "req", "exactly": {"deviceClassName": "x"}}]}},
            "status": {"allocation": {"devices": {"results": [
                {"request": "req", "driver": driver, "pool": pool, "device": device, **extra}]}}}}


def _same_pool_name_case() -> dict[str, Any]:
    """counters-per-driver: a GPU and a NIC driver each publish pool `p` with a counter set `set-0` of 10Gi
    and one device consuming all of it; one claim asks for a GPU and a NIC. 1.37 keeps counters per driver
    and pool: both fit. Before, per pool name: the NIC draws on the GPU pool's set, spent: unschedulable."""
    slices: list[dict[str, Any]] = []
    for driver, device in (("gpu.example.com", "gpu-0"), ("nic.example.com", "nic-0")):
        spec: dict[str, Any] = {"driver": driver, "pool": {"name": "p", "generation": 1, "resourceSliceCount": 2},
                                "nodeName": "node-a"}
        slices.append({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
                       "metadata": _meta(f"{device}-counters"), "spec": dict(spec, sharedCounters=[
                           {"name": "set-0", "counters": {"memory": {"value": "10Gi"}}}])})
        slices.append({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": _meta(device),
                       "spec": dict(spec, devices=[{"name": device, "consumesCounters": [
                           {"counterSet": "set-0", "counters": {"memory": {"value": "10Gi"}}}]}])})
    classes = [{"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": _meta(k),
                "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{k}.example.com"'}}]}}
               for k in ("gpu", "nic")]
    claim = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": _meta("c0", "default"),
             "spec": {"devices": {"requests": [{"name": "r0", "exactly": {"deviceClassName": "gpu"}},
                                               {"name": "r1", "exactly": {"deviceClassName": "nic"}}]}}}
    return {"gate_overrides": {"DRAPartitionableDevices": True}, "node": {"name": "node-a", "labels": {}},
            "slices": slices, "classes": classes, "claims": [claim], "allocated": []}


def numalign(case: dict[str, Any], version: str) -> dict[str, Any]:
    return answer(dict(case, version=version), version)


def equivalent(ours: Any, theirs: Any) -> bool:
    """1.34 and 1.35 range over a Go map of pools: the harness gives every answer it saw ("map_order"),
    and numalign's (sorted pools) must be one of them."""
    if isinstance(theirs, dict) and "map_order" in theirs:
        return any(_same(ours, one) for one in theirs["map_order"])
    return _same(ours, theirs)


def _same(ours: Any, theirs: Any) -> bool:
    if not isinstance(theirs, dict) or ours.get("outcome") != theirs.get("outcome"):
        return False
    if theirs["outcome"] == "gates":  # the scheduler refuses to start; numalign's line adds the fix
        return bool(str(ours.get("message", "")).startswith(theirs.get("message", "")))
    if theirs["outcome"] == "ok":
        return bool(ours["claims"] == [[dict(sorted(e.items())) for e in c] for c in theirs["claims"]])
    return bool(ours.get("message") == theirs.get("message"))


def size(case: dict[str, Any]) -> int:
    return sum(len(s["spec"].get("devices", [])) for s in case["slices"]) + 3 * len(case["claims"])
