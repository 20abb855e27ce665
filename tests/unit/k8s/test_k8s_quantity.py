"""resource.Quantity: tables from upstream quantity_test.go plus Hypothesis round trips."""

from __future__ import annotations

import pickle

import pytest
from hypothesis import given, settings
from support.strategies import quantities, quantity_texts

from numalign.errors import InvalidInputError
from numalign.k8s.quantity import NANO, Quantity, QuantityFormat

DSI = QuantityFormat.DECIMAL_SI
BSI = QuantityFormat.BINARY_SI
DEX = QuantityFormat.DECIMAL_EXPONENT
KI = 1024
INT64_MAX = 2**63 - 1


def nanos(mantissa: int, exponent: int) -> int:
    """mantissa·10^exponent in nano units (exact; exponent >= -9)."""
    scale: int = 10 ** (exponent + 9)
    return mantissa * scale


# (input, expected nanos, expected format): upstream TestQuantityParse.
PARSE_TABLE: list[tuple[str, int, QuantityFormat]] = [
    ("0", 0, DSI), ("0n", 0, DSI), ("0u", 0, DSI), ("0m", 0, DSI), ("0Ki", 0, BSI), ("0k", 0, DSI),
    ("0Mi", 0, BSI), ("0M", 0, DSI), ("0Gi", 0, BSI), ("0G", 0, DSI), ("0Ti", 0, BSI), ("0T", 0, DSI),
    ("1", nanos(1, 0), DSI),
    ("1Ki", nanos(KI, 0), BSI), ("8Ki", nanos(8 * KI, 0), BSI), ("7Mi", nanos(7 * KI**2, 0), BSI),
    ("6Gi", nanos(6 * KI**3, 0), BSI), ("5Ti", nanos(5 * KI**4, 0), BSI), ("4Pi", nanos(4 * KI**5, 0), BSI),
    ("3Ei", nanos(3 * KI**6, 0), BSI), ("10Ti", nanos(10 * KI**4, 0), BSI),
    ("100Ti", nanos(100 * KI**4, 0), BSI),
    ("5n", nanos(5, -9), DSI), ("4u", nanos(4, -6), DSI), ("3m", nanos(3, -3), DSI), ("9", nanos(9, 0), DSI),
    ("8k", nanos(8, 3), DSI), ("50k", nanos(5, 4), DSI), ("7M", nanos(7, 6), DSI), ("6G", nanos(6, 9), DSI),
    ("5T", nanos(5, 12), DSI), ("40T", nanos(4, 13), DSI), ("300T", nanos(3, 14), DSI),
    ("2P", nanos(2, 15), DSI), ("1E", nanos(1, 18), DSI),
    ("1E-3", nanos(1, -3), DEX), ("1e3", nanos(1, 3), DEX), ("1E6", nanos(1, 6), DEX),
    ("1e9", nanos(1, 9), DEX), ("1E12", nanos(1, 12), DEX), ("1e15", nanos(1, 15), DEX),
    ("1E18", nanos(1, 18), DEX), ("1e14", nanos(1, 14), DEX), ("1e13", nanos(1, 13), DEX),
    ("100.035k", nanos(100035, 0), DSI),
    ("0.001", nanos(1, -3), DSI), ("0.0005k", nanos(5, -1), DSI), ("0.005", nanos(5, -3), DSI),
    ("0.05", nanos(5, -2), DSI), ("0.5", nanos(5, -1), DSI), ("0.00050k", nanos(5, -1), DSI),
    ("0.00500", nanos(5, -3), DSI), ("0.05000", nanos(5, -2), DSI), ("0.50000", nanos(5, -1), DSI),
    ("0.5e0", nanos(5, -1), DEX), ("0.5e-1", nanos(5, -2), DEX), ("0.5e-2", nanos(5, -3), DEX),
    ("10.035M", nanos(10035, 3), DSI),
    ("1.2e3", nanos(12, 2), DEX), ("1.3E+6", nanos(13, 5), DEX), ("1.40e9", nanos(14, 8), DEX),
    ("1.53E12", nanos(153, 10), DEX), ("1.6e15", nanos(16, 14), DEX), ("1.7E18", nanos(17, 17), DEX),
    ("9.01", nanos(901, -2), DSI), ("8.1k", nanos(81, 2), DSI), ("7.123456M", nanos(7123456, 0), DSI),
    ("6.987654321G", nanos(6987654321, 0), DSI), ("5.444T", nanos(5444, 9), DSI),
    ("40.1T", nanos(401, 11), DSI), ("300.2T", nanos(3002, 11), DSI), ("2.5P", nanos(25, 14), DSI),
    ("1.01E", nanos(101, 16), DSI),
    # Things that saturate or round up to nano.
    ("3.001n", nanos(4, -9), DSI), ("1.1E-9", nanos(2, -9), DEX), ("0.0000000001", nanos(1, -9), DSI),
    ("0.0000000005", nanos(1, -9), DSI), ("0.00000000050", nanos(1, -9), DSI),
    ("0.5e-9", nanos(1, -9), DEX), ("0.9n", nanos(1, -9), DSI), ("0.00000012345", nanos(124, -9), DSI),
    ("0.00000012354", nanos(124, -9), DSI),
    ("9Ei", nanos(INT64_MAX, 0), BSI), ("9223372036854775807Ki", nanos(INT64_MAX, 0), BSI),
    ("12E", nanos(12, 18), DSI),
    # Fractional binary.
    ("100.035Ki", nanos(10243584, -2), BSI), ("0.5Mi", nanos(512 * KI, 0), BSI),
    ("0.05Gi", nanos(536870912, -1), BSI), ("0.025Ti", nanos(274877906944, -1), BSI),
    # "Things written by trolls".
    ("0.000000000001Ki", nanos(2, -9), DSI), (".001", nanos(1, -3), DSI), (".0001k", nanos(100, -3), DSI),
    ("1.", nanos(1, 0), DSI), ("1.G", nanos(1, 9), DSI),
    # Accepted by upstream's scanner too.
    (".", 0, DSI), ("-.", 0, DSI), ("+", 0, DSI), ("00012", nanos(12, 0), DSI),
]


