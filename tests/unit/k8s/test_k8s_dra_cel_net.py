"""The base environment's IP and CIDR libraries in DRA selectors (k8s.io/apiserver 1.30: in every DRA
release), uint literals, and their costs; each answer and cost checked against the 1.36 harness."""

from __future__ import annotations

import pytest

from numalign.k8s.dra.cel import CELFeatures, CELRuntimeError, compile_selector, device_variables, evaluate

ALL = CELFeatures(consumable_capacity=True, list_type_attributes=True)


def _run(expression: str, minor: int = 36) -> tuple[object, int]:
    compiled = compile_selector(expression, CELFeatures(True, True, minor=minor))
    assert compiled.error is None, compiled.error
    value, cost = evaluate(compiled, device_variables("gpu.example.com", {}, {}, None, ALL))
    return value, cost


@pytest.mark.parametrize(
    ("expression", "answer", "max_cost", "cost"),
    [
        ('cidr("10.0.0.0/8").containsIP("10.1.2.3")', True, 6, 3),
        ('cidr("10.0.0.0/8").containsIP(ip("10.1.2.3"))', True, 6, 3),
        ('cidr("10.0.0.0/8").containsCIDR("10.1.0.0/16")', True, 10, 6),
        ('cidr("10.0.0.0/8").containsCIDR(cidr("10.1.0.0/16"))', True, 10, 6),
        ('cidr("10.1.2.3/8").masked() == cidr("10.0.0.0/8")', True, 4, 4),
        ('cidr("10.0.0.0/8").prefixLength() == 8', True, 3, 3),
        ('cidr("10.0.0.0/8").ip() == ip("10.0.0.0")', True, 4, 4),
        ('string(cidr("10.0.0.0/8")) == "10.0.0.0/8"', True, 3, 3),
        ('isCIDR("10.0.0.0/8")', True, 1, 1),
        ('ip("224.0.0.1").isGlobalUnicast()', False, 2, 2),
        ('ip("fe80::1").isLinkLocalUnicast()', True, 2, 2),
        ('ip("ff02::1").isLinkLocalMulticast()', True, 2, 2),
        ('string(ip("2001:db8::1")) == "2001:db8::1"', True, 5, 5),
    ],
)
def test_ip_and_cidr_functions_answer_and_cost_as_upstream(expression: str, answer: bool, max_cost: int,
                                                           cost: int) -> None:
    for minor in (34, 35, 36, 37):
        assert compile_selector(expression, CELFeatures(True, True, minor=minor)).max_cost == max_cost
        assert _run(expression, minor) == (answer, cost)


def test_a_cidr_keeps_its_host_bits_and_refuses_what_netip_refuses() -> None:
    assert _run('string(cidr("10.1.2.3/8")) == "10.1.2.3/8" && string(cidr("10.1.2.3/8").masked()) == "10.0.0.0/8"')[0]
    assert _run('!isCIDR("10.0.0.0/08") && !isCIDR("10.0.0.0") && !isCIDR("::ffff:1.2.3.4/96")')[0]
    errors = {
        '10.0.0.0/33': 'netip.ParsePrefix("10.0.0.0/33"): prefix length out of range',
        '10.0.0.0': 'netip.ParsePrefix("10.0.0.0"): no \'/\'',
        '::ffff:1.2.3.4/96': 'IPv4-mapped IPv6 address "::ffff:1.2.3.4/96" is not allowed',
    }
    for text, tail in errors.items():
        with pytest.raises(CELRuntimeError) as raised:
            _run(f'cidr("{text}").prefixLength() > 0')
        assert str(raised.value).startswith("network address parse error during conversion from string: ")
        assert str(raised.value).endswith(tail)


def test_uint_literals_are_unsigned() -> None:
    compiled = compile_selector("7u - 8u == 0u", ALL)
    with pytest.raises(CELRuntimeError, match=r"^unsigned integer overflow$"):
        evaluate(compiled, device_variables("gpu.example.com", {}, {}, None, ALL))
    assert _run("type(1u) == uint && 1u + 2u == 3u")[0] is True


