"""Every step of the version table, tested on each side: the last supported version before the step
and the first with it, through a real Node (its start-up refusals and the gates it runs with).

A step at a minor whose predecessor is not supported (1.33's steps: 1.32 is out of range) is tested on
its own side only; test_every_step_in_range_has_both_sides says which."""

from __future__ import annotations

import pytest

from numalign.core.policies.options import Maturity
from numalign.errors import ConfigError, InvalidInputError
from numalign.k8s.kubeletconfig import KubeletConfig
from numalign.k8s.pod import Container, Pod
from numalign.k8s.quantity import Quantity
from numalign.k8s.version import KubeletVersion
from numalign.kubelet import versions as kv
from numalign.kubelet.node import Node
from numalign.machine.shorthand import parse_shorthand

MACHINE = parse_shorthand("1s x 2n x 4c x 2t, 8Gi/node")
OLDEST_MINOR = kv.OLDEST.minor_key


def first_of(minor: tuple[int, int]) -> KubeletVersion:
    return KubeletVersion(minor[0], minor[1], 0)


def last_before(minor: tuple[int, int]) -> KubeletVersion | None:
    older = [x for x in kv.SUPPORTED if x.minor_key < minor]
    return max(older) if older else None


OPTION_STEPS = [
    (o, i) for o in kv.POLICY_OPTIONS for i, step in enumerate(o.steps)
    if OLDEST_MINOR <= step.since <= kv.NEWEST.minor_key
]
GATE_STEPS = [
    (g, i) for g in kv.FEATURE_GATES for i, st in enumerate(g.stages) if OLDEST_MINOR <= st.since <= kv.NEWEST.minor_key
]


def node_with_option(option: kv.OptionSpec, version: KubeletVersion, gates: dict[str, bool]) -> Node:
    value = "9" if option.name == "max-allowable-numa-nodes" else "true"
    if option.manager == "topology":
        config = KubeletConfig(topology_manager_policy="best-effort",
                               topology_manager_policy_options={option.name: value}, feature_gates=gates)
    else:
        config = KubeletConfig(cpu_manager_policy="static", cpu_manager_policy_options={option.name: value},
                               kube_reserved={"cpu": Quantity.parse("1")}, feature_gates=gates)
    return Node(MACHINE, config, kubelet_version=version)


def accepted(option: kv.OptionSpec, version: KubeletVersion, gates: dict[str, bool]) -> bool:
    try:
        node_with_option(option, version, gates)
    except ConfigError as e:
        assert "option" in str(e) and option.name in str(e)
        return False
    return True


def gates_refusing(option: kv.OptionSpec, maturity: Maturity | None) -> dict[str, bool]:
    """The gate settings under which an option of `maturity` is refused (its own gate off)."""
    if maturity is None or maturity is Maturity.STABLE:
        return {}
    return {kv.OPTION_GATES[option.manager][maturity]: False}


OPTION_IDS = [f"{o.name}@{o.steps[i].since}" for o, i in OPTION_STEPS]
GATE_IDS = [f"{g.name}@{g.stages[i].since}" for g, i in GATE_STEPS]


@pytest.mark.parametrize(("option", "index"), OPTION_STEPS, ids=OPTION_IDS)
def test_option_step_each_side(option: kv.OptionSpec, index: int) -> None:
    step = option.steps[index]
    before = option.steps[index - 1].maturity if index else None
    refusing = gates_refusing(option, before)
    # First version with the step: the option is accepted under the gates that refused it before.
    assert accepted(option, first_of(step.since), refusing)
    assert kv.option_maturity(option.manager, first_of(step.since))[option.name] is step.maturity
    prev = last_before(step.since)
    if prev is not None:
        assert kv.option_maturity(option.manager, prev).get(option.name) is before
        assert not accepted(option, prev, refusing)


