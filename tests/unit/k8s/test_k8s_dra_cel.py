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
    evaluate,
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
        ('device.driver.frobnicate("x")', ALL, "compilation failed: ERROR: <input>:1:25: undeclared reference to "
                                                "'frobnicate' (in container '')"),
        ("device.allowMultipleAllocations", CELFeatures(), "compilation failed: ERROR: <input>:1:7: undefined field "
                                                           "'allowMultipleAllocations'"),
        ("1 == 1.0", ALL, "compilation failed: ERROR: <input>:1:3: found no matching overload for '_==_' applied to "
                          "'(int, double)'"),
        ('[1, "a"].size() == 2', ALL, "compilation failed: ERROR: <input>:1:5: expected type 'int' but found "
                                      "'string'"),
        ('device.attributes["d"].tags.exists(t, t == "x")', CELFeatures(), "compilation failed: ERROR: <input>:1:23: "
         "expression of type 'any' cannot be range of a comprehension (must be list, map, or dynamic)"),
        ('device.driver.matches("[")', ALL, "compilation failed: ERROR: <input>:1:23: invalid matches argument"),
    ],
)
def test_compile_errors_carry_upstreams_text(expression: str, features: CELFeatures, error: str) -> None:
    compiled = compile_selector(expression, features, new_object=True)
    assert compiled.error is not None and compiled.error_line is not None
    assert compiled.error_line.startswith(error)
    assert "\n" not in compiled.error_line
    # the full text is cel-go's: the line and a caret under the column
    assert compiled.error.splitlines()[1].startswith(" | ")


def test_gated_options_are_offered_to_new_objects_with_their_gate_only() -> None:
    default_136 = CELFeatures(consumable_capacity=True)
    expression = 'device.attributes["d"].x.includes(1)'
    created = compile_selector(expression, default_136, new_object=True)
    assert created.error_line is not None and "undeclared reference to 'includes'" in created.error_line
    assert compile_selector(expression, default_136).error is None  # stored: every option of 1.36
    assert compile_selector(expression, ALL, new_object=True).error is None  # DRAListTypeAttributes on
    multi = "device.allowMultipleAllocations"
    assert compile_selector(multi, CELFeatures(), new_object=True).error is not None
    assert compile_selector(multi, CELFeatures()).error is None
    # with DRAListTypeAttributes an attribute value is dyn: a list attribute can be a comprehension range
    tags = 'device.attributes["d"].tags.exists(t, t == "x")'
    assert compile_selector(tags, default_136).error is not None
    assert compile_selector(tags, ALL).error is None


def test_bind_optionals_and_code_points_work_as_upstream() -> None:
    device = _device()
    for expression in ("cel.bind(x, 2, x * x) == 4", 'size("héllo") == 5',
                       'device.attributes["gpu.example.com"].?model.orValue("") == "h100"',
                       'device.attributes["gpu.example.com"].?nosuch.orValue("none") == "none"',
                       'semver("1.0.0") == semver("1.0.0+b")'):
        compiled = compile_selector(expression, ALL)
        assert compiled.error is None, expression
        assert device_matches(compiled, device) is True, expression


def test_comprehension_variables_are_not_undeclared() -> None:
    assert compile_selector('device.attributes.all(d, d != "" && [1].exists(x, x == 1))', ALL).error is None


def test_runtime_errors_word_the_failure() -> None:
    device = _device()
    with pytest.raises(CELRuntimeError, match=r"^no such overload$"):
        device_matches(compile_selector('device.attributes["gpu.example.com"].model > 3', ALL), device)
    with pytest.raises(CELRuntimeError, match=r"^No Major.Minor.Patch elements found$"):
        device_matches(compile_selector('semver("one") == semver("1.0.0")', ALL), device)
    with pytest.raises(CELRuntimeError, match=r"^integer overflow$"):
        device_matches(compile_selector("9223372036854775807 + 1 > 0", ALL), device)
    with pytest.raises(CELRuntimeError, match=r"^CEL result of type string could not be converted to bool: "
                                              r"unsupported native conversion from string to 'bool'$"):
        device_matches(compile_selector('device.attributes["gpu.example.com"].model', ALL), device)
    # `||` reports the left operand's error when both fail
    with pytest.raises(CELRuntimeError, match=r"^division by zero$"):
        device_matches(compile_selector('1 / 0 == 1 || device.attributes["x"].y == 1', ALL), device)


def test_the_cost_estimate_is_the_api_servers() -> None:
    ordinary = compile_selector('device.driver == "x" && device.attributes["x"].model == "y"', ALL)
    assert cost_error(ordinary) is None and ordinary.max_cost < 100
    assert compile_selector('device.driver.indexOf(".") > 0', ALL).max_cost == 10  # the driver name is bounded
    for unbounded in ('device.driver.split(".").exists(p, p.indexOf("x") > 0)', '["a","b"].join("-") == "a-b"',
                      "type(device.driver) == string"):
        assert cost_error(compile_selector(unbounded, ALL)) == "too complex, exceeds cost limit", unbounded
    four = ("device.attributes.all(a, device.attributes.all(b, device.attributes.all(c, "
            "device.attributes.all(d, a == b))))")
    assert cost_error(compile_selector(four, ALL)) == "too complex, exceeds cost limit"


