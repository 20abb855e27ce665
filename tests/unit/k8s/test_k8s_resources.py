"""Resource-name predicates (pkg/apis/core/v1/helper)."""

from __future__ import annotations

import pytest

from numalign.errors import InvalidInputError
from numalign.k8s.quantity import Quantity
from numalign.k8s.resources import (
    hugepage_page_size_bytes,
    hugepage_resource_name,
    hugepage_size_from_resource_name,
    is_extended_resource_name,
    is_hugepage_resource_name,
    is_native_resource_name,
    is_overcommit_allowed,
    is_qualified_name,
)


@pytest.mark.parametrize(
    ("name", "native", "extended"),
    [
        ("cpu", True, False),
        ("memory", True, False),
        ("hugepages-2Mi", True, False),
        ("ephemeral-storage", True, False),
        ("kubernetes.io/x", True, False),
        ("example.kubernetes.io/x", True, False),
        ("foo.kubernetes.io/bar", True, False),
        ("nvidia.com/gpu", False, True),
        ("intel.com/sriov_netdevice", False, True),
        ("example.com/dongle", False, True),
        ("a.b/c.d_e-f", False, True),
        ("requests.example.com/x", False, False),  # quota convention is reserved
        ("NVIDIA.com/gpu", False, False),  # the prefix must be a lower-case DNS subdomain
        ("example.com/", False, False),
        ("example.com/-gpu", False, False),
        ("example.com/gpu-", False, False),
        ("example.com/a/b", False, False),
        ("example.com/" + "g" * 63, False, True),
        ("example.com/" + "g" * 64, False, False),
        ("ex_ample.com/gpu", False, False),
    ],
)
def test_native_and_extended(name: str, native: bool, extended: bool) -> None:
    assert is_native_resource_name(name) is native
    assert is_extended_resource_name(name) is extended


def test_prefix_length_counts_requests_dot() -> None:
    # "requests." + prefix must still be a DNS subdomain of at most 253 characters.
    label = "a" * 60
    prefix = ".".join([label] * 4)[: 253 - len("requests.")]
    prefix = prefix.rstrip(".")
    assert is_extended_resource_name(prefix + "/gpu")
    assert not is_extended_resource_name(prefix + "x" * 10 + "/gpu")


def test_qualified_name() -> None:
    assert is_qualified_name("MyName") and is_qualified_name("my.name") and is_qualified_name("123-abc")
    assert is_qualified_name("example.com/MyName")
    assert not is_qualified_name("") and not is_qualified_name("/x") and not is_qualified_name("a b")


def test_hugepages() -> None:
    assert is_hugepage_resource_name("hugepages-2Mi")
    assert not is_hugepage_resource_name("memory")
    assert hugepage_resource_name(2 * 1024 * 1024) == "hugepages-2Mi"
    assert hugepage_resource_name(1024**3) == "hugepages-1Gi"
    assert hugepage_resource_name(64 * 1024) == "hugepages-64Ki"
    assert hugepage_resource_name(32 * 1024**2) == "hugepages-32Mi"
    assert hugepage_size_from_resource_name("hugepages-1Gi") == Quantity.parse("1Gi")
    assert hugepage_page_size_bytes("hugepages-2Mi") == 2097152
    assert hugepage_page_size_bytes(hugepage_resource_name(16 * 1024**3)) == 16 * 1024**3
    with pytest.raises(InvalidInputError, match="invalid hugepage name"):
        hugepage_size_from_resource_name("memory")
    with pytest.raises(InvalidInputError, match="invalid quantity"):
        hugepage_size_from_resource_name("hugepages-2MB")
    with pytest.raises(InvalidInputError):
        hugepage_resource_name(0)


def test_overcommit() -> None:
    assert is_overcommit_allowed("cpu") and is_overcommit_allowed("memory")
    assert not is_overcommit_allowed("hugepages-2Mi")
    assert not is_overcommit_allowed("nvidia.com/gpu")
