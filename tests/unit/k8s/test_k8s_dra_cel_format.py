"""The strings extension's format() as cel-go 0.23-0.29 answer it (each answer below was given by the
real 1.33 and 1.37 environments through conformance/.build's harnesses): Go's fmt for the integer
clauses and for doubles inside lists and maps, x/text's en_US printer for %f and %e, lists and maps as
CEL literals, the errors' texts at run time, and the compile-time check of a constant format string."""

from __future__ import annotations

import pytest

from numalign.k8s.dra.cel import CELFeatures, CELRuntimeError, compile_selector, device_variables, evaluate
from numalign.k8s.dra.cel.library import cel_quote
from numalign.k8s.dra.cel.netip import go_strconv_quote
from numalign.k8s.dra.cel.strformat import format_call
from numalign.k8s.dra.types import DeviceAttribute

FEATURES = CELFeatures(minor=37)


def _device() -> dict[str, object]:
    return device_variables("gpu.example.com", {"model": DeviceAttribute("string", ("h100",)),
                                                "index": DeviceAttribute("int", (3,))}, {}, None, FEATURES)


def _formatted(call: str) -> str:
    """The string a format call gives, read from the runtime error of a lookup by it."""
    compiled = compile_selector(f'{{"a": 1}}[{call}] == 1', FEATURES)
    assert compiled.error is None, compiled.error
    with pytest.raises(CELRuntimeError) as caught:
        evaluate(compiled, _device())
    message = str(caught.value)
    assert message.startswith("no such key: "), message
    return message.removeprefix("no such key: ")


@pytest.mark.parametrize(
    ("call", "text"),
    [
        ('"%e".format([2.71828])', "2.718280×10⁰⁰"),
        ('"%f".format([1234567.891])', "1,234,567.891000"),
        ('"%.2f".format([-1234.5])', "-1,234.50"),
        ('"%.0f".format([2.5])', "2"),
        ('"%.2f".format([-0.0001])', "-0.00"),
        ('"%f".format([-0.0])', "0.000000"),
        ('"%.3e".format([12345.678])', "1.234568×10⁰⁴"),  # the precision is a width: six decimals still
        ('"%.20e".format([1.0])', "       1.000000×10⁰⁰"),
        ('"%e".format([1e-300])', "1.000000×10⁻³⁰⁰"),
        ('"%e".format([double("NaN")])', "   NaN"),
        ('"%e".format([-double("Infinity")])', "    -∞"),
        ('"%f".format(["-Infinity"])', "-∞"),
        ('"%.300f".format([1.5])', "1." + "5".ljust(44, "0")),  # 300 held in 8 bits: 44 decimals at least
        ('"%.99999999f".format([1.5])', "%!(NOVERB)"),
        ('"%.3f".format([1e21])', "1,000,000,000,000,000,000,000.000"),
        ('"%x %X %o %b %b".format([255, "hi", 8, 5, true])', "ff 6869 10 101 1"),
        ('"%x %o %b %X".format([-255, -8, -5, b"\\x01\\xab"])', "-ff -10 -101 01AB"),
        ('"%s".format([[1.5, "a", b"x", 1u, null, {"b": 1, "a": 2.0}, int, true]])',
         '[1.500000, "a", b"x", 1, null, {"a":2.000000, "b":1}, int, true]'),
        ('"%s".format([[1.0/0.0, -0.0, 1e21]])', '["+Inf", -0.000000, 1000000000000000000000.000000]'),
        ('"%s %s %s".format([1e21, 1.0, -0.0])', "1e+21 1 -0"),
        ('"%s".format([[duration("-1.5s"), timestamp("2021-06-01T12:00:00.5+02:00")]])',
         '[duration("-1.5s"), timestamp("2021-06-01T12:00:00.5+02:00")]'),
        ('"%s".format([device.attributes["gpu.example.com"]])', '{"index":3, "model":"h100"}'),
        ('"%s".format([["a\\"b", "é\\n", "\\u0001"]])', '["a\\"b", "é\\n", "\\x01"]'),
        ('"%%%d%%".format([1])', "%1%"),
    ],
)
def test_each_clause_formats_as_cel_go(call: str, text: str) -> None:
    assert _formatted(call) == text


