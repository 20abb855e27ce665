"""kubernetes.URL values as cel-go makes and compares them (review-3 L7): url.ParseRequestURI's refusals,
url.Parse's URL, and equality by the URL's String() form (numalign compared urllib's split of the input
text). The forms here are those the real cel-go's equalities showed (conformance dra-cel, named url-* cases)."""

from __future__ import annotations

import pytest

from numalign.k8s.dra.cel import CELFeatures, CELRuntimeError, compile_selector, device_matches, device_variables
from numalign.k8s.dra.cel.gourl import URLError, parse


@pytest.mark.parametrize(
    ("text", "form"),
    [
        ("http://a/b c", b"http://a/b%20c"),  # a path is decoded, then escaped again
        ("http://a/b%20c", b"http://a/b%20c"),
        ("http://a/\u00e9", b"http://a/%C3%A9"),
        ("/p q", b"/p%20q"),
        ("HTTP://a/", b"http://a/"),  # the scheme is lower-cased
        ("http://user:pa%73s@a/", b"http://user:pass@a/"),  # userinfo decoded, escaped again
        ("http://a/b?", b"http://a/b?"),  # a lone ? is kept (ForceQuery)
        ("http://a/b", b"http://a/b"),
        ("http:/path", b"http:/path"),  # no authority (OmitHost) ...
        ("http:///path", b"http:///path"),  # ... is not an empty one
        ("http://a/b#c", b"http://a/b#c"),  # url.Parse splits the fragment off
        ("http://a/b%23c", b"http://a/b%23c"),
        ("http://a/%7e", b"http://a/%7e"),  # a valid escaping as written is kept (RawPath)
        ("http://a%C3%A9/", b"http://a%C3%A9/"),  # a host decodes to "aé", escaped again in String()
        ("mailto:x@y", b"mailto:x@y"),  # scheme:opaque
        ("*", b"*"),
    ],
)
def test_the_form_urls_are_compared_by_is_gos_string(text: str, form: bytes) -> None:
    assert parse(text).form == form


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("", "empty url"),
        ("a b", "invalid URI for request"),
        (":x", "missing protocol scheme"),
        ("http://a/\x01", "net/url: invalid control character in URL"),
        ("http://a/%", 'invalid URL escape "%"'),
        ("http://a/%4", 'invalid URL escape "%4"'),
        ("http://a%41/", 'invalid URL escape "%41"'),  # a host escapes non-ASCII bytes only
        ("http://a b/", 'invalid character " " in host name'),
        ("http://a:1:2/", 'invalid port ":1:2" after host'),  # an http(s) host: the port after the first colon
        ("http://\u00fc@a/", "net/url: invalid userinfo"),
        ("http://[::1/", "missing ']' in host"),
        ("http://x[::1]/", "invalid IP-literal"),
        ("http://[1.2.3.4]/", "invalid IP-literal"),
        # a bracketed host is netip.ParseAddr's, with its words, its zone included
        ("http://[fe80::1%25]/", 'invalid host: ParseAddr("fe80::1%"): zone must be a non-empty string'),
        ("http://[1.2.3.4%25x]/", 'invalid host: ParseAddr("1.2.3.4%x"): unexpected character (at "%x")'),
        ("http://[v1.x]/p", 'invalid host: ParseAddr("v1.x"): unexpected character (at "v1.x")'),
        # a byte that is not UTF-8 is quoted as Go quotes it, in the address and where the parse stopped
        ("http://[%FF]/", 'invalid host: ParseAddr("\\xff"): unable to parse IP'),
        ("http://[1.%FF.3.4]/", 'invalid host: ParseAddr("1.\\xff.3.4"): unexpected character (at "\\xff.3.4")'),
        ("http://[fe80::%80%25x]/", 'invalid host: ParseAddr("fe80::\\x80%x"): each colon-separated field must '
                                    'have at least one digit (at "\\x80")'),
        ("http://[%C3%A9]/", 'invalid host: ParseAddr("\u00e9"): unable to parse IP'),
    ],
)
def test_what_parse_request_uri_refuses(text: str, error: str) -> None:
    with pytest.raises(URLError) as raised:
        parse(text)
    assert str(raised.value) == error


def test_other_schemes_take_the_port_after_the_last_colon() -> None:
    assert parse("foo://a:1:2/").part("getPort") == "2"


@pytest.mark.parametrize(
    ("part", "answer"),
    [("getHost", "a\u00e9:80"), ("getHostname", "a\u00e9"), ("getPort", "80"), ("getEscapedPath", "/p%20q"),
     ("getScheme", "http")],
)
def test_the_getters_read_url_parse(part: str, answer: str) -> None:
    assert parse("http://a%C3%A9:80/p q?x#y").part(part) == answer


def test_the_query_is_read_as_go_parse_query() -> None:
    # pairs holding `;` or a bad escape are dropped; `+` is a space; a key without `=` has an empty value
    assert parse("http://a/?a=%zz&b;c=1&d=+&e&e=2").query() == {"d": [" "], "e": ["", "2"]}


@pytest.mark.parametrize(
    ("expression", "answer"),
    [
        ('url("http://a/b c") == url("http://a/b%20c")', True),
        ('url("http://a/b?") == url("http://a/b")', False),
        ('url("http:/path") == url("http:///path")', False),
        ('url("http://a/b#c") == url("http://a/b%23c")', False),
        ('url("http://user:pa%73s@a/") == url("http://user:pass@a/")', True),
        ('url("http://a/b c") in [url("http://a/b%20c")]', True),
    ],
)
def test_url_values_are_equal_when_their_forms_are(expression: str, answer: bool) -> None:
    features = CELFeatures(consumable_capacity=True, list_type_attributes=True)
    compiled = compile_selector(expression, features)
    assert compiled.error is None
    assert device_matches(compiled, device_variables("gpu.example.com", {}, {}, None, features)) is answer


def test_a_refused_url_is_the_selectors_runtime_error() -> None:
    features = CELFeatures(consumable_capacity=True, list_type_attributes=True)
    compiled = compile_selector('url("http://a/%").getHost() == ""', features)
    with pytest.raises(CELRuntimeError) as raised:
        device_matches(compiled, device_variables("gpu.example.com", {}, {}, None, features))
    assert str(raised.value) == ('URL parse error during conversion from string: parse "http://a/%": '
                                 'invalid URL escape "%"')