@pytest.mark.parametrize(("text", "expected", "fmt"), PARSE_TABLE)
def test_parse_table(text: str, expected: int, fmt: QuantityFormat) -> None:
    q = Quantity.parse(text)
    assert q.nanos == expected
    assert q.format is fmt
    # Upstream runs the whole table again with an explicit "+" and with "-".
    plus = Quantity.parse("+" + text.lstrip("+-"))
    assert plus.nanos == abs(expected) and plus.format is fmt
    minus = Quantity.parse("-" + text.lstrip("+-"))
    assert minus.nanos == -abs(expected) and minus.format is fmt


INVALID = [
    "", "1.1.M", "1+1.0M", "0.1mi", "0.1am", "aoeu", ".5i", "1i", "-3.01i", "-3.01e-", "1e4294967297",
    " 1", "1 ", "1K", "1 Gi", "1e", "1Ki5", "1e3Ki", "1_000", "1e1_0", "1k1", "--1", "1..0", "1GB", "1gi",
]


@pytest.mark.parametrize("text", INVALID)
def test_invalid_quantities_name_the_field_and_grammar(text: str) -> None:
    where = "spec.containers[0].resources.requests.cpu"
    with pytest.raises(InvalidInputError) as info:
        Quantity.parse(text, where)
    message = str(info.value)
    assert message.startswith(where + ": invalid quantity ")
    assert repr(text) in message
    assert "Ki Mi Gi" in message and "e.g." in message


@pytest.mark.parametrize("value", [True, None, [1], {"a": 1}, float("nan"), float("inf")])
def test_non_quantity_values_are_rejected(value: object) -> None:
    with pytest.raises(InvalidInputError, match=r"limits\.memory"):
        Quantity.parse(value, "limits.memory")


@pytest.mark.parametrize(
    ("value", "expected"),
    [(2, "2"), (0, "0"), (0.5, "500m"), (1.5, "1500m"), (0.1, "100m"), (1e-3, "1m"), (2.0, "2"), (-1, "-1")],
)
def test_yaml_numbers_parse_like_their_json_text(value: float, expected: str) -> None:
    assert str(Quantity.parse(value)) == expected


def test_floats_use_go_json_number_text() -> None:
    # encoding/json writes 1e16 positionally (DecimalSI) and 1e21 with an exponent.
    assert Quantity.parse(1e16).format is DSI and str(Quantity.parse(1e16)) == "10P"
    assert Quantity.parse(1e21).format is DEX and str(Quantity.parse(1e21)) == "1e21"
    assert Quantity.parse(1e-7) == Quantity.parse("100n")
    assert Quantity.parse(-0.0).is_zero()


