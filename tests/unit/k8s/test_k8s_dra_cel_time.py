"""CEL's timestamp and duration accessors, int(duration), time arithmetic's overflow checks and the
well-known types' names, as cel-go answers them (each checked against the real 1.33 and 1.37 environments
through conformance/.build's harnesses; the named dra-cel cases timestamp-getters-*, duration-*)."""

from __future__ import annotations

import pytest

from numalign.k8s.dra.cel import CELFeatures, CELRuntimeError, compile_selector, device_variables, evaluate
from numalign.k8s.dra.cel.library import duration_field, timestamp_field, zone_offset
from numalign.k8s.dra.types import DeviceAttribute

FEATURES = CELFeatures(minor=37)


def _device() -> dict[str, object]:
    return device_variables("gpu.example.com", {"index": DeviceAttribute("int", (3,))}, {}, None, FEATURES)


def _value(expression: str) -> object:
    compiled = compile_selector(f"dyn({expression})", FEATURES)
    assert compiled.error is None, compiled.error
    return evaluate(compiled, _device())[0]


def _runtime_error(expression: str) -> str:
    compiled = compile_selector(expression, FEATURES)
    assert compiled.error is None, compiled.error
    with pytest.raises(CELRuntimeError) as caught:
        evaluate(compiled, _device())
    return str(caught.value)


@pytest.mark.parametrize(
    ("expression", "value"),
    [  # 1970-01-02T00:00:00Z, a Friday; cel-go's month, day of year and getDayOfMonth count from 0
        ("timestamp(86400).getFullYear()", 1970), ("timestamp(86400).getMonth()", 0),
        ("timestamp(86400).getDayOfYear()", 1), ("timestamp(86400).getDayOfMonth()", 1),
        ("timestamp(86400).getDate()", 2), ("timestamp(86400).getDayOfWeek()", 5),
        ('timestamp("2024-02-29T23:59:59.999Z").getMilliseconds()', 999),
        ('timestamp("2024-12-31T12:00:00Z").getDayOfYear()', 365),
        # the zero-argument forms read UTC, not the zone the string was written in
        ('timestamp("2024-01-01T00:00:00+05:30").getDayOfYear()', 364),
        ('timestamp("2024-01-01T00:00:00+05:30").getHours()', 18),
        ("timestamp(-1).getFullYear()", 1969), ("timestamp(-62135596800).getDayOfWeek()", 1),
    ],
)
def test_timestamp_accessors_read_utc(expression: str, value: int) -> None:
    assert _value(expression) == value


def test_a_zone_is_an_iana_name_or_hours_and_minutes_parsed_as_atoi() -> None:
    assert _value('timestamp(86400).getHours("America/New_York")') == 19
    # the zone's offset at that instant: Kathmandu was +05:30 until 1986, +05:45 since
    assert _value('timestamp(0).getMinutes("Asia/Kathmandu")') == 30
    assert _value('timestamp(1700000000).getMinutes("Asia/Kathmandu")') == 58
    assert _value('timestamp(0).getHours("")') == 0 and _value('timestamp(0).getHours("UTC")') == 0
    # "-00:30": the hours' sign is the text's, so the minutes subtract; minutes are not range-checked
    assert _value('timestamp(0).getMinutes("-00:30")') == 30
    assert _value('timestamp(0).getHours("05:99")') == 6
    assert zone_offset("+14:00", 0) == 14 * 3600


@pytest.mark.parametrize(
    ("zone", "error"),
    [("Nowhere/Town", "unknown time zone Nowhere/Town"), ("utc", "unknown time zone utc"),
     ("../etc/passwd", "time: invalid location name"), ("/etc/passwd", "time: invalid location name"),
     ("America", "is a directory"), ("zone.tab", "malformed time zone information"),
     ("x:00", 'strconv.Atoi: parsing "x": invalid syntax'), ("5:", 'strconv.Atoi: parsing "": invalid syntax'),
     ("99999999999999999999:00", 'strconv.Atoi: parsing "99999999999999999999": value out of range')],
)
def test_a_zone_go_refuses_is_its_error(zone: str, error: str) -> None:
    assert _runtime_error(f'timestamp(0).getHours("{zone}") == 0') == error


@pytest.mark.parametrize(
    ("nanos", "name", "value"),
    [(5_400_000_000_000, "getHours", 1), (-5_400_000_000_000, "getHours", -1), (1_500_000_000, "getMilliseconds", 1500),
     (-3_000_000, "getMilliseconds", -3), (5_400_000_000_000, "getMinutes", 90),
     # Go's Seconds() adds the remainder as a double: .999999999 past 5e9 s rounds the total up
     (5_000_000_000_999_999_999, "getSeconds", 5_000_000_001), (59_999_999_999, "getMinutes", 0)],
)
def test_duration_accessors_are_totals(nanos: int, name: str, value: int) -> None:
    assert duration_field(nanos, name) == value


def test_timestamp_field_counts_days_from_the_epoch_in_both_directions() -> None:
    assert timestamp_field(-1, 0, "getMilliseconds") == 999  # 1969-12-31T23:59:59.999999999
    assert timestamp_field(0, -30 * 60, "getDate") == 31


def test_int_of_a_duration_is_its_nanoseconds() -> None:
    assert _value('int(duration("1.5s"))') == 1_500_000_000


@pytest.mark.parametrize(
    ("expression", "error"),
    [('timestamp(253402300799) + duration("1s") > timestamp(1)', "timestamp overflow"),
     ('duration("1s") + timestamp(253402300799) > timestamp(1)', "timestamp overflow"),
     ('timestamp(-62135596800) - duration("1ns") > timestamp(1)', "timestamp overflow"),
     ('timestamp(253402300799) - timestamp(-62135596800) > duration("1s")', "integer overflow"),
     ('duration("2562047h") + duration("1h") > duration("1s")', "integer overflow")],
)
def test_time_arithmetic_checks_overflow(expression: str, error: str) -> None:
    assert _runtime_error(expression) == error


def test_the_well_known_types_are_named_as_cel_go_names_them() -> None:
    assert _value('type(duration("1s")) == google.protobuf.Duration') is True
    assert _value("type(timestamp(1)) == google.protobuf.Timestamp") is True
    assert compile_selector('-duration("1s") < duration("0s")', FEATURES).error == (
        "compilation failed: ERROR: <input>:1:1: found no matching overload for '-_' applied to '(duration)'\n"
        ' | -duration("1s") < duration("0s")\n | ^')
