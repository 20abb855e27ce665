"""Kubelet command-line flags over a KubeletConfig (pure: flag words in), as pflag and the kubelet's
flag value types parse them; the configuration file is kubeletconfig_read's.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any, Final

from numalign.errors import ConfigError, InvalidInputError
from numalign.k8s.kubeletconfig import (
    KubeletConfig,
    ReservedMemory,
    go_quote,
    parse_eviction_threshold,
    parse_resource_list,
)
from numalign.k8s.kubeletconfig_read import parse_go_bool, parse_go_duration
from numalign.k8s.quantity import Quantity
from numalign.k8s.resources import RESOURCE_MEMORY, is_hugepage_resource_name

STRING_FLAGS: Final[Mapping[str, str]] = {
    "topology-manager-policy": "topology_manager_policy",
    "topology-manager-scope": "topology_manager_scope",
    "cpu-manager-policy": "cpu_manager_policy",
    "memory-manager-policy": "memory_manager_policy",
    "reserved-cpus": "reserved_system_cpus",
    "kube-reserved-cgroup": "kube_reserved_cgroup",
    "system-reserved-cgroup": "system_reserved_cgroup",
}
# cliflag.NewMapStringStringNoSplit: one key=value per use of the flag.
NO_SPLIT_MAP_FLAGS: Final[Mapping[str, str]] = {
    "topology-manager-policy-options": "topology_manager_policy_options",
    "cpu-manager-policy-options": "cpu_manager_policy_options",
}
RESERVED_FLAGS: Final[Mapping[str, str]] = {"kube-reserved": "kube_reserved", "system-reserved": "system_reserved"}
OTHER_FLAGS: Final = (
    "cpu-manager-reconcile-period", "reserved-memory", "eviction-hard", "enforce-node-allocatable",
    "cgroups-per-qos", "feature-gates", "max-pods", "pods-per-core",
)
KUBELET_FLAGS: Final = (*STRING_FLAGS, *NO_SPLIT_MAP_FLAGS, *RESERVED_FLAGS, *OTHER_FLAGS)


# What each flag's value looks like, appended to the kubelet's parse errors (which name neither).
FLAG_VALUE_FORMS: Final[Mapping[str, str]] = {
    "cgroups-per-qos": "true or false",
    "max-pods": "a whole number, e.g. 110",
    "pods-per-core": "a whole number, 0 for no per-core limit",
    "feature-gates": "NAME=true|false[,NAME=true|false...], e.g. CPUManagerPolicyAlphaOptions=true",
    "topology-manager-policy-options": "one KEY=VALUE per use, e.g. prefer-closest-numa-nodes=true",
    "cpu-manager-policy-options": "one KEY=VALUE per use, e.g. full-pcpus-only=true",
    "kube-reserved": "KEY=VALUE[,KEY=VALUE...], e.g. cpu=1,memory=1Gi",
    "system-reserved": "KEY=VALUE[,KEY=VALUE...], e.g. cpu=500m,memory=512Mi",
    "cpu-manager-reconcile-period": "a Go duration, e.g. 10s or 1m30s",
    "reserved-memory": "NUMA:TYPE=QUANTITY[,TYPE=QUANTITY...][;NUMA:...], e.g. 0:memory=1Gi;1:memory=1Gi",
    "eviction-hard": "SIGNAL<QUANTITY[,SIGNAL<QUANTITY...], e.g. memory.available<100Mi",
}


class _FlagError(Exception):
    pass


def _split_pairs(value: str, sep: str) -> list[tuple[str, str]]:
    """MapStringString / LangleSeparatedMapStringString / MapStringBool splitting."""
    out = []
    for item in value.split(","):
        if sep == "=":
            item = item.strip()  # MapStringString trims each item; the others only trim k and v
        if not item:
            continue
        parts = item.split(sep, 1)
        if len(parts) != 2:
            raise _FlagError(f"malformed pair, expect string{sep}string")
        out.append((parts[0].strip(), parts[1].strip()))
    return out


def _parse_reserved_memory(value: str) -> list[ReservedMemory]:
    """utilflag.ReservedMemoryVar.Set (one flag use; ";" separates NUMA nodes)."""
    out = []
    for reservation in value.split(";"):
        parts = reservation.split(":")
        if len(parts) != 2:
            raise _FlagError(
                "the reserved memory has incorrect format, expected "
                f"numaNodeID:type=quantity[,type=quantity...], got {reservation}"
            )
        if not re.fullmatch(r"[+-]?[0-9]+", parts[0]):
            raise _FlagError(f"failed to convert the NUMA node ID, exptected integer, got {parts[0]}")
        node = int(parts[0])
        limits: dict[str, Quantity] = {}
        for typed in parts[1].split(","):
            limit = typed.split("=")
            if len(limit) != 2:
                raise _FlagError(f"the reserved limit has incorrect value, expected type=quantatity, got {typed}")
            name, text = limit
            if name != RESOURCE_MEMORY and not is_hugepage_resource_name(name):
                raise _FlagError(f"memory type conversion error, unknown type: {go_quote(name)}")
            try:
                limits[name] = Quantity.parse(text)
            except InvalidInputError:
                raise _FlagError(f"failed to parse the quantatity, expected quantatity, got {text}") from None
        out.append(ReservedMemory(node, limits))
    return out


def _parse_go_int32(text: str) -> int:
    """pflag's Int32 flag: strconv.ParseInt(s, 0, 32), whose error text the kubelet prints."""
    try:
        number = int(text, 0)
    except ValueError:
        raise _FlagError(f'strconv.ParseInt: parsing {go_quote(text)}: invalid syntax') from None
    if not -(2**31) <= number < 2**31:
        raise _FlagError(f'strconv.ParseInt: parsing {go_quote(text)}: value out of range')
    return number