@pytest.mark.parametrize(
    ("expression", "answer", "max_cost", "cost"),
    [
        ("[1, 2, 3].reverse() == [3, 2, 1]", True, 35, 15),
        ("[1, 2, 3].slice(1, 2) == [2]", True, 33, 13),
        ("[3, 1, 2].sort() == [1, 2, 3]", True, 50, 30),
        ("[[1], [2]].flatten() == [1, 2]", True, 54, 14),
        ("lists.range(3) == [0, 1, 2]", True, 25, 15),
        ("[1, 2, 2].distinct() == [1, 2]", True, 50, 30),
        ("[1, 2].first().value() == 1", True, 13, 3),
        ("[1, 2].last().value() == 2", True, 13, 3),
    ],
)
def test_the_lists_extension_answers_and_costs_as_cel_go(expression: str, answer: bool, max_cost: int,
                                                          cost: int) -> None:
    for minor in (34, 35, 36, 37):
        assert compile_selector(expression, CELFeatures(True, True, minor=minor)).max_cost == max_cost
        assert _run(expression, minor) == (answer, cost)
    # a base-environment library of 1.34 reaches new objects with 1.35 (compatibility version 1.34)
    created = compile_selector(expression, CELFeatures(True, True, minor=34), new_object=True)
    assert (created.error is None) is expression.startswith("[1, 2].")


def test_lists_range_is_bounded_before_it_builds_anything() -> None:
    # 1.34-1.36 (cel-go 0.26) would build the list and then stop on the cost (the harness hangs on
    # this one); numalign stops first
    for minor in (34, 36):
        with pytest.raises(CELRuntimeError, match="actual cost limit exceeded"):
            _run("lists.range(9000000000000000000).size() > 0", minor)
    with pytest.raises(CELRuntimeError, match=r"^lists.range: size 2000000 exceeds maximum allowed \(1000000\)$"):
        _run("lists.range(2000000).size() > 0", 37)
    with pytest.raises(CELRuntimeError, match=r"^list elements must have the same type$"):
        _run('[dyn(1), dyn("a")].sort() == []')
    with pytest.raises(CELRuntimeError, match=r"^cannot slice\(2, 1\), start index must be less than or equal"):
        _run("[1, 2, 3].slice(2, 1) == []")


@pytest.mark.parametrize(
    ("expression", "answer", "max_cost", "cost"),
    [
        ("[1, 2].all(i, v, i < v)", True, 23, 13),
        ("[1, 2].exists(i, v, i == v)", False, 25, 15),
        ("[1, 2].existsOne(i, v, i == 1)", True, 20, 8),
        ("[1, 2].transformList(i, v, i + v) == [1, 3]", True, 62, 32),
        ("[1, 2].transformList(i, v, i > 0, v) == [2]", True, 62, 19),
        ('{"a": 1}.transformMap(k, v, v + 1) == {"a": 2}', True, 97, 7),
        ('{"a": 1}.transformMap(k, v, v > 0, v + 1) == {"a": 2}', True, 99, 9),
        ('{"a": 1}.transformMapEntry(k, v, {v: k}) == {1: "a"}', True, 126, 36),
    ],
)
def test_two_variable_comprehensions_answer_and_cost_as_cel_go(expression: str, answer: bool, max_cost: int,
                                                                cost: int) -> None:
    for minor in (34, 35, 36, 37):
        assert compile_selector(expression, CELFeatures(True, True, minor=minor)).max_cost == max_cost
        assert compile_selector(expression, CELFeatures(True, True, minor=minor), new_object=True).error is None
        assert _run(expression, minor) == (answer, cost)


@pytest.mark.parametrize(
    ("expression", "error"),
    [
        ("[1].all(i, i, true)", "ERROR: <input>:1:12: duplicate variable name: i"),
        ("[1].all(i, 1, true)", "ERROR: <input>:1:12: argument must be a simple name"),
        ("[1].exists(i, v, v)", "ERROR: <input>:1:18: expected type 'bool' but found 'int'"),
        # cel-go checks `&&`/`||` argument by argument (the one-variable macros too)
        ("[1].all(v, v)", "ERROR: <input>:1:12: expected type 'bool' but found 'int'"),
        ("true && 1", "ERROR: <input>:1:9: expected type 'bool' but found 'int'"),
    ],
)
def test_two_variable_macro_and_logical_errors_are_cel_gos(expression: str, error: str) -> None:
    compiled = compile_selector(expression, ALL)
    assert compiled.error is not None and compiled.error.startswith(f"compilation failed: {error}\n")


def test_transform_map_entry_refuses_a_key_twice() -> None:
    with pytest.raises(CELRuntimeError, match=r"^insert failed: key 1 already exists$"):
        _run('{"a": 1, "b": 1}.transformMapEntry(k, v, {v: k}).size() == 1')
