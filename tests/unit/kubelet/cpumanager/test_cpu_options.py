"""CPU manager policy options: parsing, gates, exclusive pairs, align-by-socket validation."""

from __future__ import annotations

import pytest

from numalign.errors import ConfigError
from numalign.kubelet.cpumanager.options import (
    StaticPolicyOptions,
    check_none_policy_options,
    new_static_policy_options,
    parse_go_bool,
    validate_static_policy_options,
)

ALPHA_ON = {"CPUManagerPolicyAlphaOptions": True}


def test_defaults_accept_stable_and_beta() -> None:
    opts = new_static_policy_options({"full-pcpus-only": "true", "strict-cpu-reservation": "True"})
    assert opts == StaticPolicyOptions(full_pcpus_only=True, strict_cpu_reservation=True)
    assert opts.to_map() == {"full-pcpus-only": "true", "strict-cpu-reservation": "true"}


@pytest.mark.parametrize("text", ["1", "t", "T", "TRUE", "true", "True"])
def test_go_bool_true(text: str) -> None:
    assert parse_go_bool(text) is True


@pytest.mark.parametrize("text", ["yes", "on", "", " true", "tRUE"])
def test_go_bool_invalid(text: str) -> None:
    assert parse_go_bool(text) is None


def test_unknown_option() -> None:
    with pytest.raises(ConfigError, match='unknown CPU Manager Policy option: "make-it-fast"'):
        new_static_policy_options({"make-it-fast": "true"})


def test_alpha_needs_gate() -> None:
    with pytest.raises(ConfigError, match='Alpha-level Options not enabled, but option "align-by-socket"'):
        new_static_policy_options({"align-by-socket": "true"})
    assert new_static_policy_options({"align-by-socket": "true"}, ALPHA_ON).align_by_socket


def test_beta_gate_can_be_turned_off() -> None:
    with pytest.raises(ConfigError, match="Beta-level Options not enabled"):
        new_static_policy_options(
            {"distribute-cpus-across-numa": "true"}, {"CPUManagerPolicyBetaOptions": False}
        )
    # full-pcpus-only is GA: no gate needed.
    assert new_static_policy_options({"full-pcpus-only": "true"}, {"CPUManagerPolicyBetaOptions": False})


def test_bad_value() -> None:
    with pytest.raises(
        ConfigError,
        match=r'bad value for option "full-pcpus-only": strconv\.ParseBool: parsing "yes": invalid syntax',
    ):
        new_static_policy_options({"full-pcpus-only": "yes"})


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("full-pcpus-only", "distribute-cpus-across-cores"),
        ("distribute-cpus-across-numa", "distribute-cpus-across-cores"),
        ("prefer-align-cpus-by-uncorecache", "distribute-cpus-across-cores"),
        ("prefer-align-cpus-by-uncorecache", "distribute-cpus-across-numa"),
    ],
)
def test_exclusive_pairs(a: str, b: str) -> None:
    with pytest.raises(ConfigError, match=f"static policy options {a} and {b} can not be used at the same time"):
        new_static_policy_options({a: "true", b: "true"}, ALPHA_ON)
    # Disabled options do not conflict.
    new_static_policy_options({a: "true", b: "false"}, ALPHA_ON)


def test_align_by_socket_validation() -> None:
    opts = StaticPolicyOptions(align_by_socket=True)
    with pytest.raises(ConfigError, match="single-numa-node policy is incompatible"):
        validate_static_policy_options(opts, 2, 2, "single-numa-node")
    with pytest.raises(ConfigError, match="number of sockets are more than number of NUMA"):
        validate_static_policy_options(opts, 4, 2, "restricted")
    validate_static_policy_options(opts, 2, 4, "restricted")
    validate_static_policy_options(StaticPolicyOptions(), 4, 2, "single-numa-node")


def test_none_policy_takes_no_options() -> None:
    check_none_policy_options({})
    with pytest.raises(ConfigError, match="None policy: cannot create with options"):
        check_none_policy_options({"full-pcpus-only": "true"})
