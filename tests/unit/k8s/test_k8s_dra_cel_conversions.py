"""CEL type conversions as cel-go answers them (each checked against the real 1.37 environment through
conformance/.build's harness): the one text of a string that does not convert, a constant conversion
that fails refusing the program itself, the literal validators of duration() and timestamp(), and the
Go parsers behind them (strconv, time.ParseDuration, time.Parse RFC3339, fmt's %g)."""

from __future__ import annotations

import math

import pytest

from numalign.k8s.dra.cel import CELFeatures, CELRuntimeError, compile_selector, device_variables, evaluate
from numalign.k8s.dra.cel.library import (
    duration_text,
    format_double,
    parse_go_duration,
    parse_go_float,
    parse_rfc3339,
    timestamp_text,
)
from numalign.k8s.dra.types import DeviceAttribute

FEATURES = CELFeatures(minor=37)


def _device() -> dict[str, object]:
    return device_variables("gpu.example.com", {"index": DeviceAttribute("int", (3,))}, {}, None, FEATURES)


def _runtime_error(expression: str) -> str:
    compiled = compile_selector(expression, FEATURES)
    assert compiled.error is None, compiled.error
    with pytest.raises(CELRuntimeError) as caught:
        evaluate(compiled, _device())
    return str(caught.value)


@pytest.mark.parametrize(
    ("expression", "target"),
    [
        ("int(device.driver) == 1", "int"),
        ('int("0x" + string(device.attributes["gpu.example.com"].index)) == 3', "int"),
        ('int(" " + string(device.attributes["gpu.example.com"].index)) == 3', "int"),
        ("uint(device.driver) == 1u", "uint"),
        ("double(device.driver) > 0.0", "double"),
        ('duration(device.driver) > duration("1s")', "google.protobuf.Duration"),
        ("timestamp(device.driver) > timestamp(1)", "google.protobuf.Timestamp"),
    ],
)
def test_a_string_that_does_not_convert_says_so_in_one_text(expression: str, target: str) -> None:
    # cel-go's String.ConvertToType hides strconv's and time's own errors
    assert _runtime_error(expression) == f"type conversion error from 'string' to '{target}'"


@pytest.mark.parametrize(
    ("expression", "error"),
    [
        ('false && int("x") == 1', "type conversion error from 'string' to 'int'"),
        ('[int("x")].size() == 1', "type conversion error from 'string' to 'int'"),
        ('dyn(int("99999999999999999999")) == 1', "type conversion error from 'string' to 'int'"),
        ("uint(-1) == 1u", "unsigned integer overflow"),
        ("uint(-0.5) == 0u", "unsigned integer overflow"),  # doubleToUint64Checked: any v < 0
        ("int(1e19) == 1", "integer overflow"),
        ('string(b"\\xff") == ""', "invalid UTF-8 in bytes, cannot convert to string"),
        ('double("1e400") > 1.0', "type conversion error from 'string' to 'double'"),
        ('bool("yes")', "type conversion error from 'string' to 'bool'"),
    ],
)
def test_a_constant_conversion_that_fails_refuses_the_program(expression: str, error: str) -> None:
    # cel-go's optimizer converts constants when it builds the program, whether or not they would run
    for new_object in (True, False):
        assert compile_selector(expression, FEATURES, new_object=new_object).error == (
            f"program instantiation failed: {error}")


def test_a_double_below_zero_overflows_uint_however_close_to_zero() -> None:
    assert _runtime_error('uint(double(device.attributes["gpu.example.com"].index) - 3.5) == 0u') == (
        "unsigned integer overflow")
    assert evaluate(compile_selector("uint(-0.0) == 0u", FEATURES), _device())[0] is True  # -0.0 is not below 0


def test_conversions_of_constants_that_succeed_still_evaluate() -> None:
    compiled = compile_selector('int("12") == 12 && uint("7") == 7u && bool("T")', FEATURES)
    assert evaluate(compiled, _device()) == (True, 2)  # the two comparisons: the conversions cost nothing


@pytest.mark.parametrize(
    ("expression", "column"),
    [
        ('duration("2562048h") > duration("1s")', 10),
        ('duration("--5s") > duration("1s")', 10),
        ("timestamp(253402300800) > timestamp(1)", 11),
        ("timestamp(-62135596801) > timestamp(1)", 11),
        ('timestamp("2020-02-30T00:00:00Z") > timestamp(1)', 11),
    ],
)
def test_duration_and_timestamp_literals_are_validated_whatever_their_type(expression: str, column: int) -> None:
    error = compile_selector(expression, FEATURES).error
    assert error is not None
    name = expression.split("(")[0]
    assert error.splitlines()[0] == f"compilation failed: ERROR: <input>:1:{column}: invalid {name} argument"


def test_timestamps_before_year_1_overflow_at_run_time() -> None:
    expression = ('timestamp("000" + string(device.attributes["gpu.example.com"].index - 3) + "-01-01T00:00:00Z")'
                  " > timestamp(1)")
    assert _runtime_error(expression) == "timestamp overflow"


def test_an_empty_lists_min_and_max_name_the_function_alone() -> None:
    assert _runtime_error("[].min() == 1") == "min called on empty list"
    assert _runtime_error("[].max() == 1") == "max called on empty list"


@pytest.mark.parametrize(
    ("text", "nanos"),
    [("1h", 3_600_000_000_000), ("-1.5s", -1_500_000_000), (".5s", 500_000_000), ("5.s", 5_000_000_000),
     ("0", 0), ("+0", 0), ("1µs", 1000), ("2562047h", 9_223_369_200_000_000_000),
     ("9223372036854775807ns", 9_223_372_036_854_775_807), ("-9223372036854775808ns", -(1 << 63)),
     ("--5s", None), ("2562048h", None), (".s", None), ("1h1", None), ("1sx", None), ("", None),
     ("9223372036854775808ns", None)],
)
def test_durations_parse_as_go_does(text: str, nanos: int | None) -> None:
    assert parse_go_duration(text) == nanos