def apply_flags(config: KubeletConfig, flags: Iterable[tuple[str, str]]) -> KubeletConfig:
    """Apply kubelet command-line flags, given as (flag, value) pairs in command-line order.

    Flag names may carry the leading "--". Map flags replace the file's map on first use and
    merge on repeats, as pflag does; --feature-gates merge into the file's gates.
    """
    changes: dict[str, Any] = {}
    initialized: set[str] = set()
    gates: dict[str, bool] = {}
    reserved_text: dict[str, dict[str, str]] = {}

    def fresh(attr: str, empty: Any) -> Any:
        # pflag map/slice values replace the previous value on their first Set, then accumulate.
        if attr not in initialized:
            initialized.add(attr)
            changes[attr] = empty
        return changes[attr]

    for raw_name, value in flags:
        name = raw_name.lstrip("-")
        try:
            if name in STRING_FLAGS:
                changes[STRING_FLAGS[name]] = value
            elif name in NO_SPLIT_MAP_FLAGS:
                parts = value.split("=", 1)
                if len(parts) != 2:
                    raise _FlagError("malformed pair, expect string=string")
                key, val = parts[0].strip(), parts[1].strip()
                if re.search(r",\s*[^,=\s]+=", val):
                    raise _FlagError(
                        f"the kubelet reads one key=value per use of --{name} (the value of {key!r} would "
                        f"be {val!r}); repeat the flag for each option"
                    )
                fresh(NO_SPLIT_MAP_FLAGS[name], {})[key] = val
            elif name in RESERVED_FLAGS:
                attr = RESERVED_FLAGS[name]
                if attr not in reserved_text:
                    reserved_text[attr] = {}
                    fresh(attr, {})
                reserved_text[attr].update(_split_pairs(value, "="))
            elif name == "cpu-manager-reconcile-period":
                changes["cpu_manager_reconcile_period"] = parse_go_duration(value)
            elif name in ("max-pods", "pods-per-core"):
                changes[name.replace("-", "_")] = _parse_go_int32(value)
            elif name == "cgroups-per-qos":
                changes["cgroups_per_qos"] = parse_go_bool(value)
            elif name == "eviction-hard":
                pairs = _split_pairs(value, "<")
                fresh("eviction_hard", {}).update(pairs)
            elif name == "enforce-node-allocatable":
                items = next(csv.reader([value])) if value else []
                changes["enforce_node_allocatable"] = (
                    (*fresh("enforce_node_allocatable", ()), *items)
                )
            elif name == "reserved-memory":
                if value == "":
                    initialized.add("reserved_memory")
                    changes["reserved_memory"] = ()
                else:
                    changes["reserved_memory"] = (*fresh("reserved_memory", ()), *_parse_reserved_memory(value))
            elif name == "feature-gates":
                for key, val in _split_pairs(value, "="):
                    try:
                        gates[key] = parse_go_bool(val)
                    except ValueError as exc:
                        raise _FlagError(f"invalid value of {key}: {val}, err: {exc}") from None
            else:
                raise ConfigError(
                    f"unknown kubelet flag --{name}; numalign reads: "
                    + ", ".join(f"--{f}" for f in KUBELET_FLAGS)
                )
        except (_FlagError, ValueError) as exc:
            hint = ""
            if name == "eviction-hard" and "<" not in value:
                hint = ' (the kubelet form is signal<quantity, e.g. "memory.available<100Mi")'
            elif name in FLAG_VALUE_FORMS:
                hint = f"; expected {FLAG_VALUE_FORMS[name]}"
            raise ConfigError(f"invalid argument {go_quote(value)} for \"--{name}\" flag: {exc}{hint}") from None
    for attr, texts in reserved_text.items():
        flag = "--" + attr.replace("_", "-")
        changes[attr] = parse_resource_list(texts, flag)
    if "eviction_hard" in changes:
        for signal, text in changes["eviction_hard"].items():
            parse_eviction_threshold(signal, text)
    if gates:
        # The kubelet re-adds the file's gates that the flags did not set.
        changes["feature_gates"] = {**config.feature_gates, **gates}
    return replace(config, **changes)


def split_kubelet_args(argv: Iterable[str]) -> list[tuple[str, str]]:
    """Kubelet command-line words ("--flag=value" or "--flag value") as (flag, value) pairs for
    apply_flags; a bare boolean flag (--cgroups-per-qos) means "true", as in pflag."""
    words = list(argv)
    pairs: list[tuple[str, str]] = []
    i = 0
    while i < len(words):
        word = words[i]
        if not word.startswith("--") or len(word) == 2:
            raise ConfigError(f"kubelet arguments: expected --flag=value or --flag value, got {word!r}")
        name, eq, value = word.partition("=")
        if not eq:
            if name == "--cgroups-per-qos" and (i + 1 == len(words) or words[i + 1].startswith("--")):
                value = "true"
            elif i + 1 < len(words):
                i += 1
                value = words[i]
            else:
                raise ConfigError(f"kubelet arguments: flag needs an argument: {name}")
        pairs.append((name, value))
        i += 1
    return pairs
