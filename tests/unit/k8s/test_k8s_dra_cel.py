"""CEL selectors: compile errors and references as cel-go words them, the Kubernetes library functions
DRA selectors use, missing domains as empty maps, and the cost limit on read."""

from __future__ import annotations

import pytest

from numalign.k8s.dra.cel import (
    CELFeatures,
    CELRuntimeError,
    compile_selector,
    cost_error,
    device_matches,
    device_variables,
)
from numalign.k8s.dra.semver import SemverError, parse_semver
from numalign.k8s.dra.types import DeviceAttribute, DeviceCapacity
from numalign.k8s.quantity import Quantity

ALL = CELFeatures(consumable_capacity=True, list_type_attributes=True)


def _device(features: CELFeatures = ALL) -> dict[str, object]:
    return device_variables(
        "gpu.example.com",
        {
            "model": DeviceAttribute("string", ("h100",)),
            "driverVersion": DeviceAttribute("version", ("1.2.3",)),
            "numa": DeviceAttribute("int", (1,)),
            "resource.kubernetes.io/pcieRoot": DeviceAttribute("string", ("pci0000:00", "pci0000:40"), True),
        },
        {"memory": DeviceCapacity(Quantity.parse("80Gi"))},
        True,
        features,
    )


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ('device.driver == "gpu.example.com"', True),
        ('device.attributes["gpu.example.com"].model == "h100"', True),
        ('device.attributes["gpu.example.com"].numa > 0', True),
        ('device.capacity["gpu.example.com"].memory.compareTo(quantity("40Gi")) >= 0', True),
        ('device.capacity["gpu.example.com"].memory.isLessThan(quantity("1Ti"))', True),
        ('device.capacity["gpu.example.com"].memory.asInteger() == 85899345920', True),
        ('device.attributes["gpu.example.com"].driverVersion.isGreaterThan(semver("1.2.0"))', True),
        ('device.attributes["gpu.example.com"].driverVersion.major() == 1', True),
        ('device.attributes["gpu.example.com"].driverVersion.isLessThan(semver("v1.10", true))', True),
        ('isSemver("1.0") || isQuantity("1Gi")', True),
        ('"other.example.com" in device.attributes', False),
        ('has(device.attributes["other.example.com"].x)', False),
        ('device.attributes["resource.kubernetes.io"].pcieRoot.includes("pci0000:40")', True),
        ('"pci0000:00" in device.attributes["resource.kubernetes.io"].pcieRoot', True),
        ('device.attributes["gpu.example.com"].model.startsWith("h1") && "h100".upperAscii() == "H100"', True),
        ('device.attributes["gpu.example.com"].model.find("[0-9]+") == "100"', True),
        ("[3, 1, 2].max() == 3 && [1, 2].isSorted() && [1, 2, 2].indexOf(2) == 1", True),
        ("device.allowMultipleAllocations", True),
        ('device.attributes.exists_one(d, d == "gpu.example.com")', True),
    ],
)
def test_selectors_evaluate_as_kubernetes_does(expression: str, expected: bool) -> None:
    compiled = compile_selector(expression, ALL)
    assert compiled.error is None
    assert device_matches(compiled, _device()) is expected


def test_a_missing_domain_reads_as_an_empty_map_and_leaves_no_trace() -> None:
    device = _device()
    compiled = compile_selector('device.attributes["other.example.com"].model == "x"', ALL)
    with pytest.raises(CELRuntimeError, match=r"^no such key: model$"):
        device_matches(compiled, device)
    assert list(device["attributes"]) == ["gpu.example.com", "resource.kubernetes.io"]  # type: ignore[call-overload]


@pytest.mark.parametrize(
    ("expression", "features", "error"),
    [
        ("device.driver ==", ALL, "compilation failed: ERROR: <input>:1:17: Syntax error: mismatched input '<EOF>'"),
        ("noSuchVar", ALL, "compilation failed: ERROR: <input>:1:1: undeclared reference to 'noSuchVar' (in "
                           "container '')"),
        ('device.driver.frobnicate("x")', ALL, "compilation failed: ERROR: <input>:1:15: undeclared reference to "
                                                "'frobnicate' (in container '')"),
        ("device.allowMultipleAllocations", CELFeatures(), "compilation failed: ERROR: <input>:1:7: undefined field "
                                                           "'allowMultipleAllocations'"),
        ('device.attributes["d"].x.includes(1)', CELFeatures(), "undeclared reference to 'includes'"),
        ('cel.bind(d, device.attributes["d"], d.x == 1)', ALL, "compilation failed: ERROR: <input>:1:1: cel.bind is "
                                                                "not supported by numalign's CEL engine"),
    ],
)
def test_compile_errors_carry_upstreams_text(expression: str, features: CELFeatures, error: str) -> None:
    compiled = compile_selector(expression, features)
    assert compiled.error is not None and compiled.error.startswith("compilation failed: ERROR: <input>:")
    assert error.removeprefix("compilation failed: ") in compiled.error
    assert "\n" not in compiled.error


def test_comprehension_variables_are_not_undeclared() -> None:
    assert compile_selector('device.attributes.all(d, d != "" && [1].exists(x, x == 1))', ALL).error is None


def test_runtime_errors_word_the_failure() -> None:
    device = _device()
    with pytest.raises(CELRuntimeError, match="could not be converted to bool"):
        device_matches(compile_selector("device.driver", ALL), device)
    with pytest.raises(CELRuntimeError, match=r"^no such overload$"):
        device_matches(compile_selector('device.driver + 1 == "x"', ALL), device)
    with pytest.raises(CELRuntimeError, match="invalid semver"):
        device_matches(compile_selector('semver("one") == semver("1.0.0")', ALL), device)


def test_the_cost_estimate_refuses_deep_comprehensions_and_keeps_ordinary_selectors() -> None:
    ordinary = compile_selector('device.driver == "x" && device.attributes["x"].model == "y"', ALL)
    assert cost_error(ordinary) is None and ordinary.max_cost < 100
    three = "device.attributes.all(a, device.attributes.all(b, device.attributes.all(c, a == b)))"
    assert cost_error(compile_selector(three, ALL)) is None
    four = ("device.attributes.all(a, device.attributes.all(b, device.attributes.all(c, "
            "device.attributes.all(d, a == b))))")
    assert cost_error(compile_selector(four, ALL)) == "too complex, exceeds cost limit"


@pytest.mark.parametrize(
    ("a", "b", "order"),
    [("1.0.0", "1.0.1", -1), ("1.0.0-alpha", "1.0.0", -1), ("1.0.0-alpha.1", "1.0.0-alpha.beta", -1),
     ("1.0.0-2", "1.0.0-10", -1), ("2.0.0", "1.9.9", 1), ("1.0.0+build", "1.0.0", 0)],
)
def test_semver_precedence(a: str, b: str, order: int) -> None:
    assert parse_semver(a).compare(parse_semver(b)) == order


def test_semver_normalizes_only_when_asked() -> None:
    with pytest.raises(SemverError):
        parse_semver("v1.2")
    assert str(parse_semver("v1.2", True)) == "1.2.0"
