"""Go's net/url as the Kubernetes URL library reads a CEL string: what `url()` refuses, and the text
kubernetes.URL values are compared by.

The library (k8s.io/apiserver/pkg/cel/library/urls.go) checks the string with url.ParseRequestURI (its
error is the CEL error) and keeps url.Parse's URL (which splits off a #fragment ParseRequestURI leaves in
the path or query); two URLs are equal when their String() forms are (apiserver cel.URL.Equal). That form
is not the input: escapes are decoded and made again (`/b c` and `/b%20c` are one path), userinfo and host
escapes are decoded, a lone `?` is kept, `http:/p` (no authority) and `http:///p` (an empty one) differ.
Written from Go 1.26's net/url (the toolchain the conformance harness builds with; `go 1.26` in
conformance/go.mod keeps urlstrictcolons on: an http(s) host takes its port after the first colon).

Go works on bytes, so this does: a path may decode to bytes that are not UTF-8 (`%FF`), and the forms
are compared as bytes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from numalign.k8s.dra.cel.netip import NetipError, go_strconv_quote, parse_netip_addr

# Go's encoding modes (which bytes a part of a URL keeps unescaped).
_PATH, _HOST, _ZONE, _USERINFO, _QUERY, _FRAGMENT = "path", "host", "zone", "userinfo", "query", "fragment"
_HEX = b"0123456789abcdefABCDEF"


class URLError(ValueError):
    """Go's parse error text, for `parse "<input>": <text>`."""


@dataclass(eq=False)
class GoURL:
    """url.URL's fields (user: None, or (username, password or None)), and `form`, its String(): what two
    kubernetes.URL values are compared by (and hashed by)."""

    scheme: bytes = b""
    opaque: bytes = b""
    user: tuple[bytes, bytes | None] | None = None
    host: bytes = b""
    path: bytes = b""
    raw_path: bytes = b""
    omit_host: bool = False
    force_query: bool = False
    raw_query: bytes = b""
    fragment: bytes = b""
    raw_fragment: bytes = b""
    form: bytes = b""

    def __eq__(self, other: object) -> bool:
        return isinstance(other, GoURL) and self.form == other.form

    def __hash__(self) -> int:
        return hash(self.form)

    # The library's getters (CEL strings: bytes that are not UTF-8, from escapes such as %FF, read as U+FFFD).
    def part(self, name: str) -> str:
        if name == "getScheme":
            value = self.scheme
        elif name == "getHost":
            value = self.host
        elif name in ("getHostname", "getPort"):
            # splitHostPort: a valid :port after the last colon, then an IPv6 literal's brackets dropped
            host, port = self.host, b""
            colon = host.rfind(b":")
            if colon >= 0 and _valid_optional_port(host[colon:]):
                host, port = host[:colon], host[colon + 1:]
            if host.startswith(b"[") and host.endswith(b"]"):
                host = host[1:-1]
            value = host if name == "getHostname" else port
        else:
            value = _escaped_path(self)
        return value.decode("utf-8", "replace")

    def query(self) -> dict[str, list[str]]:
        """URL.Query() (url.ParseQuery, its error dropped): `&`-separated, a pair holding `;` or an invalid
        escape skipped, `+` a space; nothing past 10,000 parameters (Go's default urlmaxqueryparams)."""
        out: dict[str, list[str]] = {}
        if self.raw_query.count(b"&") + 1 > 10_000:
            return out
        for pair in self.raw_query.split(b"&"):
            if not pair or b";" in pair:
                continue
            key, _, value = pair.partition(b"=")
            try:
                k, v = _unescape(key, _QUERY), _unescape(value, _QUERY)
            except URLError:
                continue
            out.setdefault(k.decode("utf-8", "replace"), []).append(v.decode("utf-8", "replace"))
        return out


def parse(text: str) -> GoURL:
    """What `url(text)` makes: url.ParseRequestURI's check (URLError with its text), then url.Parse's URL."""
    raw = text.encode("utf-8", "surrogatepass")
    _parse(raw, via_request=True)
    before, sep, fragment = raw.partition(b"#")
    u = _parse(before, via_request=False)
    if sep:
        u.fragment = _unescape(fragment, _FRAGMENT)
        u.raw_fragment = b"" if _escape(u.fragment, _FRAGMENT) == fragment else fragment
    u.form = _string(u)
    return u


def _should_escape(c: int, mode: str) -> bool:
    """net/url shouldEscape: must byte c be %-escaped in this part of a URL."""
    if 0x30 <= c <= 0x39 or 0x41 <= c <= 0x5A or 0x61 <= c <= 0x7A:
        return False
    ch = chr(c)
    if mode in (_HOST, _ZONE) and ch in "!$&'()*+,;=:[]<>\"":
        return False  # sub-delims, the port's colon, an IPv6 literal's brackets
    if ch in "-_.~":
        return False
    if ch in "$&+,/:;=?@":
        if mode == _PATH:
            return ch == "?"
        if mode == _USERINFO:
            return ch in "@/?:"
        return mode != _FRAGMENT  # (a host escapes the / ? @ it does not take)
    return not (mode == _FRAGMENT and ch in "!()*")  # everything else is escaped