_REPLACE = '.replace("", "xxxxxxxxxx")'


@pytest.mark.parametrize(
    ("expression", "refused", "answer"),
    [
        # a super-linear pattern for a backtracking engine: RE2 answers at once, as cel-go does
        ('"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa!".find("(a+)+$") == ""', False, True),
        # five chained replace + split inside two `all`
        ('device.driver' + '.replace("a", "aa")' * 5 + '.split(",").all(x, device.driver'
         + '.replace("a", "aa")' * 5 + '.split(",").all(y, x == y))', True, True),
        # nine replaces that would build a gigabyte string
        ("device.driver" + _REPLACE * 9 + ".size() > 0", True, None),
        ("device.driver" + _REPLACE * 10 + ".size() > 0", True, None),
    ],
)
def test_hostile_selectors_are_refused_on_read_and_stopped_at_run_time(
    expression: str, refused: bool, answer: bool | None
) -> None:
    compiled = compile_selector(expression, ALL)
    assert compiled.error is None
    assert (cost_error(compiled) == "too complex, exceeds cost limit") is refused
    # A stored object is not estimated again: the scheduler evaluates it under the runtime limit
    # (1,000,000), which stops the work before it is done, in one line.
    device = device_variables("a," * 31 + "a", {}, {}, None, ALL)
    if answer is None:
        with pytest.raises(CELRuntimeError, match=r"^operation cancelled: actual cost limit exceeded$"):
            device_matches(compiled, device)
    else:
        assert device_matches(compiled, device) is answer


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


def test_a_library_call_with_a_value_of_the_wrong_type_names_it_as_cel_go_does() -> None:
    device = device_variables("gpu.example.com", {"v": DeviceAttribute("version", ("1.2.3", "2.0.0"), True)}, {},
                              None, ALL)
    with pytest.raises(CELRuntimeError, match=r"^no such overload: major\(list\)$"):
        device_matches(compile_selector('device.attributes["gpu.example.com"].v.major() >= 1', ALL), device)
    with pytest.raises(CELRuntimeError, match=r"^got 'types.Int', expected iterable type$"):
        device_matches(compile_selector("cel.bind(x, dyn(1), x.exists(y, y == 1))", ALL), device)


def test_selectors_nested_past_cel_cpps_parser_limit_are_refused_in_one_line() -> None:
    # cel-go allows 250 levels, cel-cpp's parser 32: the one known difference (docs/fidelity.md)
    compiled = compile_selector(" + ".join(["1"] * 40) + " > 0", ALL)
    assert compiled.error_line is not None and "recursion" in compiled.error_line
    assert compile_selector(" + ".join(["1"] * 20) + " > 0", ALL).error is None


@pytest.mark.parametrize(
    "chain", [" || ".join(["false"] * 1000 + ["true"]), "!" * 1000 + "true", "-" * 1000 + "1 == 1"])
def test_repetition_chains_are_not_nesting_and_pass_upstreams_250_levels(chain: str) -> None:
    # cel-go's grammar reads these as one rule repeated: accepted at any length (conformance dra-cel)
    compiled = compile_selector(chain, ALL)
    assert compiled.error is None
    assert evaluate(compiled, _device())[0] is True


@pytest.mark.parametrize(
    ("expression", "cost"),
    [
        # measured with the real 1.36 library (conformance/, cel-go's cost tracker and planner)
        ('"abc".indexOf("c", 1) == 2', 1),  # a tenth of 3 bytes, rounded down, and the comparison
        ('device.attributes["gpu.example.com"].model in ["h100", "h200"]', 4),  # a set lookup: free
        ('device.attributes["gpu.example.com"].model == "h100"', 5),
        ('has(device.attributes["gpu.example.com"].model)', 3),
        ('int("12") + 1 == 13', 2),  # a constant conversion is done once
        ('{"a": 1}.a == 1', 3),
        ("[[[[[[[1]]]]]]] != []", 0),  # a list of constant lists is a constant too (measured at 1.37.2)
        ('device.attributes["gpu.example.com"].?model.orValue("") == "h100"', 5),
    ],
)
def test_the_evaluated_cost_is_cel_gos(expression: str, cost: int) -> None:
    device = device_variables("gpu.example.com", {"model": DeviceAttribute("string", ("h100",))}, {}, None, ALL)
    assert evaluate(compile_selector(expression, ALL), device)[1] == cost


