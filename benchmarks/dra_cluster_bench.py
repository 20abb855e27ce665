"""`simulate` with DRA against the same simulation without it, on 1,000 nodes (issue 23: at most
twice the cost): `scripts/bench dra [--nodes N] [--pods N]`.

Both runs place the same pods on 1,000 dual-socket nodes with 2 GPUs per NUMA node, the default
scheduler, single-numa-node: once with the GPUs as device-plugin devices (nvidia.com/gpu), once as DRA
devices (a ResourceSlice per node, each pod's claim from a template: 2 GPUs matched on numaNode). Each
run is a fresh process; CPU time (user + system) is what is compared, with the machine's load average
beside each figure.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

CHILD = """
import json, os, resource, sys, time
from pathlib import Path
from numalign.cluster.examples import gpu_node
from numalign.cluster.model import Cluster, NodePool, example_config
from numalign.cluster.simulate import RunSpec, run_one
from numalign.cluster.workload import Workload, WorkloadGroup, load_workload
from numalign.k8s.manifest import pods_from_yaml
import dataclasses
nodes, pods, dra = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "dra"
machine = gpu_node()
if dra:
    from numalign.machine.shorthand import dra_devices_per_numa_node
    machine = dataclasses.replace(machine, devices=(), dra_devices=dra_devices_per_numa_node(
        {"gpu.example.com": {"count": 2, "attributes": {"model": "h100"}}}, machine.numa_ids(), 0x40, "bench"))
cluster = Cluster("bench", (NodePool("gpu", nodes, machine, example_config()),))
gpu = "" if dra else ", nvidia.com/gpu: 2"
claims = "  resourceClaims: [{name: g, resourceClaimTemplateName: two}]\\n" if dra else ""
uses = "      claims: [{name: g}]\\n" if dra else ""
manifest = f\"\"\"
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {{name: gpu}}
spec:
  selectors:
  - cel: {{expression: 'device.driver == "gpu.example.com"'}}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {{name: two}}
spec:
  spec:
    devices:
      requests: [{{name: g, exactly: {{deviceClassName: gpu, count: 2}}}}]
      constraints: [{{requests: [g], matchAttribute: resource.kubernetes.io/numaNode}}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {{name: train}}
spec:
  replicas: {pods}
  template:
    spec:
{claims.replace('  resourceClaims', '      resourceClaims')}      containers:
      - name: main
        image: x
        resources:
          limits: {{cpu: "8", memory: 32Gi{gpu}}}
{uses.replace('      claims', '          claims')}\"\"\"
path = Path(sys.argv[4])
path.write_text(manifest)
workload = load_workload([path])
load0 = os.getloadavg()[0]
r0 = resource.getrusage(resource.RUSAGE_SELF)
t0 = time.perf_counter()
r = run_one(cluster, workload, RunSpec("default"), 1)
r1 = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({"cpu": (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime), "wall": time.perf_counter() - t0,
                  "load": [load0, os.getloadavg()[0]], "placed": r.placed, "unschedulable": r.unschedulable,
                  "aligned_share": None if r.dra is None else r.dra.aligned_share,
                  "allocations": None if r.dra is None else r.dra.allocations}))
"""


def run(nodes: int, pods: int, mode: str) -> dict[str, object]:
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        out = subprocess.run([sys.executable, "-c", CHILD, str(nodes), str(pods), mode, f"{d}/w.yaml"], check=True,
                             capture_output=True, text=True).stdout
    result: dict[str, object] = json.loads(out)
    return result


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--nodes", type=int, default=1000)
    p.add_argument("--pods", type=int, default=4000)
    args = p.parse_args()
    print(f"simulate, {args.nodes} nodes, {args.pods} pods (8 CPUs, 32Gi, 2 GPUs each), default scheduler; "
          f"{os.cpu_count()} CPUs")
    plain = run(args.nodes, args.pods, "plugin")
    dra = run(args.nodes, args.pods, "dra")
    for label, r in (("device-plugin GPUs", plain), ("DRA GPUs (claims)", dra)):
        load = r["load"]
        assert isinstance(load, list)
        print(f"  {label:<20} CPU {r['cpu']:7.2f} s  wall {r['wall']:7.2f} s  load {load[0]:.1f} -> {load[1]:.1f}  "
              f"placed {r['placed']}, unschedulable {r['unschedulable']}"
              + (f", allocator runs {r['allocations']}, aligned {r['aligned_share']:.1%}" if r["allocations"] else ""))
    ratio = float(dra["cpu"]) / float(plain["cpu"])  # type: ignore[arg-type]
    print(f"  CPU time ratio DRA / device plugin: {ratio:.2f} (target: at most 2.00) -> "
          f"{'met' if ratio <= 2.0 else 'MISSED'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
