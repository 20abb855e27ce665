"""Random admit/remove sequences through a whole Node, with the kubelet's state files.

Invariants: no CPU or device is held by two pods; memory free + reserved == allocatable on every NUMA
node; exclusive CPUs never include reserved ones; and a restart from the files reproduces the state,
or is refused exactly where upstream's memory manager refuses its own state (see restart()).
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from support.configs import static_node_config
from support.strategies import pod_shapes

from numalign.adapters.statedir.directory import StateDirectory
from numalign.errors import CheckpointError
from numalign.k8s.pod import Container, Pod
from numalign.k8s.quantity import Quantity
from numalign.kubelet.cpumanager.policy_static import StaticPolicy
from numalign.kubelet.memorymanager.policy_static import MemoryManagerStatic
from numalign.kubelet.node import Node
from numalign.machine.examples import example

Q = Quantity.parse


def container(name: str, cpu: int, mem_gi: int, gpus: int, nics: int, init: bool = False) -> Container:
    limits = {"cpu": Q(str(cpu)), "memory": Q(f"{mem_gi}Gi")}
    if gpus:
        limits["nvidia.com/gpu"] = Q(str(gpus))
    if nics:
        limits["intel.com/sriov_netdevice"] = Q(str(nics))
    return Container(name, requests=dict(limits), limits=limits, is_init=init)


class NodeMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="numalign-node-"))
        self.node: Node | None = None
        self.count = 0

    @rule(policy=st.sampled_from(["best-effort", "restricted", "single-numa-node"]),
          scope=st.sampled_from(["container", "pod"]))
    @precondition(lambda self: self.node is None)
    def boot(self, policy: str, scope: str) -> None:
        self.config = static_node_config(policy, scope, reserved="0,64")
        self.node = Node(example("dual-socket"), self.config, store=StateDirectory(self.dir), static_devices=True)

    @rule(shape=pod_shapes)
    @precondition(lambda self: self.node is not None)
    def admit(self, shape: tuple[int, int, int, int, bool, bool]) -> None:
        assert self.node is not None
        cpu, mem, gpus, nics, with_init, guaranteed = shape
        self.count += 1
        app = container("app", cpu, mem, gpus, nics)
        if not guaranteed:
            app = Container("app", requests={"cpu": Q("100m")}, limits={"cpu": Q(str(cpu))})
        inits = (container("init", max(1, cpu // 2), 1, 0, 0, init=True),) if with_init and guaranteed else ()
        pod = Pod(name=f"p{self.count}", uid=f"uid-{self.count}", init_containers=inits, containers=(app,))
        self.node.admit(pod)

    @rule(data=st.data())
    @precondition(lambda self: self.node is not None and bool(self.node.pods))
    def remove(self, data: st.DataObject) -> None:
        assert self.node is not None
        uid = data.draw(st.sampled_from(sorted(self.node.pods)))
        self.node.remove(uid)

    @rule()
    @precondition(lambda self: self.node is not None)
    def restart(self) -> None:
        assert self.node is not None
        before = self._state(self.node)
        try:
            restarted = Node(example("dual-socket"), self.config, store=StateDirectory(self.dir), static_devices=True)
        except CheckpointError as e:
            # Upstream's memory manager lets a single-NUMA block land on a node of a multi-NUMA group
            # (its grouping check skips single-node masks) and overwrites the node's Cells; its own
            # validateState then refuses the state at the next start. numalign does the same, and
            # only then: the operator's fix is to drain the node and delete the state.
            assert "the expected machine state is different from the real one" in str(e)
            assert self._group_overwritten(self.node), "refused a restart upstream would accept"
            shutil.rmtree(self.dir)
            self.node = None
            return
        assert self._state(restarted) == before
        self.node = restarted

    @staticmethod
    def _group_overwritten(node: Node) -> bool:
        assert isinstance(node.memory, MemoryManagerStatic)
        state = node.memory.machine_state
        return any(
            len(b.numa_affinity) > 1 and sorted(state[n].cells) != sorted(b.numa_affinity)
            for containers in node.memory.assignments.values()
            for blocks in containers.values()
            for b in blocks
            for n in b.numa_affinity
        )

    @staticmethod
    def _state(node: Node) -> object:
        assert isinstance(node.cpu, StaticPolicy) and isinstance(node.memory, MemoryManagerStatic)
        cpu = node.cpu.snapshot().to_strings()
        mem = node.memory.snapshot()
        devs = {
            (uid, c.name): node.devices.get_container_devices(uid, c.name)
            for uid, p in node.pods.items()
            for c in p.all_containers()
        }
        return cpu, mem, sorted(node.pods), repr(sorted(devs.items()))

    @invariant()
    def nothing_given_twice(self) -> None:
        if self.node is None:
            return
        node = self.node
        assert isinstance(node.cpu, StaticPolicy) and isinstance(node.memory, MemoryManagerStatic)
        cpu_owner: dict[int, str] = {}
        dev_owner: dict[str, str] = {}
        for uid, pod in node.pods.items():
            for c in pod.all_containers():
                own = node.cpu.get_cpu_set(uid, c.name) or frozenset()
                assert not own & node.cpu.reserved_cpus
                for cpu in own:
                    assert cpu_owner.setdefault(cpu, uid) == uid, f"CPU {cpu} given to two pods"
                assert not own & node.cpu.get_default_cpu_set()
                for res, ids in (node.devices.get_container_devices(uid, c.name) or {}).items():
                    for d in ids:
                        assert dev_owner.setdefault(f"{res}/{d}", uid) == uid, f"device {d} given twice"
        # free + allocated == allocatable: the shared pool plus every exclusive set covers all CPUs
        exclusive = set(cpu_owner)
        assert exclusive | node.cpu.get_default_cpu_set() == set(node.cpu.topology.details.cpus())
        for nid, ns in node.memory.machine_state.items():
            for res, t in ns.memory_map.items():
                assert t.free + t.reserved == t.allocatable, (nid, res)

    def teardown(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)


NodeMachine.TestCase.settings = settings(max_examples=25, stateful_step_count=12)
TestNodeStateful = NodeMachine.TestCase