# (nanos, format, canonical String()): upstream TestQuantityString and TestQuantityParseEmit.
STRING_TABLE: list[tuple[int, QuantityFormat, str]] = [
    (nanos(KI**3, 0), BSI, "1Gi"), (nanos(300 * KI**2, 0), BSI, "300Mi"), (nanos(6 * KI, 0), BSI, "6Ki"),
    (nanos(1001 * KI**3, 0), BSI, "1001Gi"), (nanos(KI**4, 0), BSI, "1Ti"), (nanos(5, 0), BSI, "5"),
    (nanos(500, -3), BSI, "500m"), (nanos(1, 9), DSI, "1G"), (nanos(1000, 6), DSI, "1G"),
    (nanos(1000000, 3), DSI, "1G"), (nanos(1, -3), DSI, "1m"), (nanos(80, -3), DSI, "80m"),
    (nanos(1080, -3), DSI, "1080m"), (nanos(108, -2), DSI, "1080m"), (nanos(300, 6), DSI, "300M"),
    (nanos(1, 12), DSI, "1T"), (nanos(1, 18), DSI, "1E"), (nanos(1, 21), DSI, "1e21"),
    (nanos(5, 21), DSI, "5e21"), (nanos(1, 24), DSI, "1e24"), (nanos(1, 70), BSI, "10e69"),
    (nanos(2, 70), BSI, "20e69"), (nanos(1, 72), BSI, "1e72"), (nanos(2**70, 0), BSI, "1180591620717411303424"),
    (nanos(1234567, 6), DSI, "1234567M"), (nanos(1234567, -3), BSI, "1234567m"), (nanos(3, 3), DSI, "3k"),
    (nanos(1025, 0), BSI, "1025"), (nanos(2000, 0), BSI, "2000"), (0, DSI, "0"), (0, BSI, "0"),
    (0, DEX, "0"), (nanos(1, 9), DEX, "1e9"), (nanos(1, -3), DEX, "1e-3"), (nanos(1, -9), DEX, "1e-9"),
    (nanos(80, -3), DEX, "80e-3"), (nanos(300, 6), DEX, "300e6"), (nanos(1, 12), DEX, "1e12"),
    (nanos(1, 3), DEX, "1e3"), (nanos(3, 3), DEX, "3e3"), (nanos(1, -9), DSI, "1n"),
    (nanos(80, -9), DSI, "80n"), (nanos(1080, -9), DSI, "1080n"), (nanos(1, -6), DSI, "1u"),
    (nanos(80, -6), DSI, "80u"), (nanos(1080, -6), DSI, "1080u"),
]


@pytest.mark.parametrize(("value", "fmt", "expected"), STRING_TABLE)
def test_canonical_string(value: int, fmt: QuantityFormat, expected: str) -> None:
    q = Quantity(value, fmt)
    assert str(q) == expected
    assert Quantity.parse(expected) == q
    if value:
        assert str(-q) == "-" + expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1Ki", "1Ki"), ("1Mi", "1Mi"), ("1Gi", "1Gi"), ("1024Mi", "1Gi"), ("1000M", "1G"),
        (".001Ki", "1024m"), (".000001Ki", "1024u"), (".000000001Ki", "1024n"), (".000000000001Ki", "2n"),
        ("0.5", "500m"), ("1.5Gi", "1536Mi"), ("1000m", "1"), ("1.5e3", "1500"), ("12e1", "120"),
        ("1000E", "1e21"), ("1500E", "1500E"), ("2049Ki", "2049Ki"), ("0.1Ki", "102400m"),
        ("1.0", "1"), ("1.500", "1500m"), ("-1.5n", "-2n"), ("-0", "0"),
        ("1080000000n", "1080m"), ("1.08", "1080m"), ("307200Ki", "300Mi"), ("0.001T", "1G"),
    ],
)
def test_parse_emit(text: str, expected: str) -> None:
    assert str(Quantity.parse(text)) == expected
    if expected != "0":
        assert str(Quantity.parse("-" + text.lstrip("-"))) == "-" + expected.lstrip("-")


@pytest.mark.parametrize(
    ("text", "value", "milli", "as_int64"),
    [
        ("1", 1, 1000, 1), ("500m", 1, 500, None), ("1500m", 2, 1500, None), ("2", 2, 2000, 2),
        ("1.0001", 2, 1001, None), ("1n", 1, 1, None), ("1Gi", 2**30, 2**30 * 1000, 2**30),
        ("0", 0, 0, 0), ("-1.5", -2, -1500, None), ("-1n", -1, -1, None), ("9.01", 10, 9010, None),
        ("1e19", 10**19, 10**22, None), ("9223372036854775807", INT64_MAX, INT64_MAX * 1000, INT64_MAX),
    ],
)
def test_accessors_round_away_from_zero(text: str, value: int, milli: int, as_int64: int | None) -> None:
    q = Quantity.parse(text)
    assert q.value() == value
    assert q.milli_value() == milli
    assert q.as_int64() == as_int64


def test_cpu_integrality_test_used_by_the_cpu_manager() -> None:
    def integral(text: str) -> bool:
        q = Quantity.parse(text)
        return q.value() * 1000 == q.milli_value()

    assert integral("2") and integral("2000m") and integral("1e3")
    assert not integral("1500m") and not integral("2001m") and not integral("1n")


