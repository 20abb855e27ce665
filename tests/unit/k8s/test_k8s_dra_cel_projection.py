"""Devices alike in what a selector reads share one evaluation: which paths of `device` an expression
reads (or that it reads more), the key a device gives those paths, and answers unchanged by sharing."""

from __future__ import annotations

import itertools

import pytest

from numalign.k8s.dra.cel import (
    CELFeatures,
    CELRuntimeError,
    compile_selector,
    device_key,
    device_matches,
    device_variables,
)
from numalign.k8s.dra.cel.projection import project
from numalign.k8s.dra.types import DeviceAttribute, DeviceCapacity
from numalign.k8s.quantity import Quantity

ALL = CELFeatures(consumable_capacity=True, list_type_attributes=True)
DRIVER = "gpu.example.com"


@pytest.mark.parametrize(
    ("expression", "paths"),
    [
        ('device.driver == "gpu.example.com"', (("driver",),)),
        ('device.attributes["gpu.example.com"].model == "h100"', (("attributes", "gpu.example.com", "model"),)),
        ('device.attributes["a.io"]["x"] == 1 && has(device.attributes["b.io"].y)',
         (("attributes", "a.io", "x"), ("attributes", "b.io", "y"))),
        ('device.attributes["a.io"].?x.orValue(0) == 1', (("attributes", "a.io", "x"),)),
        ('device.capacity["gpu.example.com"].memory.isLessThan(quantity("1Ti"))',
         (("capacity", "gpu.example.com", "memory"),)),
        ("device.allowMultipleAllocations", (("allowMultipleAllocations",),)),
        ('"1" == "1"', ()),
        # reading more than fixed paths: the whole map, a domain map, a macro's variable named device
        ('"other.example.com" in device.attributes', None),
        ('device.attributes["a.io"].size() == 1', None),
        ('device.attributes.exists_one(d, d == "gpu.example.com")', None),
        ('[1].exists(device, device == 1)', None),
        ('device.attributes[device.driver].model == "h100"', None),
    ],
)
def test_the_paths_a_selector_reads(expression: str, paths: tuple[tuple[str, ...], ...] | None) -> None:
    compiled = compile_selector(expression, ALL)
    assert compiled.error is None
    assert compiled.paths == paths


ATTRIBUTES = [
    {},
    {"model": DeviceAttribute("string", ("h100",))},
    {"model": DeviceAttribute("string", ("a100",)), "numa": DeviceAttribute("int", (1,))},
    {"model": DeviceAttribute("bool", (True,))},
    {"model": DeviceAttribute("int", (1,))},
    {"gpu.example.com/model": DeviceAttribute("string", ("h100",))},
    {"model": DeviceAttribute("string", ("h100",)), "gpu.example.com/model": DeviceAttribute("string", ("b",))},
    {"other.io/model": DeviceAttribute("string", ("h100",))},
    {"/model": DeviceAttribute("string", ("h100",))},
    {"other.io/x": DeviceAttribute("string", ("h100",)), "model": DeviceAttribute("string", ("c",))},
    {"version": DeviceAttribute("version", ("1.2.3",))},
    {"version": DeviceAttribute("version", ("1.2.3+build",))},
    {"model": DeviceAttribute("string", ("h100", "a100"), True)},
]
CAPACITY = [{}, {"memory": DeviceCapacity(Quantity.parse("80Gi"))}]
EXPRESSIONS = [
    'device.attributes["gpu.example.com"].model == "h100"',
    'device.attributes["gpu.example.com"].model',
    'has(device.attributes["gpu.example.com"].model)',
    'device.attributes["other.io"].model == "h100"',
    'device.attributes["gpu.example.com"].?model.orValue("none") == "none"',
    'device.attributes["gpu.example.com"].version.isGreaterThan(semver("1.0.0"))',
    'device.driver == "gpu.example.com" && device.allowMultipleAllocations',
    'device.capacity["gpu.example.com"].memory.isLessThan(quantity("1Ti"))',
]


