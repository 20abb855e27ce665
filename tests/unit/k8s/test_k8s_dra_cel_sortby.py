"""The lists extension's sortBy macro (cel-go ext.Lists, in the base environment from 1.34; a new object
from 1.35): expanded as cel-go's parser expands it, only where the environment has the extension, sorted
in the order Go's sort.Slice leaves equal keys (the orders below are the real 1.37 environment's, through
conformance/.build's harness), with the macro's errors and its costs."""

from __future__ import annotations

import pytest

from numalign.k8s.dra.cel import CELFeatures, CELRuntimeError, compile_selector, device_variables, evaluate
from numalign.k8s.dra.cel.extlists import go_sort_indices

FEATURES = CELFeatures(minor=37)


def _device() -> dict[str, object]:
    return device_variables("gpu.example.com", {}, {}, None, FEATURES)


def _error(expression: str) -> str:
    compiled = compile_selector(expression, FEATURES)
    assert compiled.error is None, compiled.error
    with pytest.raises(CELRuntimeError) as caught:
        evaluate(compiled, _device())
    return str(caught.value)


def test_sortby_sorts_by_the_key() -> None:
    compiled = compile_selector('device.driver.split(".").sortBy(p, -p.size()) == ["example", "gpu", "com"]',
                                FEATURES)
    assert evaluate(compiled, _device())[0] is True


def test_equal_keys_are_left_where_gos_sort_slice_leaves_them() -> None:
    # 13 elements: past the insertion sort of 12, so not in their first order
    assert _error('{"a": 1}["%s".format([lists.range(13).sortBy(x, x % 2)])] == 1') == (
        "no such key: [8, 12, 2, 0, 4, 10, 6, 3, 7, 9, 5, 11, 1]")
    assert go_sort_indices([i % 4 for i in range(70)])[:12] == [8, 44, 32, 68, 4, 40, 28, 64, 0, 52, 36, 60]
    assert go_sort_indices([0] * 12) == list(range(12))  # up to 12: insertion sort, stable


def test_sortby_exists_only_with_the_lists_extension() -> None:
    for features, new_object in ((CELFeatures(minor=33), False), (CELFeatures(minor=34), True)):
        error = compile_selector("[2, 1].sortBy(x, x) == [1, 2]", features, new_object=new_object).error
        assert error is not None and "undeclared reference to 'sortBy'" in error
    assert compile_selector("[2, 1].sortBy(x, x) == [1, 2]", CELFeatures(minor=34)).error is None


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("1.sortBy(x, x) == []",
         "sortBy can only be applied to a list, identifier, comprehension, call or select expression"),
        ("[1].sortBy(1, x) == []", "argument is not an identifier"),
    ],
)
def test_the_macros_errors(expression: str, message: str) -> None:
    error = compile_selector(expression, FEATURES).error
    assert error is not None and message in error


def test_keys_must_be_comparable_and_alike() -> None:
    error = compile_selector("[1, 2].sortBy(x, [x]) == []", FEATURES).error
    assert error is not None and "found no matching overload for '@sortByAssociatedKeys'" in error
    assert _error('[1, 2].sortBy(x, x == 1 ? dyn(1) : dyn("a")) == []') == "list elements must have the same type"
    # a key that fails reaches the sort as an error: cel-go's binding panics and recovers with this text
    assert _error("[1, 2].sortBy(x, 1 / (x - 1)) == []") == (
        "internal error: interface conversion: *types.Err is not traits.Lister: missing method Add")


def test_a_failing_key_fails_the_whole_evaluation_through_what_absorbs_errors() -> None:
    # cel-go's panic is recovered at Eval: `||` and exists() do not absorb it as they absorb an error value
    assert _error("[1].exists(k, [1, 2].sortBy(x, 1 / (x - 1)) == [] || true)") == (
        "internal error: interface conversion: *types.Err is not traits.Lister: missing method Add")
    assert evaluate(compile_selector("true || [1, 2].sortBy(x, 1 / (x - 1)) == []", FEATURES), _device())[0] is True


def test_sort_and_sortby_over_dyn_keys_cost_one_call() -> None:
    # their cost trackers are per overload: with dyn elements cel-go chose none and charges the call 1
    assert evaluate(compile_selector("dyn([2, 1]).sort() == [1, 2]", FEATURES), _device()) == (True, 2)
    assert evaluate(compile_selector("[2, 1].sort() == [1, 2]", FEATURES), _device()) == (True, 20)


def test_long_lists_sort_and_map_with_upstreams_costs() -> None:
    # near the cost limit: sorted natively when no two keys tie; map() and filter() append in place
    compiled = compile_selector("dyn(lists.range(900000)).sort().size() > 0", FEATURES)
    assert evaluate(compiled, _device()) == (True, 900015)
    compiled = compile_selector("lists.range(50000).filter(x, x % 2 == 0).size() > 0", FEATURES)
    assert evaluate(compiled, _device()) == (True, 525014)
