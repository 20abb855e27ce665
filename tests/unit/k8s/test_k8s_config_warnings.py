"""Unknown KubeletConfiguration fields and feature gates: warned about, never fatal."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from numalign.adapters.grpc.podresources import GATE_GET
from numalign.cli.options.kubeletflags import CONFIG_DEST, FLAGS_DEST, config_from_args
from numalign.core.policies import options as tm_options
from numalign.errors import ConfigError
from numalign.k8s.kubeletconfig import KubeletConfig
from numalign.k8s.kubeletconfig_flags import apply_flags
from numalign.k8s.kubeletconfig_read import (
    _FILE_FIELDS,
    KNOWN_FEATURE_GATES,
    KUBELET_CONFIGURATION_FIELDS,
    config_from_yaml,
    unknown_field_warnings,
    unknown_gate_warnings,
)
from numalign.kubelet.cpumanager import options as cpu_options

HEAD = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"


def test_every_field_numalign_reads_is_a_kubelet_field() -> None:
    assert set(_FILE_FIELDS) <= KUBELET_CONFIGURATION_FIELDS


def test_known_gates_are_the_ones_the_managers_read() -> None:
    used = {cpu_options.ALPHA_GATE, cpu_options.BETA_GATE, tm_options.ALPHA_GATE, tm_options.BETA_GATE, GATE_GET,
            "PodLevelResources"}
    assert set(KNOWN_FEATURE_GATES) == used
    # The managers' own defaults agree with the table KubeletConfig.feature_gate_enabled falls back on.
    for gate, default in {**cpu_options.DEFAULT_FEATURE_GATES, **tm_options.DEFAULT_GATES}.items():
        assert KubeletConfig().feature_gate_enabled(gate) is default
    assert KubeletConfig().feature_gate_enabled(GATE_GET) is True


def test_pod_level_resources_gate_is_modelled_on_by_default_and_parsed() -> None:
    assert KubeletConfig().feature_gate_enabled("PodLevelResources") is True  # beta, on since 1.34
    off = apply_flags(KubeletConfig(), [("--feature-gates", "PodLevelResources=false")])
    assert off.feature_gates == {"PodLevelResources": False}
    assert off.feature_gate_enabled("PodLevelResources") is False
    from_file = config_from_yaml(HEAD + "featureGates: {PodLevelResources: false}\n")
    assert from_file.feature_gate_enabled("PodLevelResources") is False
    assert unknown_gate_warnings({"PodLevelResources": True}, "--feature-gates") == []
    assert KubeletConfig().feature_gate_enabled("SomeGateNumalignDoesNotModel") is False


@pytest.mark.parametrize(("key", "guess"), [
    ("cpuManagerPolicyTypo", "cpuManagerPolicy"),
    ("CPUManagerPolicy", "cpuManagerPolicy"),  # the kubelet's decoder is case-sensitive
    ("topologyManagerPolicyOption", "topologyManagerPolicyOptions"),
    ("reservedMemroy", "reservedMemory"),
    ("somethingElseEntirely", None),
])
def test_unknown_field_names_the_likely_key(key: str, guess: str | None) -> None:
    (message,) = unknown_field_warnings({"apiVersion": "x", key: 1, "maxPods": 110}, "kc.yaml")
    assert message.startswith(f'kc.yaml: unknown field "{key}" in the KubeletConfiguration (the kubelet ignores it')
    if guess is None:
        assert "did you mean" not in message
    else:
        assert message.endswith(f'; did you mean "{guess}"?')


def test_unknown_gates_only() -> None:
    assert unknown_gate_warnings({"CPUManagerPolicyAlphaOptions": True}, "--feature-gates") == []
    (message,) = unknown_gate_warnings({"Nope": True, "KubeletPodResourcesGet": False}, "--feature-gates")
    assert message.startswith('--feature-gates: feature gate "Nope" is not modelled by numalign and has no effect '
                              "here (numalign models CPUManagerPolicyAlphaOptions")
    assert "did you mean" not in message


@pytest.mark.parametrize("gate", ["DRAResourceClaimDeviceStatus", "InPlacePodVerticalScaling", "Nope"])
def test_gate_warning_never_claims_the_kubelet_refuses(gate: str) -> None:
    # numalign has no list of every kubelet gate: a real gate it does not model must not be called fatal.
    (message,) = unknown_gate_warnings({gate: True}, "--feature-gates")
    assert "refuse" not in message and "unrecognized" not in message
    assert "has no effect here" in message


def test_many_unmodelled_gates_share_one_warning() -> None:
    # An OpenShift kubelet.conf names the cluster's whole gate set: one line for all, a near-miss apart.
    gates = {"RotateKubeletServerCertificate": True, "APIPriorityAndFairness": True,
             "CPUManagerPolicyAlphaOption": True, "DownwardAPIHugePages": True, "PodLevelResources": True}
    listed, near_miss = unknown_gate_warnings(gates, "kubelet.conf: featureGates")
    assert listed.startswith('kubelet.conf: featureGates: 3 feature gates "RotateKubeletServerCertificate", '
                             '"APIPriorityAndFairness" and "DownwardAPIHugePages" are not modelled by numalign '
                             "and have no effect here (numalign models CPUManagerPolicyAlphaOptions")
    assert listed.count("numalign models") == 1 and "PodLevelResources" in listed  # only in the modelled list
    assert near_miss.startswith('kubelet.conf: featureGates: feature gate "CPUManagerPolicyAlphaOption" is not')
    assert near_miss.endswith('; did you mean "CPUManagerPolicyAlphaOptions"?')


def test_a_misspelt_modelled_gate_is_named() -> None:
    (message,) = unknown_gate_warnings({"CPUManagerPolicyAlphaOption": True}, "--feature-gates")
    assert message.endswith('; did you mean "CPUManagerPolicyAlphaOptions"?')


def test_config_from_args_warns_and_still_reads_the_file(tmp_path: Path) -> None:
    path = tmp_path / "kc.yaml"
    path.write_text(HEAD + "cpuManagerPolicy: static\ncpuManagerPolicyTypo: x\nfeatureGates: {Nope: true}\n")
    warnings: list[str] = []
    args = argparse.Namespace(**{CONFIG_DEST: str(path), FLAGS_DEST: [("--feature-gates", "Other=false")]})
    config = config_from_args(args, warn=warnings.append)
    assert config.cpu_manager_policy == "static"
    assert config.feature_gates == {"Nope": True, "Other": False}
    assert len(warnings) == 3
    assert warnings[0].startswith(f'{path}: unknown field "cpuManagerPolicyTypo"')
    assert warnings[0].endswith('did you mean "cpuManagerPolicy"?')
    assert warnings[1].startswith(f'{path}: featureGates: feature gate "Nope" is not modelled by numalign')
    assert warnings[2].startswith('--feature-gates: feature gate "Other" is not modelled by numalign')


def test_flags_override_a_base_field_by_field() -> None:
    base = KubeletConfig(cpu_manager_policy="static", topology_manager_policy="single-numa-node")
    args = argparse.Namespace(**{CONFIG_DEST: None, FLAGS_DEST: [("--topology-manager-policy", "restricted")]})
    got = config_from_args(args, base=base)
    assert (got.cpu_manager_policy, got.topology_manager_policy) == ("static", "restricted")
    assert config_from_args(argparse.Namespace()) == KubeletConfig()


def test_config_file_syntax_error_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "kc.yaml"
    path.write_text(HEAD + "cpuManagerPolicy: [static\nfoo: 1\n")
    with pytest.raises(ConfigError) as info:
        config_from_args(argparse.Namespace(**{CONFIG_DEST: str(path)}))
    message = str(info.value)
    assert message.startswith(f"{path}: line 4, column 4: ") and "\n" not in message
    assert "expected a KubeletConfiguration (apiVersion: kubelet.config.k8s.io/v1beta1" in message


def test_the_cli_knows_every_versioned_gate(tmp_path: Path) -> None:
    """A gate numalign.kubelet.versions models (refused or read by some version) is not called inert."""
    from numalign.kubelet.versions import KNOWN_GATES

    args = argparse.Namespace(**{CONFIG_DEST: None, FLAGS_DEST: [
        ("--feature-gates", "PodLevelResourceManagers=false,InPlacePodVerticalScaling=true")]})
    warnings: list[str] = []
    config_from_args(args, warn=warnings.append)
    assert warnings == []
    assert {"PodLevelResourceManagers", "InPlacePodVerticalScaling"} <= set(KNOWN_GATES)
