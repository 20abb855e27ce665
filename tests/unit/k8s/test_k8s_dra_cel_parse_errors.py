"""Parse errors inside DRA CEL as the real environment words them (each checked against the 1.33, 1.34
and 1.37 harnesses): net/netip's own faults through ip() and cidr(), Go's regexp refusing \\C where RE2
takes it, the regex library's "Illegal regex" and its constant patterns compiled with the program, and
errors inside comprehensions and calls as cel-go carries them on."""

from __future__ import annotations

import pytest

from numalign.k8s.dra.cel import CELFeatures, CELRuntimeError, compile_selector, device_variables, evaluate
from numalign.k8s.dra.cel.netip import NetipError, parse_netip_addr
from numalign.k8s.dra.types import DeviceAttribute

FEATURES = CELFeatures(minor=37)


def _device() -> dict[str, object]:
    return device_variables("gpu.example.com", {"index": DeviceAttribute("int", (3,))}, {}, None, FEATURES)


def _run(expression: str) -> tuple[object, int] | str:
    compiled = compile_selector(expression, FEATURES)
    assert compiled.error is None, compiled.error
    try:
        return evaluate(compiled, _device())
    except CELRuntimeError as exc:
        return str(exc)


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("", 'ParseAddr(""): unable to parse IP'),
        ("01.2.3.4", 'ParseAddr("01.2.3.4"): IPv4 field has octet with leading zero'),
        ("1.2.3.256", 'ParseAddr("1.2.3.256"): IPv4 field has value >255'),
        ("1..2.3", 'ParseAddr("1..2.3"): IPv4 field must have at least one digit (at ".2.3")'),
        ("1.2.3", 'ParseAddr("1.2.3"): IPv4 address too short'),
        ("1.2.3.4.5", 'ParseAddr("1.2.3.4.5"): IPv4 address too long'),
        ("1.2.3.x", 'ParseAddr("1.2.3.x"): unexpected character (at "x")'),
        ("%eth0", 'ParseAddr("%eth0"): missing IPv6 address'),
        ("fe80::1%", 'ParseAddr("fe80::1%"): zone must be a non-empty string'),
        ("12345::", 'ParseAddr("12345::"): each group must have 4 or less digits (at "12345::")'),
        ("1::2::3", 'ParseAddr("1::2::3"): multiple :: in address (at ":3")'),
        ("1:2", 'ParseAddr("1:2"): address string too short'),
        ("1:2:3:4:5:6:7:8:9", 'ParseAddr("1:2:3:4:5:6:7:8:9"): trailing garbage after address (at "9")'),
        ("1:2:3:4:5:6:7::8", 'ParseAddr("1:2:3:4:5:6:7::8"): the :: must expand to at least one field of zeros'),
        ("1::1.2.3", 'ParseAddr("1::1.2.3"): IPv4 address too short'),
        ("1:2:3:4:5:1.2.3.4", 'ParseAddr("1:2:3:4:5:1.2.3.4"): embedded IPv4 address must replace the final 2 '
                              'fields of the address (at "1.2.3.4")'),
    ],
)
def test_addresses_are_parsed_as_net_netip_does(text: str, error: str) -> None:
    with pytest.raises(NetipError) as caught:
        parse_netip_addr(text)
    assert str(caught.value) == error


def test_valid_addresses_and_zones_parse() -> None:
    assert str(parse_netip_addr("::ffff:1.2.3.4")[0]) == "::ffff:102:304"
    assert parse_netip_addr("fe80::1%eth0")[1] == "eth0"
    assert str(parse_netip_addr("1:2:3:4:5:6:1.2.3.4")[0]) == "1:2:3:4:5:6:102:304"


def test_ip_and_cidr_name_netips_fault() -> None:
    assert _run('ip("10.0.0.0" + string(device.attributes["gpu.example.com"].index)).family() == 4') == (
        'IP Address "10.0.0.03" parse error during conversion from string: ParseAddr("10.0.0.03"): IPv4 field has '
        "octet with leading zero")
    phrase = "network address parse error during conversion from string"
    assert _run('cidr(device.driver + "/8").prefixLength() > 0') == (
        f'{phrase}: {phrase}: netip.ParsePrefix("gpu.example.com/8"): ParseAddr("gpu.example.com"): unexpected '
        'character (at "gpu.example.com")')
    assert _run('cidr("1.2.3.4/" + string(device.attributes["gpu.example.com"].index) + "0000000000000000000")'
                ".prefixLength() > 0") == (
        f'{phrase}: {phrase}: netip.ParsePrefix("1.2.3.4/30000000000000000000"): bad bits after slash: '
        '"30000000000000000000"')


def test_backslash_c_is_refused_as_go_refuses_it() -> None:
    assert _run('"ab".matches(device.driver.substring(0, 0) + "a\\\\C")') == (
        "error parsing regexp: invalid escape sequence: `\\C`")
    error = compile_selector('"ab".matches("\\\\C")', FEATURES).error
    assert error is not None and error.splitlines()[0].endswith("invalid matches argument")
    assert _run('"a\\\\Cb".matches("\\\\Q\\\\C\\\\E")') == (True, 2)  # quoted: a literal \C


def test_the_regex_librarys_errors() -> None:
    assert _run('"ab".find(device.driver.substring(0, 0) + "[") == ""') == (
        "Illegal regex: error parsing regexp: missing closing ]: `[`")
    for new_object in (True, False):
        assert compile_selector('"ab".find("[") == ""', FEATURES, new_object=new_object).error == (
            "program instantiation failed: error parsing regexp: missing closing ]: `[`")


def test_a_failed_comprehension_step_goes_on_charged() -> None:
    assert _run("[1, 1].transformMapEntry(k, v, {v: k}).size() == 1 || true") == (True, 71)
    assert _run("[1, 1, 1].transformMapEntry(k, v, {v: k}).size() == 1 || true") == (True, 105)


def test_bind_computes_its_value_only_when_read() -> None:
    assert _run('cel.bind(z, "a" + "b", true)') == (True, 0)
    assert _run("cel.bind(z, 1 / 0, [1, 2].map(x, z)).size() == 2 || true") == (True, 30)


def test_a_call_of_three_arguments_stops_at_the_first_that_fails() -> None:
    # the third argument is never evaluated, the call not charged
    assert _run('"abc".substring(1 / 0, 2) == "" || true') == (True, 1)