def test_a_new_objects_compile_answers_the_api_servers_checks_without_a_program() -> None:
    """Reading an object checks its selectors as the API server does: the error, the estimated cost and
    the output type are a stored object's, and no program is built or kept (the allocator evaluates the
    stored compile)."""
    expression = 'device.driver == "gpu.example.com" && device.attributes["gpu.example.com"].numa == 1'
    created = compile_selector(expression, ALL, new_object=True)
    stored = compile_selector(expression, ALL)
    assert created.error is None and created.program is None and created.paths is None
    assert (created.max_cost, created.output_type) == (stored.max_cost, stored.output_type)
    assert device_matches(stored, _device()) is True
    with pytest.raises(CELRuntimeError, match="not compiled for evaluation"):
        evaluate(created, _device())


def test_a_compiled_selector_keeps_its_program_not_the_parsed_expression() -> None:
    """Thousands of compiled selectors stay cached: each keeps what evaluating needs, not the parsed
    expression's nodes (every object kept is walked by each full collection of Python's collector)."""
    import gc
    import types

    from numalign.k8s.dra.cel.ast import Expr

    compiled = compile_selector('device.attributes["gpu.example.com"].model in ["h100", "h200"] && '
                                'device.capacity["gpu.example.com"].memory.compareTo(quantity("40Gi")) >= 0', ALL)
    seen: set[int] = set()
    stack: list[object] = [compiled]
    kinds: set[type] = set()
    while stack:
        obj = stack.pop()
        if id(obj) in seen or isinstance(obj, type) or type(obj).__name__ == "module":
            continue
        seen.add(id(obj))
        kinds.add(type(obj))
        if isinstance(obj, types.FunctionType):  # what it closes over, not its module's globals
            stack.extend(cell.cell_contents for cell in obj.__closure__ or ())
            stack.extend(obj.__defaults__ or ())
        else:
            stack.extend(gc.get_referents(obj))
    assert compiled.program is not None and Expr not in kinds


@pytest.mark.parametrize(
    ("expression", "answer"),
    [
        # net/url refuses what urllib raised ValueError on (an internal error reached the user), or took
        ('url("http://[::1").getHost() == ""', 'parse "http://[::1": missing \']\' in host'),
        ('url("http://a:abc/").getHost() == "a"', 'parse "http://a:abc/": invalid port ":abc" after host'),
        ('isURL("http://[::1") || isURL("http://a:abc/")', False),
        # Go's Port() is the digits as written; urllib raised ValueError past 65535
        ('url("http://a:99999/x").getPort() == "99999"', True),
        ('url("http://u:p@[::1]:8443/x?y=:z").getPort() == "8443"', True),
        ('url("http://[::1]/x").getPort() == "" && url("https://x").getHost() == "x"', True),
    ],
)
def test_url_functions_parse_as_net_url_does(expression: str, answer: bool | str) -> None:
    compiled = compile_selector(expression, ALL)
    assert compiled.error is None
    if isinstance(answer, bool):
        assert device_matches(compiled, _device()) is answer
    else:
        with pytest.raises(CELRuntimeError) as raised:
            device_matches(compiled, _device())
        assert str(raised.value) == f"URL parse error during conversion from string: {answer}"


@pytest.mark.parametrize(
    ("expression", "answer"),
    [
        # IP and URL values compare by value (they compared by identity: every such `==` was false)
        ('ip("1.1.1.1") == ip("1.1.1.1") && ip("2001:db8::1") == ip("2001:DB8::1")', True),
        ('ip("1.1.1.1") in [ip("1.1.1.1")] && url("http://x/") == url("http://x/")', True),
        ('ip("1.1.1.1") != ip("1.1.1.2")', True),
        # the IP library refuses what netip parses but Kubernetes does not take (answers from the real
        # k8s.io/dynamic-resource-allocation/cel of 1.35-1.37, conformance/.build/harness-1.3x)
        ('isIP("::ffff:1.2.3.4") || isIP("fe80::1%eth0")', False),
        ('ip("::ffff:1.2.3.4").family() == 6', 'IPv4-mapped IPv6 address "::ffff:1.2.3.4" is not allowed'),
        ('ip("fe80::1%eth0").family() == 6', 'IP address "fe80::1%eth0" with zone value is not allowed'),
        ('url("http://x/?a=1&a=2&b").getQuery() == {"a": ["1", "2"], "b": [""]}', True),
        ('url("").getHost() == ""', 'URL parse error during conversion from string: parse "": empty url'),
    ],
)
def test_ip_and_url_values_answer_as_the_kubernetes_libraries(expression: str, answer: bool | str) -> None:
    compiled = compile_selector(expression, ALL)
    assert compiled.error is None
    if isinstance(answer, bool):
        assert device_matches(compiled, _device()) is answer
    else:
        with pytest.raises(CELRuntimeError) as raised:
            device_matches(compiled, _device())
        assert str(raised.value) == answer