def _answer(expression: str, variables: dict[str, object]) -> object:
    try:
        return device_matches(compile_selector(expression, ALL), variables)
    except CELRuntimeError as exc:
        return str(exc)


def test_device_key_is_the_projection_of_the_device_variables() -> None:
    for expression in EXPRESSIONS:
        paths = compile_selector(expression, ALL).paths
        assert paths is not None
        for attributes, capacity, multiple in itertools.product(ATTRIBUTES, CAPACITY, (None, True)):
            variables = device_variables(DRIVER, attributes, capacity, multiple, ALL)
            key = device_key(paths, DRIVER, attributes, capacity, multiple)
            if key is not None:  # None: left to the evaluation per device
                assert key == project(paths, variables), (expression, attributes)


def test_devices_with_one_key_get_one_answer_and_shared_answers_are_the_evaluated_ones() -> None:
    for expression in EXPRESSIONS:
        compiled = compile_selector(expression, ALL)
        assert compiled.paths is not None
        by_key: dict[tuple[object, ...], object] = {}
        for attributes, capacity, multiple in itertools.product(ATTRIBUTES, CAPACITY, (None, True)):
            variables = device_variables(DRIVER, attributes, capacity, multiple, ALL)
            compiled.memo.clear()  # evaluated afresh, then answered from the memo: the same answer
            fresh = _answer(expression, variables)
            assert _answer(expression, variables) == fresh
            key = project(compiled.paths, variables)
            if key is not None:
                assert by_key.setdefault(key, fresh) == fresh, (expression, attributes)


def test_a_runtime_error_is_shared_with_its_cost() -> None:
    compiled = compile_selector('device.attributes["gpu.example.com"].model == "h100"', ALL)
    variables = device_variables(DRIVER, {}, {}, None, ALL)
    for _ in range(2):
        with pytest.raises(CELRuntimeError, match="no such key: model") as exc:
            device_matches(compiled, variables)
        assert exc.value.cost > 0



def test_all_memos_together_hold_at_most_the_process_cap() -> None:
    """serve keeps 4,096 compiled selectors of 4,096 answers each: together their memos stay within
    _MEMO_TOTAL answers (every memo is started again at the cap), and an answer given after that is the
    one evaluated before."""
    from numalign.k8s.dra.cel import selector as cel

    selectors = cel._MEMO_TOTAL // cel._MEMO_SIZE + 2
    compiled = [compile_selector(f'device.attributes["gpu.example.com"].id >= {i}', ALL) for i in range(selectors)]
    variables = [device_variables(DRIVER, {"id": DeviceAttribute("int", (n,))}, {}, None, ALL)
                 for n in range(cel._MEMO_SIZE)]
    first = [device_matches(c, variables[n]) for c in compiled for n in (0, 7)]
    most = 0
    for c in compiled:
        for v in variables:
            device_matches(c, v)
            most = max(most, cel.memo_answers())
    assert most == cel._MEMO_TOTAL  # reached, never passed
    assert cel.memo_answers() < cel._MEMO_TOTAL
    assert sum(len(c.memo) for c in compiled) <= cel.memo_answers()
    assert [device_matches(c, variables[n]) for c in compiled for n in (0, 7)] == first


def test_a_selector_whose_memo_refills_is_kept_once() -> None:
    """A selector evaluated on more distinct devices than its memo holds starts its memo again each time it
    fills; the process's list of selectors holding answers names it once, however often (it grew by one
    entry a refill before: without bound in a long-lived serve)."""
    from numalign.k8s.dra.cel import selector as cel

    compiled = compile_selector('device.attributes["gpu.example.com"].id >= 5', ALL)
    for n in range(3 * cel._MEMO_SIZE + 10):
        device_matches(compiled, device_variables(DRIVER, {"id": DeviceAttribute("int", (n,))}, {}, None, ALL))
    assert list(cel._memoized.values()).count(compiled) == 1
    assert len(cel._memoized) <= cel.memo_answers()