def _escape(s: bytes, mode: str) -> bytes:
    out = bytearray()
    for c in s:
        if _should_escape(c, mode):
            out += b"%%%02X" % c
        else:
            out.append(c)
    return bytes(out)


def _unescape(s: bytes, mode: str) -> bytes:
    """net/url unescape."""
    i = 0
    while i < len(s):
        c = s[i]
        if c == 0x25:  # %
            if i + 2 >= len(s) or s[i + 1] not in _HEX or s[i + 2] not in _HEX:
                raise URLError(f"invalid URL escape {_quote(s[i:i + 3])}")
            # In a host, %-escapes are for non-ASCII bytes only (and %25 before an IPv6 zone).
            if mode == _HOST and int(s[i + 1:i + 2], 16) < 8 and s[i:i + 3] != b"%25":
                raise URLError(f"invalid URL escape {_quote(s[i:i + 3])}")
            if mode == _ZONE:
                v = int(s[i + 1:i + 3], 16)
                if s[i:i + 3] != b"%25" and v != 0x20 and _should_escape(v, _HOST):
                    raise URLError(f"invalid URL escape {_quote(s[i:i + 3])}")
            i += 3
        else:
            if mode in (_HOST, _ZONE) and c < 0x80 and _should_escape(c, mode):
                raise URLError(f"invalid character {_quote(s[i:i + 1])} in host name")
            i += 1
    if b"%" not in s and (mode != _QUERY or b"+" not in s):
        return s
    out = bytearray()
    i = 0
    while i < len(s):
        if s[i] == 0x25:
            out.append(int(s[i + 1:i + 3], 16))
            i += 3
        else:
            out.append(0x20 if s[i] == 0x2B and mode == _QUERY else s[i])  # a query component's + is a space
            i += 1
    return bytes(out)


def _parse(raw: bytes, via_request: bool) -> GoURL:
    """net/url parse (ParseRequestURI with via_request, else Parse without its fragment)."""
    if any(c < 0x20 or c == 0x7F for c in raw):
        raise URLError("net/url: invalid control character in URL")
    if not raw and via_request:
        raise URLError("empty url")
    u = GoURL()
    if raw == b"*":
        u.path = b"*"
        return u
    rest = raw
    for i, c in enumerate(raw):  # getScheme: [a-zA-Z][a-zA-Z0-9+.-]* before a colon
        if 0x41 <= c <= 0x5A or 0x61 <= c <= 0x7A:
            continue
        if 0x30 <= c <= 0x39 or c in b"+-.":
            if i == 0:
                break
            continue
        if c == 0x3A:
            if i == 0:
                raise URLError("missing protocol scheme")
            u.scheme, rest = raw[:i].lower(), raw[i + 1:]
        break
    if rest.endswith(b"?") and rest.count(b"?") == 1:
        u.force_query, rest = True, rest[:-1]
    else:
        rest, _, u.raw_query = rest.partition(b"?")
    if not rest.startswith(b"/"):
        if u.scheme:
            u.opaque = rest  # a rootless path: scheme:opaque
            return u
        if via_request:
            raise URLError("invalid URI for request")
        segment = rest.partition(b"/")[0]
        if b":" in segment:
            raise URLError("first path segment in URL cannot contain colon")
    if (u.scheme or (not via_request and not rest.startswith(b"///"))) and rest.startswith(b"//"):
        authority, slash, path = rest[2:].partition(b"/")
        rest = slash + path
        u.user, u.host = _authority(u.scheme, authority)
    elif u.scheme and rest.startswith(b"/"):
        u.omit_host = True
    u.path = _unescape(rest, _PATH)
    u.raw_path = b"" if _escape(u.path, _PATH) == rest else rest
    return u


def _authority(scheme: bytes, authority: bytes) -> tuple[tuple[bytes, bytes | None] | None, bytes]:
    at = authority.rfind(b"@")
    host = _host(scheme, authority[at + 1:] if at >= 0 else authority)
    if at < 0:
        return None, host
    userinfo = authority[:at]
    if not all(0x30 <= c <= 0x39 or 0x41 <= c <= 0x5A or 0x61 <= c <= 0x7A or c in b"-._:~!$&'()*+,;=%@"
               for c in userinfo):  # (validUserinfo: ASCII only)
        raise URLError("net/url: invalid userinfo")
    if b":" not in userinfo:
        return (_unescape(userinfo, _USERINFO), None), host
    name, _, password = userinfo.partition(b":")
    return (_unescape(name, _USERINFO), _unescape(password, _USERINFO)), host


