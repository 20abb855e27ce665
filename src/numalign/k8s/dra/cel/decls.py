"""The declarations of the DRA CEL environment: the `device` variable (kubernetes.DRADevice), the
standard functions, and the libraries k8s.io/apiserver's base environment and the DRA environment add
(strings, lists, regex, URLs, IPs, CIDRs, quantity, semver, sets, optional types, cel.bind, `includes`).
Each overload has cel-go's id (the cost model keys on some of them) and its parameter and result types.
Gated options (allowMultipleAllocations with DRAConsumableCapacity from 1.34, `includes` with
DRAListTypeAttributes from 1.36) are offered to a new object only with their gate on; a stored object,
and so the scheduler, sees every option of the release (k8s.io/apiserver's StoredExpressions)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from numalign.k8s.dra.cel import types as t

A, B, K, V = t.param("A"), t.param("B"), t.param("K"), t.param("V")
MAX_ATTRIBUTES: Final = 32  # ResourceSliceMaxAttributesAndCapacitiesPerDevice


@dataclass(frozen=True)
class Overload:
    id: str
    member: bool
    args: tuple[t.Type, ...]
    result: t.Type

    @property
    def params(self) -> frozenset[str]:
        names: set[str] = set()

        def walk(x: t.Type) -> None:
            if x.kind == "param":
                names.add(x.name)
            for p in x.params:
                walk(p)
        for a in (*self.args, self.result):
            walk(a)
        return frozenset(names)


def _g(id_: str, args: tuple[t.Type, ...], result: t.Type) -> Overload:
    return Overload(id_, False, args, result)


def _m(id_: str, args: tuple[t.Type, ...], result: t.Type) -> Overload:
    return Overload(id_, True, args, result)


_B, _I, _U, _D, _S, _Y = t.BOOL, t.INT, t.UINT, t.DOUBLE, t.STRING, t.BYTES
_TS, _DUR, _Q, _SV = t.TIMESTAMP, t.DURATION, t.QUANTITY, t.SEMVER
_NUM = (("int64", _I), ("uint64", _U), ("double", _D))


def _relations() -> dict[str, list[Overload]]:
    out: dict[str, list[Overload]] = {}
    for op, word in (("_<_", "less"), ("_<=_", "less_equals"), ("_>_", "greater"), ("_>=_", "greater_equals")):
        ovs = [_g(f"{word}_{n}", (x, x), _B) for n, x in
               (("bool", _B), ("int64", _I), ("uint64", _U), ("double", _D), ("string", _S), ("bytes", _Y),
                ("timestamp", _TS), ("duration", _DUR))]
        for n1, x1 in _NUM:
            for n2, x2 in _NUM:
                if n1 != n2:
                    ovs.append(_g(f"{word}_{n1}_{n2}", (x1, x2), _B))
        out[op] = ovs
    return out


def _arith() -> dict[str, list[Overload]]:
    return {
        "_+_": [_g("add_int64", (_I, _I), _I), _g("add_uint64", (_U, _U), _U), _g("add_double", (_D, _D), _D),
                _g("add_string", (_S, _S), _S), _g("add_bytes", (_Y, _Y), _Y),
                _g("add_list", (t.list_of(A), t.list_of(A)), t.list_of(A)),
                _g("add_timestamp_duration", (_TS, _DUR), _TS), _g("add_duration_timestamp", (_DUR, _TS), _TS),
                _g("add_duration_duration", (_DUR, _DUR), _DUR)],
        "_-_": [_g("subtract_int64", (_I, _I), _I), _g("subtract_uint64", (_U, _U), _U),
                _g("subtract_double", (_D, _D), _D), _g("subtract_timestamp_timestamp", (_TS, _TS), _DUR),
                _g("subtract_timestamp_duration", (_TS, _DUR), _TS),
                _g("subtract_duration_duration", (_DUR, _DUR), _DUR)],
        "_*_": [_g("multiply_int64", (_I, _I), _I), _g("multiply_uint64", (_U, _U), _U),
                _g("multiply_double", (_D, _D), _D)],
        "_/_": [_g("divide_int64", (_I, _I), _I), _g("divide_uint64", (_U, _U), _U),
                _g("divide_double", (_D, _D), _D)],
        "_%_": [_g("modulo_int64", (_I, _I), _I), _g("modulo_uint64", (_U, _U), _U)],
        "-_": [_g("negate_int64", (_I,), _I), _g("negate_double", (_D,), _D)],
    }


def _conversions() -> dict[str, list[Overload]]:
    return {
        "int": [_g("int64_to_int64", (_I,), _I), _g("uint64_to_int64", (_U,), _I),
                _g("double_to_int64", (_D,), _I), _g("string_to_int64", (_S,), _I),
                _g("timestamp_to_int64", (_TS,), _I), _g("duration_to_int64", (_DUR,), _I)],
        "uint": [_g("uint64_to_uint64", (_U,), _U), _g("int64_to_uint64", (_I,), _U),
                 _g("double_to_uint64", (_D,), _U), _g("string_to_uint64", (_S,), _U)],
        "double": [_g("double_to_double", (_D,), _D), _g("int64_to_double", (_I,), _D),
                   _g("uint64_to_double", (_U,), _D), _g("string_to_double", (_S,), _D)],
        "string": [_g("string_to_string", (_S,), _S), _g("int64_to_string", (_I,), _S),
                   _g("uint64_to_string", (_U,), _S), _g("double_to_string", (_D,), _S),
                   _g("bool_to_string", (_B,), _S), _g("bytes_to_string", (_Y,), _S),
                   _g("timestamp_to_string", (_TS,), _S), _g("duration_to_string", (_DUR,), _S)],
        "bytes": [_g("bytes_to_bytes", (_Y,), _Y), _g("string_to_bytes", (_S,), _Y)],
        "bool": [_g("bool_to_bool", (_B,), _B), _g("string_to_bool", (_S,), _B)],
        "dyn": [_g("to_dyn", (A,), t.DYN)],
        "type": [_g("type", (A,), t.type_of(A))],
        "duration": [_g("duration_to_duration", (_DUR,), _DUR), _g("string_to_duration", (_S,), _DUR)],
        "timestamp": [_g("timestamp_to_timestamp", (_TS,), _TS), _g("string_to_timestamp", (_S,), _TS),
                      _g("int64_to_timestamp", (_I,), _TS)],
    }


def _standard() -> dict[str, list[Overload]]:
    out: dict[str, list[Overload]] = {
        "!_": [_g("logical_not", (_B,), _B)],
        "@not_strictly_false": [_g("not_strictly_false", (_B,), _B)],
        "_&&_": [_g("logical_and", (_B, _B), _B)],
        "_||_": [_g("logical_or", (_B, _B), _B)],
        "_?_:_": [_g("conditional", (_B, A, A), A)],
        "_==_": [_g("equals", (A, A), _B)],
        "_!=_": [_g("not_equals", (A, A), _B)],
        "_[_]": [_g("index_list", (t.list_of(A), _I), A), _g("index_map", (t.map_of(K, V), K), V)],
        "@in": [_g("in_list", (A, t.list_of(A)), _B), _g("in_map", (A, t.map_of(A, B)), _B)],
        "size": [_g("size_string", (_S,), _I), _g("size_bytes", (_Y,), _I), _g("size_list", (t.list_of(A),), _I),
                 _g("size_map", (t.map_of(K, V),), _I), _m("string_size", (_S,), _I), _m("bytes_size", (_Y,), _I),
                 _m("list_size", (t.list_of(A),), _I), _m("map_size", (t.map_of(K, V),), _I)],
        "contains": [_m("contains_string", (_S, _S), _B)],
        "startsWith": [_m("starts_with_string", (_S, _S), _B)],
        "endsWith": [_m("ends_with_string", (_S, _S), _B)],
        "matches": [_g("matches", (_S, _S), _B), _m("matches_string", (_S, _S), _B)],
    }
    for name, unit in (("getFullYear", "year"), ("getMonth", "month"), ("getDayOfYear", "day_of_year"),
                       ("getDayOfMonth", "day_of_month"), ("getDate", "date"), ("getDayOfWeek", "day_of_week"),
                       ("getHours", "hours"), ("getMinutes", "minutes"), ("getSeconds", "seconds"),
                       ("getMilliseconds", "milliseconds")):
        ovs = [_m(f"timestamp_to_{unit}", (_TS,), _I), _m(f"timestamp_to_{unit}_with_tz", (_TS, _S), _I)]
        if name in ("getHours", "getMinutes", "getSeconds", "getMilliseconds"):
            ovs.append(_m(f"duration_to_{unit}", (_DUR,), _I))
        out[name] = ovs
    out.update(_relations())
    out.update(_arith())
    out.update(_conversions())
    return out


def _kubernetes(minor: int, stored: bool, list_type_attributes: bool) -> dict[str, list[Overload]]:
    """The libraries. A new object sees a base-environment library from the release after the one that
    introduced it (the API server's compatibility version is the previous minor)."""
    level = minor if stored else minor - 1
    ls = t.list_of(_S)
    out: dict[str, list[Overload]] = {
        # cel-go ext.Strings (version 2 in the base environment)
        "charAt": [_m("string_char_at_int", (_S, _I), _S)],
        "indexOf": [_m("string_index_of_string", (_S, _S), _I), _m("string_index_of_string_int", (_S, _S, _I), _I),
                    _m("list_a_index_of_int", (t.list_of(A), A), _I)],
        "lastIndexOf": [_m("string_last_index_of_string", (_S, _S), _I),
                        _m("string_last_index_of_string_int", (_S, _S, _I), _I),
                        _m("list_a_last_index_of_int", (t.list_of(A), A), _I)],
        "lowerAscii": [_m("string_lower_ascii", (_S,), _S)],
        "upperAscii": [_m("string_upper_ascii", (_S,), _S)],
        "replace": [_m("string_replace_string_string", (_S, _S, _S), _S),
                    _m("string_replace_string_string_int", (_S, _S, _S, _I), _S)],
        "split": [_m("string_split_string", (_S, _S), ls), _m("string_split_string_int", (_S, _S, _I), ls)],
        "substring": [_m("string_substring_int", (_S, _I), _S), _m("string_substring_int_int", (_S, _I, _I), _S)],
        "trim": [_m("string_trim", (_S,), _S)],
        "join": [_m("list_join", (ls,), _S), _m("list_join_string", (ls, _S), _S)],
        "format": [_m("string_format", (_S, t.list_of(t.DYN)), _S)],
        "strings.quote": [_g("strings_quote", (_S,), _S)],
        # k8s lists library
        "isSorted": [_m(f"list_{n}_is_sorted_bool", (t.list_of(x),), _B) for n, x in
                     (("int", _I), ("uint", _U), ("double", _D), ("bool", _B), ("string", _S), ("bytes", _Y),
                      ("duration", _DUR), ("timestamp", _TS))],
        "sum": [_m(f"list_{n}_sum_{n}", (t.list_of(x),), x) for n, x in
                (("int", _I), ("uint", _U), ("double", _D), ("duration", _DUR))],
        "min": [_m(f"list_{n}_min_{n}", (t.list_of(x),), x) for n, x in
                (("int", _I), ("uint", _U), ("double", _D), ("bool", _B), ("string", _S), ("bytes", _Y),
                 ("duration", _DUR), ("timestamp", _TS))],
        "max": [_m(f"list_{n}_max_{n}", (t.list_of(x),), x) for n, x in
                (("int", _I), ("uint", _U), ("double", _D), ("bool", _B), ("string", _S), ("bytes", _Y),
                 ("duration", _DUR), ("timestamp", _TS))],
        # k8s regex library
        "find": [_m("string_find_string", (_S, _S), _S)],
        "findAll": [_m("string_find_all_string", (_S, _S), ls), _m("string_find_all_string_int", (_S, _S, _I), ls)],
        # k8s URL library
        "url": [_g("string_to_url", (_S,), t.URL)],
        "isURL": [_g("is_url_string", (_S,), _B)],
        "getScheme": [_m("url_get_scheme", (t.URL,), _S)],
        "getHost": [_m("url_get_host", (t.URL,), _S)],
        "getHostname": [_m("url_get_hostname", (t.URL,), _S)],
        "getPort": [_m("url_get_port", (t.URL,), _S)],
        "getEscapedPath": [_m("url_get_escaped_path", (t.URL,), _S)],
        "getQuery": [_m("url_get_query", (t.URL,), t.map_of(_S, ls))],
        # k8s IP library
        "ip": [_g("string_to_ip", (_S,), t.IP), _m("cidr_ip", (t.CIDR,), t.IP)],
        "isIP": [_g("is_ip", (_S,), _B)],
        "family": [_m("ip_family", (t.IP,), _I)],
        "isLoopback": [_m("ip_is_loopback", (t.IP,), _B)],
        "isUnspecified": [_m("ip_is_unspecified", (t.IP,), _B)],
        "ip.isCanonical": [_g("ip_is_canonical", (_S,), _B)],
        "isLinkLocalMulticast": [_m("ip_is_link_local_multicast", (t.IP,), _B)],
        "isLinkLocalUnicast": [_m("ip_is_link_local_unicast", (t.IP,), _B)],
        "isGlobalUnicast": [_m("ip_is_global_unicast", (t.IP,), _B)],
        "string": [_g("ip_to_string", (t.IP,), _S), _g("cidr_to_string", (t.CIDR,), _S)],
        # k8s CIDR library (base environment 1.30)
        "cidr": [_g("string_to_cidr", (_S,), t.CIDR)],
        "isCIDR": [_g("is_cidr", (_S,), _B)],
        "containsIP": [_m("cidr_contains_ip_string", (t.CIDR, _S), _B), _m("cidr_contains_ip_ip", (t.CIDR, t.IP), _B)],
        "containsCIDR": [_m("cidr_contains_cidr_string", (t.CIDR, _S), _B),
                         _m("cidr_contains_cidr", (t.CIDR, t.CIDR), _B)],
        "prefixLength": [_m("cidr_prefix_length", (t.CIDR,), _I)],
        "masked": [_m("cidr_masked", (t.CIDR,), t.CIDR)],
        # k8s quantity library (`sign` is declared, but not as a method of a quantity)
        "quantity": [_g("string_to_quantity", (_S,), _Q)],
        "isQuantity": [_g("is_quantity_string", (_S,), _B)],
        "sign": [_g("quantity_sign", (_Q,), _I)],
        "isInteger": [_m("quantity_is_integer", (_Q,), _B)],
        "asInteger": [_m("quantity_get_integer", (_Q,), _I)],
        "asApproximateFloat": [_m("quantity_get_float", (_Q,), _D)],
        "add": [_m("quantity_add", (_Q, _Q), _Q), _m("quantity_add_int", (_Q, _I), _Q)],
        "sub": [_m("quantity_sub", (_Q, _Q), _Q), _m("quantity_sub_int", (_Q, _I), _Q)],
        "isGreaterThan": [_m("quantity_is_greater_than", (_Q, _Q), _B),
                          _m("semver_is_greater_than", (_SV, _SV), _B)],
        "isLessThan": [_m("quantity_is_less_than", (_Q, _Q), _B), _m("semver_is_less_than", (_SV, _SV), _B)],
        "compareTo": [_m("quantity_compare_to", (_Q, _Q), _I), _m("semver_compare_to", (_SV, _SV), _I)],
        # k8s semver library
        # (the normalize argument: semver library version 1, in the base environment from 1.33)
        "semver": [_g("string_to_semver", (_S,), _SV)] + ([_g("string_bool_to_semver", (_S, _B), _SV)]
                                                           if level >= 33 else []),
        "isSemver": [_g("is_semver_string", (_S,), _B)] + ([_g("is_semver_string_bool", (_S, _B), _B)]
                                                           if level >= 33 else []),
        "major": [_m("semver_major", (_SV,), _I)],
        "minor": [_m("semver_minor", (_SV,), _I)],
        "patch": [_m("semver_patch", (_SV,), _I)],
        # cel-go ext.Sets
        "sets.contains": [_g("list_sets_contains_list", (t.list_of(A), t.list_of(A)), _B)],
        "sets.equivalent": [_g("list_sets_equivalent_list", (t.list_of(A), t.list_of(A)), _B)],
        "sets.intersects": [_g("list_sets_intersects_list", (t.list_of(A), t.list_of(A)), _B)],
        # optional types
        "optional.of": [_g("optional_of", (A,), t.optional_of(A))],
        "optional.ofNonZeroValue": [_g("optional_ofNonZeroValue", (A,), t.optional_of(A))],
        "optional.none": [_g("optional_none", (), t.optional_of(t.DYN))],
        "hasValue": [_m("optional_hasValue", (t.optional_of(A),), _B)],
        "value": [_m("optional_value", (t.optional_of(A),), A)],
        "orValue": [_m("optional_orValue_value", (t.optional_of(A), A), A)],
        "or": [_m("optional_or_optional", (t.optional_of(A), t.optional_of(A)), t.optional_of(A))],
        "_[?_]": [_g("list_optindex_optional_int", (t.list_of(A), _I), t.optional_of(A)),
                  _g("map_optindex_optional_value", (t.map_of(K, V), K), t.optional_of(V)),
                  _g("optional_list_optindex_optional_int", (t.optional_of(t.list_of(A)), _I), t.optional_of(A)),
                  _g("optional_map_optindex_optional_value", (t.optional_of(t.map_of(K, V)), K),
                     t.optional_of(V))],
    }
    out["_[_]"] = [_g("optional_list_index_int", (t.optional_of(t.list_of(A)), _I), t.optional_of(A)),
                   _g("optional_map_index_value", (t.optional_of(t.map_of(K, V)), K), t.optional_of(V))]
    # cel-go ext.TwoVarComprehensions (base environment 1.32): the insertion of transformMap(Entry)
    out["cel.@mapInsert"] = [_g("@mapInsert_map_key_value", (t.map_of(K, V), K, V), t.map_of(K, V)),
                             _g("@mapInsert_map_map", (t.map_of(K, V), t.map_of(K, V)), t.map_of(K, V))]
    # the optional library (not pinned to a version): a list's first and last element
    out["first"] = [_m("list_first", (t.list_of(A),), t.optional_of(A))]
    out["last"] = [_m("list_last", (t.list_of(A),), t.optional_of(A))]
    if level >= 34:  # cel-go ext.Lists v3: `reverse` is declared for lists only
        out["reverse"] = [_m("list_reverse", (t.list_of(A),), t.list_of(A))]
        out["slice"] = [_m("list_slice", (t.list_of(A), _I, _I), t.list_of(A))]
        out["flatten"] = [_m("list_flatten", (t.list_of(t.list_of(A)),), t.list_of(A)),
                          _m("list_flatten_int", (t.list_of(t.DYN), _I), t.list_of(t.DYN))]
        out["sort"] = [_m(f"list_{x.name or x.kind}_sort", (t.list_of(x),), t.list_of(x))
                       for x in (_I, _U, _D, _B, _DUR, _TS, _S, _Y)]
        out["distinct"] = [_m("list_distinct", (t.list_of(A),), t.list_of(A))]
        # sortBy's expansion sorts its list by the keys it computed (macros.py)
        out[SORT_BY_KEYS] = [_m(f"list_{x.name or x.kind}_sortByAssociatedKeys", (t.list_of(A), t.list_of(x)),
                                t.list_of(A)) for x in (_I, _U, _D, _B, _DUR, _TS, _S, _Y)]
        out["lists.range"] = [_g("lists_range", (_I,), t.list_of(_I))]
    # DRA 1.36: `includes`, for list-type attributes (and a scalar, which is its one value). It is
    # feature-gated: the API server offers it to new objects only with DRAListTypeAttributes on, while a
    # stored object (and the scheduler) always has it. From 1.37 it is the Kubernetes list library's.
    if minor >= 36 and (stored or list_type_attributes):
        out["includes"] = [_m("dra_includes_dyn_dyn" if minor == 36 else "list_includes_dyn_dyn", (t.DYN, t.DYN), _B)]
    return out


SORT_BY_KEYS: Final = "@sortByAssociatedKeys"


def device_type(allow_multiple_allocations: bool, list_type_attributes: bool) -> t.Type:
    # With DRAListTypeAttributes an attribute value is dyn (a scalar or a list), otherwise any.
    value = t.DYN if list_type_attributes else t.ANY
    fields = {
        "driver": t.STRING,
        "attributes": t.map_of(t.STRING, t.map_of(t.STRING, value)),
        "capacity": t.map_of(t.STRING, t.map_of(t.STRING, t.QUANTITY)),
    }
    if allow_multiple_allocations:
        fields["allowMultipleAllocations"] = t.BOOL
    return t.Type("struct", "kubernetes.DRADevice", fields=fields)


TYPE_IDENTS: Final = {
    "bool": t.BOOL, "int": t.INT, "uint": t.UINT, "double": t.DOUBLE, "string": t.STRING, "bytes": t.BYTES,
    "null_type": t.NULL, "list": t.Type("list", params=(t.DYN,)), "map": t.Type("map", params=(t.DYN, t.DYN)),
    "type": t.Type("type"), "google.protobuf.Timestamp": t.TIMESTAMP, "google.protobuf.Duration": t.DURATION,
}


STANDARD_FUNCTIONS: Final = frozenset(_standard())


def runtime_match(declared: t.Type, value: object) -> bool:
    """matchRuntimeArgType: does a value's runtime type satisfy a declared parameter (kinds only for
    lists and maps; dyn, any and type parameters take anything)."""
    from numalign.k8s.dra.cel.values import type_name
    if declared.kind in ("dyn", "any", "param", "error"):
        return True
    name = type_name(value)
    if declared.kind in ("list", "map", "bool", "int", "uint", "double", "string", "bytes"):
        return name == declared.kind
    if declared.kind == "null":
        return name == "null_type"
    return name == declared.name


@dataclass(frozen=True)
class Environment:
    functions: dict[str, list[Overload]]
    variables: dict[str, t.Type]
    outputs: frozenset[str]  # the output types a selector may have: bool and "the unknown type"


_CACHE: dict[tuple[int, bool, bool, bool], Environment] = {}


def environment(minor: int, consumable_capacity: bool, list_type_attributes: bool, stored: bool) -> Environment:
    """The DRA environment of `minor` for stored expressions (every option the release has, gates
    ignored) or for new ones (gated options only with their gate on)."""
    key = (minor, consumable_capacity, list_type_attributes, stored)
    env = _CACHE.get(key)
    if env is None:
        functions = _standard()
        for name, ovs in _kubernetes(minor, stored, list_type_attributes).items():
            functions.setdefault(name, []).extend(ovs)
        multi = minor >= 34 and (stored or consumable_capacity)
        # The attribute value type: any, or dyn with DRAListTypeAttributes (1.36). From 1.37 a stored
        # object gets the newest declaration of `device`, the one with list-type attributes.
        dyn_values = (minor == 36 and list_type_attributes) or (minor >= 37 and (stored or list_type_attributes))
        variables: dict[str, t.Type] = {"device": device_type(multi, dyn_values)}
        if minor >= 37:
            outputs = frozenset({"bool", "dyn" if dyn_values else "any"})
        elif minor == 36 and list_type_attributes:
            outputs = frozenset({"bool", "any", "dyn"})
        else:
            outputs = frozenset({"bool", "any"})
        variables.update({n: t.type_of(x) for n, x in TYPE_IDENTS.items()})
        env = _CACHE[key] = Environment(functions, variables, outputs)
    return env
