"""numalign.kubelet.versions: parsing, the supported range, gate defaults and locks, option maturity."""

from __future__ import annotations

import pytest

from numalign.errors import ConfigError, InvalidInputError
from numalign.k8s.version import DEFAULT, NEWEST_PATCH, KubeletVersion, resolve
from numalign.kubelet import versions as kv


def test_parse_forms() -> None:
    newest_136 = NEWEST_PATCH[(1, 36)]
    assert KubeletVersion.parse("1.36") == KubeletVersion(1, 36, newest_136)
    assert KubeletVersion.parse("1.36.0") == KubeletVersion(1, 36, 0)
    assert KubeletVersion.parse("v1.36.0") == KubeletVersion(1, 36, 0)
    assert KubeletVersion.parse("v1.35.0+k3s1") == KubeletVersion(1, 35, 0)
    assert KubeletVersion.parse("v1.34.0-gke.1200") == KubeletVersion(1, 34, 0)
    assert str(KubeletVersion.parse("v1.33.0")) == "1.33.0"


def test_versions_are_ordered() -> None:
    assert KubeletVersion(1, 34, 9) < KubeletVersion(1, 35, 0) < KubeletVersion(1, 35, 1)
    assert list(kv.SUPPORTED) == sorted(kv.SUPPORTED)
    assert kv.SUPPORTED[0] == KubeletVersion(1, 33, 0)


def test_default_is_the_newest_modelled_137_patch() -> None:
    assert KubeletVersion(1, 37, NEWEST_PATCH[(1, 37)]) == DEFAULT
    assert resolve(None, "x") == DEFAULT
    assert resolve("1.35.0", "x") == KubeletVersion(1, 35, 0)


@pytest.mark.parametrize("text", ["1.32.9", "1.38.0", "2.0", "1.32", "1.38"])
def test_outside_the_range_is_one_line_naming_it(text: str) -> None:
    with pytest.raises(InvalidInputError) as err:
        KubeletVersion.parse(text, where="nodes.json: node a status.nodeInfo.kubeletVersion")
    msg = str(err.value)
    assert "\n" not in msg
    assert msg.startswith("nodes.json: node a status.nodeInfo.kubeletVersion: ")
    assert text in msg and "1.33.0 to " in msg


@pytest.mark.parametrize("text", ["", "latest", "1", "1.x", "v1.36-rc.1", "1.36.0.1"])
def test_not_a_version(text: str) -> None:
    with pytest.raises(InvalidInputError) as err:
        resolve(text, "--kubelet-version")
    assert str(err.value).startswith("--kubelet-version: ") and "\n" not in str(err.value)


def test_gate_defaults_follow_the_versioned_specs() -> None:
    assert kv.feature_gate_defaults(KubeletVersion(1, 33, 0))["PodLevelResources"] is False
    assert kv.feature_gate_defaults(KubeletVersion(1, 34, 0))["PodLevelResources"] is True
    assert kv.feature_gate_defaults(KubeletVersion(1, 33, 0))["KubeletPodResourcesGet"] is False


def test_a_gate_the_version_does_not_have_is_refused() -> None:
    with pytest.raises(ConfigError, match="unrecognized feature gate: PodLevelResourceManagers"):
        kv.check_feature_gates({"PodLevelResourceManagers": False}, KubeletVersion(1, 35, 0), "--feature-gates")
    kv.check_feature_gates({"PodLevelResourceManagers": True}, KubeletVersion(1, 36, 0), "--feature-gates")


def test_check_feature_gates_refuses_a_locked_gate_set_against_its_lock() -> None:
    kv.check_feature_gates({"InPlacePodVerticalScaling": True}, DEFAULT, "--feature-gates")
    with pytest.raises(ConfigError) as err:
        kv.check_feature_gates({"InPlacePodVerticalScaling": False}, DEFAULT, "--feature-gates")
    assert str(err.value).startswith(
        "--feature-gates: cannot set feature gate InPlacePodVerticalScaling to false, feature is locked to true")


def test_behaviours_name_the_device_hint_change() -> None:
    assert not kv.behaviours(KubeletVersion(1, 35, 0)).device_hints_over_device_numa_nodes
    assert kv.behaviours(KubeletVersion(1, 36, 0)).device_hints_over_device_numa_nodes


def test_a_node_carries_its_version() -> None:
    from numalign.k8s.kubeletconfig import KubeletConfig
    from numalign.kubelet.node import Node
    from numalign.machine.examples import example

    node = Node(example("dual-socket"), KubeletConfig())
    assert node.kubelet_version == DEFAULT
    old = Node(example("dual-socket"), KubeletConfig(), kubelet_version=KubeletVersion(1, 33, 0))
    assert old.kubelet_version == KubeletVersion(1, 33, 0)
    assert old.gates["PodLevelResources"] is False


def test_the_138_preview_no_longer_knows_in_place_pod_vertical_scaling() -> None:
    """pkg/features of v1.38.0-beta.0 drops InPlacePodVerticalScaling (GA and locked since 1.35)."""
    preview = KubeletVersion.parse("1.38.0-beta.0")
    assert "InPlacePodVerticalScaling" not in kv.feature_gate_defaults(preview)
    with pytest.raises(ConfigError) as err:
        kv.check_feature_gates({"InPlacePodVerticalScaling": True}, preview, "--feature-gates")
    assert str(err.value).startswith("--feature-gates: unrecognized feature gate: InPlacePodVerticalScaling; ")
    assert "removed in 1.38" in str(err.value)
    assert "TopologyManagerPolicyOptions" in kv.locked_gates(preview)


def test_a_start_is_kept_per_machine_config_version_and_previews_and_a_refusal_is_not() -> None:
    # Kubelets built from the same four objects (a simulated pool) share one start-up; a refused
    # configuration is refused again on every start, and an equal but distinct configuration starts anew.
    import dataclasses

    from numalign.k8s.kubeletconfig import KubeletConfig
    from numalign.k8s.previews import NO_PREVIEWS
    from numalign.kubelet.startup import start
    from numalign.machine.examples import example

    machine, config = example("dual-socket"), KubeletConfig()
    first = start(machine, config, DEFAULT, NO_PREVIEWS)
    assert start(machine, config, DEFAULT, NO_PREVIEWS) is first
    again = start(machine, dataclasses.replace(config), DEFAULT, NO_PREVIEWS)
    assert again is not first and again == first
    old = start(machine, config, KubeletVersion(1, 35, 0), NO_PREVIEWS)
    assert old.behaviours.version == KubeletVersion(1, 35, 0)
    refused = dataclasses.replace(config, feature_gates={"InPlacePodVerticalScaling": False})
    for _ in range(2):
        with pytest.raises(ConfigError):
            start(machine, refused, DEFAULT, NO_PREVIEWS)