def _host(scheme: bytes, host: bytes) -> bytes:
    """net/url parseHost: host[:port], an IPv6 literal in brackets (its zone after %25)."""
    bracket = host.rfind(b"[")
    if bracket > 0:
        raise URLError("invalid IP-literal")
    if bracket == 0:
        close = host.rfind(b"]")
        if close < 0:
            raise URLError("missing ']' in host")
        colon_port = host[close + 1:]
        if not _valid_optional_port(colon_port):
            raise URLError(f"invalid port {_quote(colon_port)} after host")
        port = _unescape(colon_port, _HOST)
        name = host[1:close]
        zone = name.find(b"%25")
        literal = (_unescape(name[:zone], _HOST) + _unescape(name[zone:], _ZONE)) if zone >= 0 \
            else _unescape(name, _HOST)
        _ipv6_literal(literal)
        return b"[" + literal + b"]" + port
    first = host.find(b":")
    if first >= 0:
        # urlstrictcolons (Go 1.26): an http(s) host's port starts at its first colon, another's at its last.
        at = first if scheme in (b"http", b"https") else host.rfind(b":")
        if not _valid_optional_port(host[at:]):
            raise URLError(f"invalid port {_quote(host[at:])} after host")
    return _unescape(host, _HOST)


def _ipv6_literal(literal: bytes) -> None:
    """What a bracketed host must be: an address netip.ParseAddr takes (its zone included), not IPv4."""
    text = literal.decode("utf-8", "surrogateescape")  # a byte that is not UTF-8 (%FF) as U+DC80-U+DCFF
    try:
        addr, _ = parse_netip_addr(text)
    except NetipError as e:
        raise URLError(f"invalid host: {_bytes_requoted(text, str(e), go_strconv_quote)}") from None
    if addr.version == 4:
        raise URLError("invalid IP-literal")


def _bytes_requoted(text: str, message: str, quote: Callable[[str], str]) -> str:
    """netip's message about `text` with its quoted parts (the address, and the suffix after "at") as Go
    quotes bytes: one that is not UTF-8 as \\xNN, where `quote` knows characters only."""
    if not any(0xDC80 <= ord(c) <= 0xDCFF for c in text):
        return message

    def go(part: str) -> str:
        return '"' + "".join(f"\\x{ord(c) - 0xDC00:02x}" if 0xDC80 <= ord(c) <= 0xDCFF else quote(c)[1:-1]
                             for c in part) + '"'

    message = message.replace(quote(text), go(text), 1)
    head, sep, tail = message.rpartition(" (at ")
    if sep and tail.endswith(")"):
        # where the parse stopped: a suffix of the address, or of the address without its zone (IPv6)
        for base in (text, text.partition("%")[0]):
            inner, size, k = tail[1:-2], 0, len(base)
            while k > 0 and size < len(inner):
                k -= 1
                size += len(quote(base[k])) - 2
            if quote(base[k:]) == tail[:-1]:
                return f"{head}{sep}{go(base[k:])})"
    return message


def _valid_optional_port(colon_port: bytes) -> bool:
    return not colon_port or (colon_port[:1] == b":" and all(0x30 <= c <= 0x39 for c in colon_port[1:]))


def _valid_encoded(s: bytes, mode: str) -> bool:
    return all(c in b"!$&'()*+,;=:@[]%" or not _should_escape(c, mode) for c in s)


def _escaped(decoded: bytes, raw: bytes, mode: str) -> bytes:
    """EscapedPath / EscapedFragment: the raw form where it spells the decoded one, else escaped afresh (a
    path of `*` stays as it is)."""
    if raw and _valid_encoded(raw, mode):
        try:
            if _unescape(raw, mode) == decoded:
                return raw
        except URLError:
            pass
    if mode == _PATH and decoded == b"*":
        return b"*"
    return _escape(decoded, mode)


def _escaped_path(u: GoURL) -> bytes:
    return _escaped(u.path, u.raw_path, _PATH)


def _string(u: GoURL) -> bytes:
    """url.URL String()."""
    out = bytearray()
    if u.scheme:
        out += u.scheme + b":"
    if u.opaque:
        out += u.opaque
    else:
        if (u.scheme or u.host or u.user is not None) and not (u.omit_host and not u.host and u.user is None):
            if u.host or u.path or u.user is not None:
                out += b"//"
            if u.user is not None:
                name, password = u.user
                out += _escape(name, _USERINFO)
                if password is not None:
                    out += b":" + _escape(password, _USERINFO)
                out += b"@"
            out += _escape(u.host, _HOST)
        path = _escaped_path(u)
        if path and path[:1] != b"/" and u.host:
            out += b"/"
        if not out and b":" in path.partition(b"/")[0]:
            out += b"./"
        out += path
    if u.force_query or u.raw_query:
        out += b"?" + u.raw_query
    if u.fragment:
        out += b"#" + _escaped(u.fragment, u.raw_fragment, _FRAGMENT)
    return bytes(out)


def _quote(s: bytes) -> str:
    """strconv.Quote of bytes: printable ASCII and valid UTF-8 as they are, other bytes as \\xNN."""
    out = ['"']
    for ch in s.decode("utf-8", "surrogateescape"):
        o = ord(ch)
        if 0xDC80 <= o <= 0xDCFF:
            out.append(f"\\x{o - 0xDC00:02x}")
        elif ch in '"\\':
            out.append("\\" + ch)
        elif o < 0x20 or o == 0x7F:
            out.append({"\n": "\\n", "\t": "\\t", "\r": "\\r"}.get(ch, f"\\x{o:02x}"))
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)