@pytest.mark.parametrize(
    ("x", "y", "expect"), [("0", "0", 0), ("100m", "50m", 1), ("50m", "100m", -1), ("10000T", "100Gi", 1)]
)
def test_cmp(x: str, y: str, expect: int) -> None:
    a, b = Quantity.parse(x), Quantity.parse(y)
    assert a.cmp(b) == expect and b.cmp(a) == -expect
    assert (a < b) == (expect < 0) and (a > b) == (expect > 0)
    assert (a <= b) == (expect <= 0) and (a >= b) == (expect >= 0)


def test_equality_and_hash_are_numeric() -> None:
    assert Quantity.parse("1000m") == Quantity.parse("1")
    assert hash(Quantity.parse("1000m")) == hash(Quantity.parse("1e0"))
    assert Quantity.parse("1Gi") != Quantity.parse("1G")
    assert Quantity.parse("1Ki") == Quantity.parse("1024")
    assert len({Quantity.parse("1"), Quantity.parse("1000m"), Quantity.parse("1e0")}) == 1
    assert Quantity.parse("1") != 1  # no silent mixing with plain numbers


@pytest.mark.parametrize("text", ["100m", "1Gi"])
def test_add_and_sub_zero_preserve_the_suffix(text: str) -> None:
    zero = Quantity.parse("0")
    value = Quantity.parse(text)
    assert str(value + zero) == text
    assert str(zero + value) == text
    assert str(value - zero) == text
    assert str(zero - value) == str(-value)


def test_add_keeps_the_left_format_and_is_exact() -> None:
    total = Quantity.parse("1Gi") + Quantity.parse("512Mi")
    assert str(total) == "1536Mi" and total.format is BSI
    assert str(Quantity.parse("100m") + Quantity.parse("1Gi")) == "1073741824100m"
    assert Quantity.parse("0.1") + Quantity.parse("0.2") == Quantity.parse("300m")


def test_construction_helpers() -> None:
    assert Quantity.from_int(3) == Quantity.parse("3")
    assert str(Quantity.from_int(2048, BSI)) == "2Ki"
    assert str(Quantity.from_milli(1500)) == "1500m"
    assert Quantity.from_int(0).is_zero()
    assert not Quantity.parse("1n").is_zero()
    assert Quantity.parse("-3").sign() == -1
    assert repr(Quantity.parse("1.5Gi")) == "Quantity('1536Mi')"


def test_immutable_and_picklable() -> None:
    q = Quantity.parse("1.5Gi")
    for name in ("format", "nanos"):  # neither a property nor a new attribute can be set
        with pytest.raises(AttributeError):
            setattr(q, name, 1)
    copy = pickle.loads(pickle.dumps(q))
    assert copy == q and copy.format is q.format


# ---- Hypothesis -----------------------------------------------------------------------------------


@settings(max_examples=200)
@given(quantities)
def test_string_round_trip(q: Quantity) -> None:
    text = str(q)
    back = Quantity.parse(text)
    assert back == q
    # A BinarySI value that is not a multiple of 1024 prints as a plain number, which parses back as
    # DecimalSI (as upstream); from there the canonical text is a fixed point.
    again = str(back)
    assert again == text or q.format is BSI
    assert str(Quantity.parse(again)) == again


@settings(max_examples=150)
@given(quantity_texts())
def test_parse_rounds_up_to_nano(text: str) -> None:
    q = Quantity.parse(text)
    assert isinstance(q.nanos, int)
    # Round-up-to-nano never loses a non-zero request: it only grows in magnitude.
    unsigned = text.lstrip("+-")
    if Quantity.parse(unsigned).nanos == 0:
        assert q.is_zero()
    assert q.value() * NANO >= q.nanos if q.sign() >= 0 else q.value() * NANO <= q.nanos


@settings(max_examples=150)
@given(quantities, quantities)
def test_arithmetic_is_exact_and_ordered(a: Quantity, b: Quantity) -> None:
    assert (a + b).nanos == a.nanos + b.nanos
    assert (a + b) - b == a
    assert (a < b) == (a.nanos < b.nanos)
    assert (a == b) == (hash(a) == hash(b) and a.nanos == b.nanos)


def test_value_and_milli_value_round_every_sign_away_from_zero() -> None:
    # Exact integers of nano-units on either side of each rounding step (the accessors divide once)
    for nanos in (*range(-3_000_000_001, -2_999_999_998), -1, 0, 1, *range(999_999_999, 1_000_000_002),
                  10**30 + 1, -(10**30) - 1):
        q = Quantity(nanos)
        whole, milli = abs(nanos) // NANO, abs(nanos) // 10**6
        up = (whole + (abs(nanos) % NANO > 0), milli + (abs(nanos) % 10**6 > 0))
        sign = -1 if nanos < 0 else 1
        assert (q.value(), q.milli_value()) == (sign * up[0], sign * up[1])