@pytest.mark.parametrize(
    ("text", "nanos"),
    [("2020-01-01T00:00:00.120Z", (1_577_836_800_120_000_000, 0)),
     ("0001-01-01T00:00:00Z", (-62_135_596_800 * 10**9, 0)),
     ("2020-02-29T00:00:00-07:30", (1_582_961_400 * 10**9, -27000)), ("1969-12-31T23:59:59.5Z", (-500_000_000, 0)),
     ("2021-02-29T00:00:00Z", None), ("2020-01-01T24:00:00Z", None), ("2020-01-01 00:00:00Z", None),
     ("2020-01-01T00:00:00", None), ("2020-01-01T00:00:00+0100", None), ("2020-01-01T00:00Z", None)],
)
def test_timestamps_parse_as_gos_rfc3339_layout(text: str, nanos: tuple[int, int] | None) -> None:
    assert parse_rfc3339(text) == nanos


@pytest.mark.parametrize(
    ("text", "nanos"),
    [  # what time.Parse's layout parser takes once the strict fast path fails (harness 1.33 and 1.37 agree)
        ("2024-01-01T00:00:00,5Z", (1_704_067_200_500_000_000, 0)),
        ("2024-01-01T7:05:09Z", (1_704_092_709 * 10**9, 0)),
        ("2024-01-01T00:00:00+24:00", ((1_704_067_200 - 86400) * 10**9, 86400)),
        ("2024-01-01T00:00:00-24:60", ((1_704_067_200 + 90000) * 10**9, -90000)),
        ("2024-01-01T00:00:00+00:60", ((1_704_067_200 - 3600) * 10**9, 3600)),
        ("2024-01-01T00:00:00,1234567891Z", (1_704_067_200_123_456_789, 0)),
        # and what it still refuses
        ("2024-01-01T00:00:00+25:00", None), ("2024-01-01T00:00:00+00:61", None),
        ("2024-01-01T00:00:00.5,5Z", None), ("2024-01-01T24:00:00Z", None), ("2024-01-01T000:00:00Z", None),
        ("2024-1-01T00:00:00Z", None), ("2024-01-01T00:0:00Z", None), ("2024-01-01T00:00:00,Z", None),
        ("2024-01-01T00:00:00+01:00Z", None), ("2024-01-01T00:00:00z", None), ("2024-01-01T00:00:00+1:000", None),
    ],
)
def test_timestamps_take_what_gos_general_layout_parser_takes(text: str, nanos: tuple[int, int] | None) -> None:
    assert parse_rfc3339(text) == nanos


def test_timestamps_and_durations_print_as_cel_go() -> None:
    assert timestamp_text(1_577_836_800_120_000_000) == "2020-01-01T00:00:00.12Z"
    assert timestamp_text(-62_135_596_800 * 10**9) == "0001-01-01T00:00:00Z"
    assert timestamp_text(1_582_961_400 * 10**9, -27000) == "2020-02-29T00:00:00-07:30"  # the offset read
    assert duration_text(-1_500_000_000) == "-1.5s"
    assert duration_text(3_600 * 10**9) == "3600s"
    assert duration_text(1) == "0.000000001s"


@pytest.mark.parametrize(
    ("text", "value"),
    [("1.5", 1.5), ("-.5e1", -5.0), ("0x1p-2", 0.25), ("0x_1p0", 1.0), ("Infinity", math.inf), ("-inf", -math.inf),
     ("1e-400", 0.0), ("1e400", None), ("1_0", 10.0), ("1.4_000", 1.4), ("1e1_0", 1e10), ("1__0", None), ("1_", None),
     (" 1", None), ("0x10", None), ("١", None), ("+nan", None)],
)
def test_doubles_parse_as_strconv_does(text: str, value: float | None) -> None:
    assert parse_go_float(text) == value


def test_nan_parses_in_any_case() -> None:
    parsed = parse_go_float("NaN")
    assert parsed is not None and math.isnan(parsed)


@pytest.mark.parametrize(
    ("value", "text"),
    [(1e6, "1e+06"), (123456789.0, "1.23456789e+08"), (123456.0, "123456"), (0.0001, "0.0001"), (1e-5, "1e-05"),
     (-0.0, "-0"), (1.5, "1.5")],
)
def test_a_doubles_string_is_fmts_g(value: float, text: str) -> None:
    assert format_double(value) == text


_LONG = 'lists.range(5000).map(x, "1").join("")'  # a 5,000-digit string, past Python's int() digit limit


@pytest.mark.parametrize(
    ("expression", "error"),
    [
        (f"int({_LONG}) == 1", "type conversion error from 'string' to 'int'"),
        (f"uint({_LONG}) == 1u", "type conversion error from 'string' to 'uint'"),
        (f'semver({_LONG} + ".0.0").major() > 0', f'strconv.ParseUint: parsing "{"1" * 5000}": value out of range'),
        (f'("%." + {_LONG} + "f").format([1.0]) == ""',
         "could not parse formatting clause: error while parsing precision: error while converting precision to "
         f'integer: strconv.Atoi: parsing "{"1" * 5000}": value out of range'),
    ],
)
def test_numbers_of_any_length_are_refused_in_upstreams_words(expression: str, error: str) -> None:
    assert _runtime_error(expression) == error


def test_leading_zeros_do_not_count_towards_the_range() -> None:
    compiled = compile_selector('int(lists.range(5000).map(x, "0").join("") + "7") == 7', FEATURES)
    assert evaluate(compiled, _device())[0] is True