@pytest.mark.parametrize(
    ("call", "error"),
    [
        ('"%d".format(dyn([1.5]))',
         "error during formatting: decimal clause can only be used on integers, was given double"),
        ('"%.f".format(dyn([1.5]))', "could not parse formatting clause: error while parsing precision: error while "
                                     'converting precision to integer: strconv.Atoi: parsing "": invalid syntax'),
        ('"%.5".format(dyn([1.5]))', "could not parse formatting clause: error while parsing precision: could not find "
                                     "end of precision specifier"),
        ('"%é".format(dyn([1]))', 'could not parse formatting clause: unrecognized formatting clause "Ã"'),
        ('"%s".format([device.capacity["gpu.example.com"], quantity("1")])', None),
        ('"%s".format(dyn([[semver("1.0.0")]]))',
         "error during formatting: no formatting function for kubernetes.Semver"),
        ('"%s".format(dyn([{1.5: 1}]))', "error during formatting: no formatting function for map key of type double"),
        ('"%s".format([b"\\xff"])', 'error during formatting: could not convert argument "invalid UTF-8 in bytes, '
                                    'cannot convert to string" to string'),
        ('"%d %d".format(dyn([1]))', "index 1 out of range"),
        ('"%".format(dyn([1]))', "unexpected end of string"),
        ('"%".format(dyn([]))', "index 0 out of range"),
    ],
)
def test_runtime_errors_say_what_cel_go_says(call: str, error: str | None) -> None:
    compiled = compile_selector(f"{call} == \"\"", FEATURES)
    if error is None:  # a literal list the validator cannot type precisely enough: a type error up front
        assert compiled.error is not None
        return
    assert compiled.error is None, compiled.error
    with pytest.raises(CELRuntimeError) as caught:
        evaluate(compiled, _device())
    assert str(caught.value) == error


@pytest.mark.parametrize(
    ("expression", "column", "message"),
    [
        ('"%".format([1]) == ""', 11, "unexpected end of string"),
        ('"%d".format([1.5]) == ""', 14,
         "error during formatting: decimal clause can only be used on integers, was given double"),
        ('"%q".format([1]) == ""', 12, 'could not parse formatting clause: unrecognized formatting clause "q"'),
        ('"%d %d".format([1]) == ""', 15, "index 1 out of range"),
        ('"%d".format([1, 2]) == ""', 12, "too many arguments supplied to string.format (expected 1, got 2)"),
        ('"%s".format([semver("1.0.0")]) == ""', 20,
         "error during formatting: string clause can only be used on strings, bools, bytes, ints, doubles, maps, "
         "lists, types, durations, and timestamps, was given kubernetes.Semver"),
        ('"%s".format([[ip("10.0.0.1")]]) == ""', 17,
         "error during formatting: string clause can only be used on strings, bools, bytes, ints, doubles, maps, "
         "lists, types, durations, and timestamps, was given net.IP"),
    ],
)
def test_a_constant_format_string_is_checked_against_its_literal_arguments(
        expression: str, column: int, message: str) -> None:
    for new_object in (True, False):
        error = compile_selector(expression, FEATURES, new_object=new_object).error
        assert error is not None
        assert error.splitlines()[0] == f"compilation failed: ERROR: <input>:1:{column}: {message}"


def test_literals_under_format_are_exempt_from_the_homogeneous_check_at_any_depth() -> None:
    compiled = compile_selector('"%s".format([{1: "x", 2u: [1, "a"]}]) != ""', FEATURES)
    assert compiled.error is None
    assert compile_selector('[1, "a"].size() == 2', FEATURES).error is not None


def test_formatting_is_charged_a_tenth_of_the_format_string() -> None:
    compiled = compile_selector('"%d-%s.........".format([1, "a"]) == ""', FEATURES)
    assert evaluate(compiled, _device()) == (False, 2)  # ceil(15 / 10), and the comparison's 0


def test_the_formatters_stay_bounded_for_any_precision() -> None:
    # a precision beyond what fmt parses is its %!(NOVERB); a large one is bounded by 16 bits
    assert format_call("%.99999999999f", [1.5]) == "%!(NOVERB)"
    assert len(format_call("%.40000f", [1.5])) < 300  # 40000 wraps to a negative maximum: shortest digits
    assert len(format_call("%.65535e", [1.5])) == 65535


def test_quotes_differ_between_strings_quote_and_format() -> None:
    # strings.quote escapes Go's seven letters, backslash and the quote only; format's %q-style quoting
    # is strconv.Quote, which also escapes what Go does not print
    assert cel_quote("a\u0001\a\u00a0") == '"a\u0001\\a\u00a0"'
    assert go_strconv_quote("a\u0001\a\u00a0😀") == '"a\\x01\\a\\u00a0😀"'


def test_a_format_result_past_64_mi_code_points_stops_as_replace_does() -> None:
    # 2,000 clauses of 65,535 characters each: cel-go would build 131 M characters (a stored selector only:
    # the API server's estimate refuses it on create)
    expression = ('lists.range(2000).map(x, "%.65535e").join("").format(lists.range(2000).map(x, 1.0)).size() > 0')
    assert compile_selector(expression, FEATURES, new_object=True).max_cost > 1_000_000
    compiled = compile_selector(expression, FEATURES)
    with pytest.raises(CELRuntimeError) as caught:
        evaluate(compiled, _device())
    assert str(caught.value) == "operation cancelled: actual cost limit exceeded"
