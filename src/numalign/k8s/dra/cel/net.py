"""The IP and CIDR libraries of k8s.io/apiserver's base environment (from 1.30, so in every DRA release
numalign knows): `cidr()`/`isCIDR()`, a CIDR's `containsIP`, `containsCIDR`, `ip`, `masked`,
`prefixLength`, an IP's `isLinkLocalMulticast`, `isLinkLocalUnicast`, `isGlobalUnicast`, and `string()`
of either. Addresses follow Go's net/netip (a prefix keeps its host bits until `masked()`; a zone is
refused in a prefix; IPv4-mapped IPv6 is refused as the library does), with the libraries' error texts.
library.py has `ip()` itself; this module adds what reads or builds the other values."""

from __future__ import annotations

import ipaddress
import math
from collections.abc import Callable
from typing import Any, Final

from numalign.k8s.dra.cel import library as lib
from numalign.k8s.dra.cel import netip
from numalign.k8s.dra.cel.values import NO_SUCH_OVERLOAD, CelError, Opaque

IP_TYPE: Final = "net.IP"
CIDR_TYPE: Final = "net.CIDR"
_Address = ipaddress.IPv4Address | ipaddress.IPv6Address


def _prefix_error(text: str, message: str) -> CelError:
    # parseCIDR wraps netip's error, and the conversion wraps it again: the phrase shows twice upstream
    phrase = "network address parse error during conversion from string"
    return CelError(f"{phrase}: {phrase}: netip.ParsePrefix({netip.go_strconv_quote(text)}): {message}")


def parse_cidr(text: str) -> tuple[_Address, int]:
    """netip.ParsePrefix, then the library's refusal of IPv4-mapped IPv6."""
    slash = text.rfind("/")
    if slash < 0:
        raise _prefix_error(text, "no '/'")
    addr_text, bits_text = text[:slash], text[slash + 1:]
    try:
        addr, zone = netip.parse_netip_addr(addr_text)
    except netip.NetipError as exc:
        raise _prefix_error(text, str(exc)) from None
    if zone:  # netip parses an IPv6 zone, then refuses it in a prefix
        raise _prefix_error(text, "IPv6 zones cannot be present in a prefix")
    bad_bits = f"bad bits after slash: {netip.go_strconv_quote(bits_text)}"
    if (len(bits_text) > 1 and not "1" <= bits_text[0] <= "9") or not bits_text.isascii() \
            or not bits_text.isdigit() or lib.decimal_value(bits_text) >= 1 << 63:  # strconv.Atoi's range
        raise _prefix_error(text, bad_bits)
    if lib.decimal_value(bits_text) > addr.max_prefixlen:
        raise _prefix_error(text, "prefix length out of range")
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        raise CelError("network address parse error during conversion from string: "
                       f"IPv4-mapped IPv6 address {netip.go_strconv_quote(text)} is not allowed")
    return addr, lib.decimal_value(bits_text)


def cidr(text: Any) -> Opaque:
    if not isinstance(text, str):
        raise CelError(NO_SUCH_OVERLOAD)
    return Opaque(CIDR_TYPE, parse_cidr(text))


def is_cidr(text: Any) -> bool:
    if not isinstance(text, str):
        raise CelError(NO_SUCH_OVERLOAD)
    try:
        parse_cidr(text)
    except CelError:
        return False
    return True


def _is(v: Any, type_name: str) -> bool:
    return isinstance(v, Opaque) and v.type_name == type_name


def _cidr_of(v: Any) -> tuple[_Address, int]:
    if not _is(v, CIDR_TYPE):
        raise CelError(NO_SUCH_OVERLOAD)
    value: tuple[_Address, int] = v.value
    return value


def _addr_of(v: Any) -> _Address:
    if not _is(v, IP_TYPE):
        raise CelError(NO_SUCH_OVERLOAD)
    value: _Address = v.value
    return value


def _network(prefix: tuple[_Address, int]) -> ipaddress.IPv4Network | ipaddress.IPv6Network:
    addr, bits = prefix
    return ipaddress.ip_network((addr, bits), strict=False)


def contains_ip(c: Any, other: Any) -> bool:
    prefix = _cidr_of(c)
    addr = _addr_of(lib.ip(other) if isinstance(other, str) else other)
    return addr.version == prefix[0].version and addr in _network(prefix)


def contains_cidr(c: Any, other: Any) -> bool:
    prefix = _cidr_of(c)
    inner = _cidr_of(cidr(other) if isinstance(other, str) else other)
    # Prefix.Overlaps and the outer prefix no longer than the inner one
    if inner[0].version != prefix[0].version:
        return False
    return prefix[1] <= inner[1] and _network(prefix).overlaps(_network(inner))


def ip_of(v: Any) -> Opaque:
    """`ip(string)` (library.py's) and a CIDR's `ip()`: its address as written, host bits kept."""
    if _is(v, CIDR_TYPE):
        return Opaque(IP_TYPE, v.value[0])
    if not isinstance(v, str):
        raise CelError(NO_SUCH_OVERLOAD)
    return lib.ip(v)


def masked(c: Any) -> Opaque:
    prefix = _cidr_of(c)
    return Opaque(CIDR_TYPE, (_network(prefix).network_address, prefix[1]))


def prefix_length(c: Any) -> int:
    return _cidr_of(c)[1]


def _is_link_local_unicast(a: _Address) -> bool:
    if isinstance(a, ipaddress.IPv4Address):
        return a.packed[:2] == b"\xa9\xfe"
    return (int(a) >> 112) & 0xFFC0 == 0xFE80


def _is_link_local_multicast(a: _Address) -> bool:
    if isinstance(a, ipaddress.IPv4Address):
        return a.packed[:3] == b"\xe0\x00\x00"
    return (int(a) >> 112) & 0xFF0F == 0xFF02


def _is_global_unicast(a: _Address) -> bool:
    # net/netip: private IPv4 and ULA IPv6 addresses still count as global unicast
    if isinstance(a, ipaddress.IPv4Address) and a.packed in (b"\0\0\0\0", b"\xff\xff\xff\xff"):
        return False
    return not (a.is_unspecified or a.is_loopback or a.is_multicast or _is_link_local_unicast(a))


def to_string(v: Any) -> str:
    """string() with the IP and CIDR overloads (netip's canonical text)."""
    if _is(v, IP_TYPE):
        return str(v.value)
    if _is(v, CIDR_TYPE):
        return f"{v.value[0]}/{v.value[1]}"
    return lib.to_string(v)


def size(v: Any) -> int:
    """actualSize of an IP (its address's bytes) or a CIDR (its prefix's bytes, rounded up)."""
    if _is(v, IP_TYPE):
        return 4 if v.value.version == 4 else 16
    if _is(v, CIDR_TYPE):
        return math.ceil(int(v.value[1]) / 8)
    return 1


FUNCTIONS: Final[dict[str, Callable[..., Any]]] = {
    "cidr": cidr, "isCIDR": is_cidr, "containsIP": contains_ip, "containsCIDR": contains_cidr, "ip": ip_of,
    "masked": masked, "prefixLength": prefix_length, "string": to_string,
    "isLinkLocalMulticast": lambda v: _is_link_local_multicast(_addr_of(v)),
    "isLinkLocalUnicast": lambda v: _is_link_local_unicast(_addr_of(v)),
    "isGlobalUnicast": lambda v: _is_global_unicast(_addr_of(v)),
}
