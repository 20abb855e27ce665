"""argparse glue shared by the CLI commands that model a kubelet (admit, serve, ...).

`add_kubelet_flags(parser)` adds --config and the kubelet's resource-manager flags under their
kubelet names; `config_from_args(args)` reads the --config file (the one place this package reads a
file for kubelet settings), applies the flags in command-line order, validates and returns the
KubeletConfig. Flags override the file, as in the kubelet.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import Any, Final

from numalign.errors import ConfigError
from numalign.k8s.kubeletconfig import (
    EXPECTED_CONFIG,
    RESERVED_CPUS_EXPECTED,
    KubeletConfig,
    KubeletConfigValidationError,
)
from numalign.k8s.kubeletconfig_flags import KUBELET_FLAGS, apply_flags
from numalign.k8s.kubeletconfig_read import (
    config_from_dict,
    unknown_field_warnings,
    unknown_gate_warnings,
)

CONFIG_DEST: Final = "kubelet_config"
FLAGS_DEST: Final = "kubelet_flags"

_HELP: Final = {
    "topology-manager-policy": "none | best-effort | restricted | single-numa-node (kubelet default none)",
    "topology-manager-scope": "container | pod (kubelet default container)",
    "topology-manager-policy-options": "one key=value per use, e.g. prefer-closest-numa-nodes=true",
    "cpu-manager-policy": "none | static (kubelet default none)",
    "cpu-manager-policy-options": "one key=value per use, e.g. full-pcpus-only=true",
    "cpu-manager-reconcile-period": "Go duration, e.g. 10s",
    "memory-manager-policy": "None | Static (kubelet default None)",
    "reserved-cpus": 'CPU list reserved for the system, e.g. "0-1"',
    "reserved-memory": '<numa>:<type>=<quantity>[,...][;<numa>:...], e.g. "0:memory=1Gi,hugepages-1Gi=2Gi"',
    "kube-reserved": "cpu=1,memory=1Gi,ephemeral-storage=1Gi,pid=1000",
    "system-reserved": "cpu=500m,memory=512Mi",
    "kube-reserved-cgroup": "cgroup of the kube-reserved components",
    "system-reserved-cgroup": "cgroup of the system-reserved components",
    "eviction-hard": 'signal<threshold list, e.g. "memory.available<100Mi,nodefs.available<10%%"',
    "enforce-node-allocatable": "comma list of pods, system-reserved, kube-reserved, none",
    "cgroups-per-qos": "true | false (default true)",
    "max-pods": "the pods limit the kubelet admits against (default 110; OutOfpods beyond it)",
    "pods-per-core": "pods per CPU; limits pods to this x the CPU count when smaller (default 0: off)",
    "feature-gates": "A=true,B=false",
}


# Short spellings for numalign's commands; each records under the kubelet flag it stands for.
ALIASES: Final = {
    "topology-manager-policy": ("--policy",),
    "topology-manager-scope": ("--scope",),
    "topology-manager-policy-options": ("--policy-option",),
    "cpu-manager-policy-options": ("--cpu-manager-policy-option",),
}


class _KubeletFlag(argparse.Action):
    """Collects (flag, value) pairs in command-line order: map flags repeat and merge like pflag."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option_string: str | None = None,
    ) -> None:
        collected = list(getattr(namespace, FLAGS_DEST, None) or [])
        collected.append((self.option_strings[0], str(values)))
        setattr(namespace, FLAGS_DEST, collected)


def add_kubelet_flags(
    parser: argparse.ArgumentParser,
    description: str = "a KubeletConfiguration file and the kubelet's own flags (flags win)",
) -> None:
    group = parser.add_argument_group("kubelet configuration", description)
    group.add_argument(
        "--config", dest=CONFIG_DEST, metavar="FILE",
        help="KubeletConfiguration file (kubelet.config.k8s.io/v1beta1)",
    )
    for flag in KUBELET_FLAGS:
        group.add_argument(
            f"--{flag}", *ALIASES.get(flag, ()), dest=FLAGS_DEST, action=_KubeletFlag, metavar="VALUE",
            help=_HELP.get(flag),
        )


def _warn_stderr(message: str) -> None:
    print(f"warning: {message}", file=sys.stderr)


def _note_stderr(message: str) -> None:
    print(f"note: {message}", file=sys.stderr)


def config_from_args(
    args: argparse.Namespace,
    base: KubeletConfig | None = None,
    warn: Callable[[str], None] = _warn_stderr,
    note: Callable[[str], None] = _note_stderr,
) -> KubeletConfig:
    """The effective, validated kubelet configuration of a parsed command line.

    `base` stands in for the config file when --config is not given (the kubelet's defaults when
    None); flags override it field by field either way. Unknown config fields and feature gates are
    reported through `warn` and otherwise ignored; which document and form of the file was read
    (kubeletconfig_forms: an OpenShift KubeletConfig, kubeadm's ConfigMap) through `note`.
    """
    config = KubeletConfig() if base is None else base
    path = getattr(args, CONFIG_DEST, None)
    if path:
        # Imported here: textfiles brings the manifest parser and yaml, which `--help` need not load.
        from numalign.adapters.textfiles import read_text_file
        from numalign.kubelet.versions import KNOWN_GATES

        text = read_text_file(path, "the kubelet config file", EXPECTED_CONFIG, ConfigError)
        from numalign.k8s.kubeletconfig_forms import kubelet_config_mapping

        obj = kubelet_config_mapping(text, str(path), note)
        # Parsed first: a file that is not a KubeletConfiguration at all (a Pod given to --config) is
        # one error, not a warning per field of the wrong kind followed by that error.
        config = config_from_dict(obj, str(path))
        for message in unknown_field_warnings(obj, str(path)):
            warn(message)
        for message in unknown_gate_warnings(config.feature_gates, f"{path}: featureGates", KNOWN_GATES):
            warn(message)
    flags = getattr(args, FLAGS_DEST, None) or []
    gate_flags = [(name, value) for name, value in flags if name.lstrip("-") == "feature-gates"]
    if gate_flags:
        from numalign.kubelet.versions import KNOWN_GATES  # not at import: `--help` loads no kubelet

        gate_values = apply_flags(KubeletConfig(), gate_flags).feature_gates
        for message in unknown_gate_warnings(gate_values, "--feature-gates", KNOWN_GATES):
            warn(message)
    config = apply_flags(config, flags)
    try:
        config.validate()
    except KubeletConfigValidationError as exc:
        raise KubeletConfigValidationError([_with_fix(m) for m in exc.messages]) from None
    return config


def _with_fix(message: str) -> str:
    """The kubelet's validation text, kept, plus the expected form where the kubelet names none."""
    if message.startswith("invalid configuration: unable to parse reservedSystemCPUs"):
        return f"{message}; {RESERVED_CPUS_EXPECTED}"
    return message