@pytest.mark.parametrize(("gate", "index"), GATE_STEPS, ids=GATE_IDS)
def test_gate_step_each_side(gate: kv.GateSpec, index: int) -> None:
    stage = gate.stages[index]
    first = first_of(stage.since)
    node = Node(MACHINE, KubeletConfig(), kubelet_version=first)
    assert node.gates[gate.name] is stage.default
    if stage.locked:
        with pytest.raises(ConfigError, match=f"cannot set feature gate {gate.name} to"):
            Node(MACHINE, KubeletConfig(feature_gates={gate.name: not stage.default}), kubelet_version=first)
    prev = last_before(stage.since)
    if prev is None:
        return
    before = gate.stages[index - 1] if index else None
    if before is None:
        assert gate.name not in Node(MACHINE, KubeletConfig(), kubelet_version=prev).gates
        with pytest.raises(ConfigError, match=f"unrecognized feature gate: {gate.name}"):
            Node(MACHINE, KubeletConfig(feature_gates={gate.name: stage.default}), kubelet_version=prev)
        return
    assert Node(MACHINE, KubeletConfig(), kubelet_version=prev).gates[gate.name] is before.default
    if stage.locked and not before.locked:
        # Before the lock the other value is the user's to choose.
        Node(MACHINE, KubeletConfig(feature_gates={gate.name: not stage.default}), kubelet_version=prev)


def test_every_step_in_range_has_both_sides() -> None:
    steps = [*(o.steps[i].since for o, i in OPTION_STEPS), *(g.stages[i].since for g, i in GATE_STEPS)]
    assert len(steps) == len(OPTION_IDS) + len(GATE_IDS) >= 15
    assert {s for s in steps if last_before(s) is None} <= {OLDEST_MINOR}


def test_changes_are_tested_on_each_side() -> None:
    """Each CHANGES entry names the versions its own test module checks (test_device_hints_by_version)."""
    for change in kv.CHANGES:
        for first in change.since:
            assert kv.has_change(change.name, first)
            prev = change.last_without(first.minor_key) or last_before(first.minor_key)
            assert prev is not None and not kv.has_change(change.name, prev)


def pod_level_pod() -> Pod:
    two = {"cpu": Quantity.parse("2"), "memory": Quantity.parse("1Gi")}
    return Pod("plr", uid="plr", containers=(Container("c"),), pod_requests=dict(two), pod_limits=dict(two))


@pytest.mark.parametrize("version", ["1.36.0", "1.37"])
def test_pod_level_resource_managers_on_is_said_not_modelled(version: str) -> None:
    config = KubeletConfig(cpu_manager_policy="static", kube_reserved={"cpu": Quantity.parse("1")},
                           feature_gates={"PodLevelResourceManagers": True})
    node = Node(MACHINE, config, kubelet_version=KubeletVersion.parse(version))
    with pytest.raises(InvalidInputError, match=r"does not model pod-level resource managers \(KEP-5526\)"):
        node.admit(pod_level_pod())
    assert node.pods == {}


def test_pod_level_resource_managers_off_decides_as_before() -> None:
    config = KubeletConfig(cpu_manager_policy="static", kube_reserved={"cpu": Quantity.parse("1")})
    for version in ("1.35", "1.36.0", "1.37"):
        rec = Node(MACHINE, config, kubelet_version=KubeletVersion.parse(version)).admit(pod_level_pod())
        assert rec.result.admit, version


def test_topology_options_need_their_gate() -> None:
    """cmd/kubelet/app/server.go: options set with TopologyManagerPolicyOptions off stop the kubelet."""
    options = {"prefer-closest-numa-nodes": "true", "max-allowable-numa-nodes": "9"}
    config = KubeletConfig(topology_manager_policy="best-effort", topology_manager_policy_options=options,
                           feature_gates={"TopologyManagerPolicyOptions": False})
    with pytest.raises(ConfigError) as err:
        Node(MACHINE, config, kubelet_version=KubeletVersion.parse("1.35"))
    assert str(err.value).startswith(
        "topology manager policy options map[max-allowable-numa-nodes:9 prefer-closest-numa-nodes:true] require "
        'feature gates "TopologyManagerPolicyOptions" enabled')
    Node(MACHINE, KubeletConfig(feature_gates={"TopologyManagerPolicyOptions": False}),
         kubelet_version=KubeletVersion.parse("1.35"))


@pytest.mark.parametrize("version", ["1.36.0", "1.36", "1.37"])
def test_topology_manager_policy_options_gate_is_locked_from_136(version: str) -> None:
    """Issue 33 (b): the 1.36 kubelet's feature spec locks TopologyManagerPolicyOptions to true, so setting it
    false stops the kubelet whether or not any topologyManagerPolicyOptions are set."""
    with pytest.raises(ConfigError) as err:
        Node(MACHINE, KubeletConfig(feature_gates={"TopologyManagerPolicyOptions": False}),
             kubelet_version=KubeletVersion.parse(version))
    assert str(err.value).startswith(
        "featureGates (--feature-gates): cannot set feature gate TopologyManagerPolicyOptions to false, feature is "
        "locked to true")
