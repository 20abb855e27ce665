"""Go's text of IP addresses and strings, as the DRA CEL library and its URL reading (gourl.py) need them:
net/netip's ParseAddr with its error texts, and strconv.Quote. Its own module so that library.py (ip(),
cidr(), url()) and gourl.py (bracketed hosts) both import it without importing each other."""

from __future__ import annotations

import ipaddress
from typing import Final


def go_strconv_quote(s: str) -> str:
    """strconv.Quote: Go's escapes (\\a \\b \\f \\n \\r \\t \\v \\\\ \\"), \\xNN below a space and for DEL,
    \\uNNNN/\\UNNNNNNNN for any other character Go does not print; printable characters as they are."""
    out = ['"']
    for ch in s:
        code = ord(ch)
        if ch in '"\\':
            out.append("\\" + ch)
        elif ch in _GO_ESCAPES:
            out.append(_GO_ESCAPES[ch])
        elif code < 0x20 or code == 0x7F:
            out.append(f"\\x{code:02x}")
        elif ch == " " or ch.isprintable():
            out.append(ch)
        elif 0xD800 <= code <= 0xDFFF:
            out.append("\\ufffd")  # a lone surrogate is not UTF-8: Go sees the replacement character
        elif code < 0x10000:
            out.append(f"\\u{code:04x}")
        else:
            out.append(f"\\U{code:08x}")
    out.append('"')
    return "".join(out)


_GO_ESCAPES: Final = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\v": "\\v"}



class NetipError(ValueError):
    """net/netip.ParseAddr's error, worded as Go's parseAddrError."""


def parse_netip_addr(text: str) -> tuple[ipaddress.IPv4Address | ipaddress.IPv6Address, str]:
    """net/netip.ParseAddr: the address and its zone, or NetipError with Go's text (the first '.', ':'
    or '%' decides the family, as in Go)."""
    for ch in text:
        if ch == ".":
            return ipaddress.IPv4Address(bytes(_ipv4_fields(text, text))), ""
        if ch == ":":
            return _parse_ipv6(text)
        if ch == "%":
            raise _addr_error(text, "missing IPv6 address")
    raise _addr_error(text, "unable to parse IP")


def _addr_error(text: str, message: str, at: str = "") -> NetipError:
    where = f" (at {go_strconv_quote(at)})" if at else ""
    return NetipError(f"ParseAddr({go_strconv_quote(text)}): {message}{where}")


def _ipv4_fields(whole: str, s: str) -> list[int]:
    """parseIPv4Fields over s (a part of whole, which the errors name)."""
    fields: list[int] = []
    value = digits = 0
    for i, ch in enumerate(s):
        if "0" <= ch <= "9":
            if digits == 1 and value == 0:
                raise _addr_error(whole, "IPv4 field has octet with leading zero")
            value = value * 10 + ord(ch) - 48
            digits += 1
            if value > 255:
                raise _addr_error(whole, "IPv4 field has value >255")
        elif ch == ".":
            if i == 0 or i == len(s) - 1 or s[i - 1] == ".":
                raise _addr_error(whole, "IPv4 field must have at least one digit", s[i:])
            if len(fields) == 3:
                raise _addr_error(whole, "IPv4 address too long")
            fields.append(value)
            value = digits = 0
        else:
            raise _addr_error(whole, "unexpected character", s[i:])
    if len(fields) < 3:
        raise _addr_error(whole, "IPv4 address too short")
    return [*fields, value]


def _parse_ipv6(whole: str) -> tuple[ipaddress.IPv6Address, str]:
    """parseIPv6: hex groups, one '::', an embedded IPv4 address in the last 32 bits, a zone after '%'."""
    s, zone = whole, ""
    if "%" in s:
        s, _, zone = s.partition("%")
        if not zone:
            raise _addr_error(whole, "zone must be a non-empty string")
    out = bytearray(16)
    ellipsis = -1
    if s.startswith("::"):
        ellipsis = 0
        s = s[2:]
        if not s:
            return ipaddress.IPv6Address(bytes(out)), zone
    i = 0
    while i < 16:
        off = acc = 0
        while off < len(s) and s[off] in "0123456789abcdefABCDEF":
            acc = (acc << 4) + int(s[off], 16)
            if off > 3:
                raise _addr_error(whole, "each group must have 4 or less digits", s)
            if acc > 0xFFFF:
                raise _addr_error(whole, "IPv6 field has value >=2^16", s)
            off += 1
        if off == 0:
            raise _addr_error(whole, "each colon-separated field must have at least one digit", s)
        if off < len(s) and s[off] == ".":
            if ellipsis < 0 and i != 12:
                raise _addr_error(whole, "embedded IPv4 address must replace the final 2 fields of the address", s)
            if i + 4 > 16:
                raise _addr_error(whole, "too many hex fields to fit an embedded IPv4 at the end of the address", s)
            out[i:i + 4] = bytes(_ipv4_fields(whole, s))
            s = ""
            i += 4
            break
        out[i], out[i + 1] = acc >> 8, acc & 0xFF
        i += 2
        s = s[off:]
        if not s:
            break
        if s[0] != ":":
            raise _addr_error(whole, "unexpected character, want colon", s)
        if len(s) == 1:
            raise _addr_error(whole, "colon must be followed by more characters", s)
        s = s[1:]
        if s[0] == ":":
            if ellipsis >= 0:
                raise _addr_error(whole, "multiple :: in address", s)
            ellipsis = i
            s = s[1:]
            if not s:
                break
    if s:
        raise _addr_error(whole, "trailing garbage after address", s)
    if i < 16:
        if ellipsis < 0:
            raise _addr_error(whole, "address string too short")
        n = 16 - i
        out[ellipsis + n:16] = out[ellipsis:i]
        out[ellipsis:ellipsis + n] = bytes(n)
    elif ellipsis >= 0:
        raise _addr_error(whole, "the :: must expand to at least one field of zeros")
    return ipaddress.IPv6Address(bytes(out)), zone
