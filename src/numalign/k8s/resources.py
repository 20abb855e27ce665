"""Resource names: native, extended, hugepages (pkg/apis/core/v1/helper/helpers.go).

The device manager only handles extended resources, the memory manager `memory` and `hugepages-*`,
the CPU manager `cpu`; these predicates are the upstream ones, so a name routes to the same manager.
"""

from __future__ import annotations

import re
from typing import Final

from numalign.errors import InvalidInputError
from numalign.k8s.quantity import Quantity, QuantityFormat

RESOURCE_CPU: Final = "cpu"
RESOURCE_MEMORY: Final = "memory"
RESOURCE_EPHEMERAL_STORAGE: Final = "ephemeral-storage"
RESOURCE_PODS: Final = "pods"
RESOURCE_PIDS: Final = "pid"
HUGEPAGES_PREFIX: Final = "hugepages-"
# Names containing this are "prefixed native" (owned by Kubernetes), e.g. example.kubernetes.io/x.
DEFAULT_NAMESPACE_PREFIX: Final = "kubernetes.io/"
# Quota's convention; an extended resource may not start with it.
REQUESTS_PREFIX: Final = "requests."

_QUALIFIED_NAME_MAX_LENGTH: Final = 63
_QUALIFIED_NAME_RE: Final = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]\Z")
_DNS1123_SUBDOMAIN_MAX_LENGTH: Final = 253
_DNS1123_SUBDOMAIN_RE: Final = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\Z")


def is_dns1123_subdomain(value: str) -> bool:
    """validation.IsDNS1123Subdomain: lower-case labels joined by dots, at most 253 characters."""
    return len(value) <= _DNS1123_SUBDOMAIN_MAX_LENGTH and _DNS1123_SUBDOMAIN_RE.match(value) is not None


def is_qualified_name(value: str) -> bool:
    """validation.IsQualifiedName: an optional DNS-subdomain prefix and '/', then a name <= 63 chars."""
    parts = value.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix or not is_dns1123_subdomain(prefix):
            return False
    else:
        return False
    return 0 < len(name) <= _QUALIFIED_NAME_MAX_LENGTH and _QUALIFIED_NAME_RE.match(name) is not None


def is_prefixed_native_resource(name: str) -> bool:
    """IsPrefixedNativeResource: the name contains "kubernetes.io/" anywhere (upstream uses Contains)."""
    return DEFAULT_NAMESPACE_PREFIX in name


def is_native_resource_name(name: str) -> bool:
    """IsNativeResource: unprefixed names are implicitly in the kubernetes.io namespace."""
    return "/" not in name or is_prefixed_native_resource(name)


def is_extended_resource_name(name: str) -> bool:
    """IsExtendedResourceName: not native, not "requests."-prefixed, and "requests.<name>" qualifies."""
    if is_native_resource_name(name) or name.startswith(REQUESTS_PREFIX):
        return False
    return is_qualified_name(REQUESTS_PREFIX + name)


def is_hugepage_resource_name(name: str) -> bool:
    """IsHugePageResourceName: only the prefix is checked, like upstream."""
    return name.startswith(HUGEPAGES_PREFIX)


def is_pod_level_resource(name: str) -> bool:
    """component-helpers IsSupportedPodLevelResource: what pod-level spec.resources may name."""
    return name in (RESOURCE_CPU, RESOURCE_MEMORY) or is_hugepage_resource_name(name)


def is_overcommit_allowed(name: str) -> bool:
    """IsOvercommitAllowed: native non-hugepage resources may have requests below limits."""
    return is_native_resource_name(name) and not is_hugepage_resource_name(name)


def is_integer_resource_name(name: str) -> bool:
    """IsIntegerResourceName (pkg/apis/core/helper): extended resources take whole numbers only."""
    return is_extended_resource_name(name)


def hugepage_resource_name(page_size_bytes: int) -> str:
    """HugePageResourceName: "hugepages-" + the canonical BinarySI page size, e.g. "hugepages-2Mi"."""
    if page_size_bytes <= 0:
        raise InvalidInputError(
            f"hugepage size {page_size_bytes}: expected a positive number of bytes, e.g. 2097152 (2Mi)"
        )
    return HUGEPAGES_PREFIX + str(Quantity.from_int(page_size_bytes, QuantityFormat.BINARY_SI))


def hugepage_size_from_resource_name(name: str) -> Quantity:
    """HugePageSizeFromResourceName: the page size a hugepages-<size> resource name stands for."""
    if not is_hugepage_resource_name(name):
        raise InvalidInputError(
            f"resource name: {name} is an invalid hugepage name; expected hugepages-<size>, "
            'e.g. "hugepages-2Mi" or "hugepages-1Gi"'
        )
    return Quantity.parse(name[len(HUGEPAGES_PREFIX) :], where=f"hugepage size of resource {name!r}")


def hugepage_page_size_bytes(name: str) -> int:
    """The page size in bytes of a hugepages-<size> name (what the memory manager keys on)."""
    return hugepage_size_from_resource_name(name).value()
