"""The "dra-cel" area: DRA device selectors against k8s.io/dynamic-resource-allocation/cel
(conformance/area_dracel.go), 1.33-1.37 (1.33's package has no CEL features and no
allowMultipleAllocations).

A case is an expression composed from atoms over the `device` variable and the libraries of the DRA
environment (strings, lists, regex, semver, quantity, sets, optionals, cel.bind, macros, IP and CIDR,
the lists extension), including expressions the type checker refuses, ones estimated over the cost
limit, syntax errors and runtime errors, with a random device and the CEL features
(DRAConsumableCapacity, DRAListTypeAttributes). The answer is what the API server says on create, the
stored compile error, the output type, the estimated cost and DeviceMatches' bool or error.
"""

from __future__ import annotations

import random
import re
from typing import Any

from numalign.k8s.dra.cel import (
    CELFeatures,
    CELRuntimeError,
    compile_selector,
    cost_error,
    device_variables,
    evaluate,
)
from numalign.k8s.dra.cel.values import to_bool_error
from numalign.k8s.dra.types import DeviceAttribute, DeviceCapacity
from numalign.k8s.quantity import Quantity

NAME = "dra-cel"
MINORS = ("1.33", "1.34", "1.35", "1.36", "1.37")

_G = 'device.attributes["gpu.example.com"]'
_R = 'device.attributes["resource.kubernetes.io"]'
_C = 'device.capacity["gpu.example.com"]'
_ATOMS = (
    "true", "false", 'device.driver == "gpu.example.com"', 'device.driver.startsWith("gpu")',
    f'{_G}.model == "h100"', f'{_G}.model in ["h100", "h200"]', f"has({_G}.model)", f"has({_G}.index)",
    f"{_G}.index < 4", f"{_G}.index % 2 == 0", f"{_G}.healthy", f"!has({_G}.healthy) || {_G}.healthy",
    f'{_G}.driverVersion.isGreaterThan(semver("1.0.0"))', f"{_G}.driverVersion.major() >= 1",
    f'{_G}.driverVersion == semver("1.2.3")', f'{_G}.driverVersion.compareTo(semver("2.0.0-rc.1")) < 0',
    f"{_R}.numaNode == 0", f'{_R}.pcieRoot.endsWith("1")', '"resource.kubernetes.io" in device.attributes',
    f'{_C}.memory.isGreaterThan(quantity("40Gi"))', f'{_C}.memory.compareTo(quantity("80Gi")) >= 0',
    f"has({_C}.memory)", f'{_G}.model.matches("^[a-z][0-9]+$")', f'{_G}.model.find("[0-9]+") == "100"',
    f'{_G}.model.lowerAscii() == "h100"', f'{_G}.model.charAt(0) == "h"', f'{_G}.model.substring(1) == "100"',
    'device.driver.split(".").size() == 3', 'device.driver.indexOf(".") > 0', 'device.driver.replace("gpu", "x") != ""',
    "size(device.attributes) >= 1", f"size({_G}) >= 2",
    'device.attributes.exists(k, k == "gpu.example.com")',
    'device.attributes.all(d, d.endsWith(".com") || d.endsWith(".io"))',
    'device.attributes.all(k, device.attributes[k].all(n, n != ""))',
    f'cel.bind(g, {_G}, has(g.model) && g.model != "l4")', f'{_G}.?model.orValue("") == "h100"',
    f'{_G}.?nosuch.hasValue()', f'{_G}.model.size() > 2', 'size("héllo") == 5',
    'semver("1.0.0") == semver("1.0.0+b")', 'isSemver("v1.2", true)', 'semver("v1") == semver("1.0.0")',
    'semver("01.2.3").major() == 1', 'quantity("1Gi") == quantity("1024Mi")', 'isQuantity("1.5Gi")',
    'quantity("100m").asApproximateFloat() == 0.1', "[1, 2, 3].sum() == 6", "[3, 1, 2].isSorted()",
    '["a", "b"].join("-") == "a-b"', "sets.contains([1, 2, 3], [1, 2])", "sets.intersects([1], [2])",
    '[1, 2, 3].map(x, x * 2).exists(y, y == 4)', '[1, 2, 3].filter(x, x > 1).size() == 2',
    '"a,b,,c".split(",").size() == 4', '"abc".indexOf("c", 1) == 2', 'string(1) == "1"', 'int("12") == 12',
    "9223372036854775807 + 1 > 0", f"{_G}.index / 0 == 1", 'device.attributes["missing.example.com"].x == 1',
    f"{_G}.nosuch == 1", f"{_G}.model > 3", "1 == 1.0", '[1, "a"].size() == 2', f'{_G}.model.matches("[")',
    f'{_G}.tags.exists(t, t == "x")', f'{_G}.tags.includes("x")', f"{_R}.numaNode.includes(1)",
    "device.allowMultipleAllocations", f"{_G}.model", f"{_G}.index", '"abc".reverse() == "cba"',
    "math.greatest(1, 2) == 2", 'device.driver.split(".").exists(p, p.indexOf("x") > 0)',
    "type(device.driver) == string", 'dyn(1) == 1.0', "device.driver ==", "device.driver.(", "noSuchVar",
    'timestamp("2024-01-01T00:00:00Z") < timestamp("2025-01-01T00:00:00Z")', 'duration("1h") > duration("1m")',
    'ip("10.0.0.1").family() == 4',
    'ip.isCanonical("2001:db8:0:0::1") || ip.isCanonical("10.0.0.1")',
    'url("https://x").getHost() == "x"', 'strings.quote("a") == "\\"a\\""',
    f"{_R}.numaNode.exists(n, n == 1)", f"{_G}.driverVersion.includes(semver(\"1.2.3\"))",
    f"size({_G}.tags) == 2", f"{_G}.tags.all(t, t.size() == 1)", "[1, 2].includes(2)",
    '"%d-%s".format([1, "a"]) == "1-a"', '{"a": 1}.a == 1', '{"a": 1, "b": "x"}.size() == 2',
    "[1, 2] + [3] == [1, 2, 3]", 'device.driver + "x" == "gpu.example.comx"', "uint(1) == 1u", "-(1) < 0",
    '"abc".contains("b")', f"{_G}.index in [1, 2, 3]", "1.5 > 1", "[0, 1][2] == 1", '{"a": 1}["b"] == 1',
)

# The base environment's IP and CIDR libraries (k8s.io/apiserver 1.30), uint arithmetic.
_NET_ATOMS = (
    'cidr("10.0.0.0/8").containsIP("10.1.2.3")', 'cidr("10.0.0.0/8").containsIP(ip("11.0.0.1"))',
    'cidr("10.0.0.0/8").containsCIDR("10.1.0.0/16")', 'cidr("2001:db8::/32").containsCIDR(cidr("2001:db8:1::/48"))',
    'cidr("10.0.0.0/16").containsCIDR("10.0.0.0/8")', 'cidr("10.0.0.0/8").containsIP("2001:db8::1")',
    'cidr("10.1.2.3/8").masked() == cidr("10.0.0.0/8")', 'cidr("10.0.0.0/8").prefixLength() == 8',
    'cidr("10.0.0.1/24").ip() == ip("10.0.0.1")', 'string(cidr("2001:DB8::/32")) == "2001:db8::/32"',
    'isCIDR("10.0.0.0/33")', 'isCIDR("10.0.0.0/08")', "isCIDR(device.driver)", "cidr(device.driver).prefixLength() > 0",
    'cidr("::ffff:1.2.3.4/96").prefixLength() > 0', 'cidr("fe80::1%eth0/64").prefixLength() > 0',
    'cidr("10.0.0.0").prefixLength() > 0', 'ip("224.0.0.1").isGlobalUnicast()', 'ip("10.0.0.1").isGlobalUnicast()',
    'ip("255.255.255.255").isGlobalUnicast()', 'ip("fe80::1").isLinkLocalUnicast()',
    'ip("169.254.1.1").isLinkLocalUnicast()', 'ip("ff02::1").isLinkLocalMulticast()',
    'ip("224.0.0.251").isLinkLocalMulticast()', 'string(ip("2001:db8::1")) == "2001:db8::1"',
    f'cidr("10.0.0.0/16").containsIP("10.0.0." + string({_G}.index))', 'cidr("1.2.3.4/8") == cidr("1.2.3.4/8")',
    'type(cidr("1.0.0.0/8")) == type(cidr("2.0.0.0/8"))', "7u - 8u == 0u", "type(1u) == uint", "1u + 2u == 3u",
    "18446744073709551615u + 1u > 0u", "2u * 9223372036854775808u > 0u",
)

# cel-go's lists extension (base environment 1.34: a new object from 1.35) and the optional library's
# first/last, over constants and over the device's strings, with their costs.
_S = 'device.driver.split(".")'
_LIST_ATOMS = (
    "[1, 2, 3].reverse() == [3, 2, 1]", "[1, 2, 3].slice(1, 2) == [2]", "[1, 2, 3].slice(2, 1) == [2]",
    "[1, 2, 3].slice(1, 5).size() == 1", "[1, 2, 3].slice(-1, 2).size() == 1", "[3, 1, 2].sort() == [1, 2, 3]",
    '["b", "a"].sort() == ["a", "b"]', "[[1], [2]].flatten() == [1, 2]", "lists.range(3) == [0, 1, 2]",
    "lists.range(-3) == []", "lists.range(2000000).size() > 0", "[1, 2, 2].distinct() == [1, 2]",
    "[1, 2].first().value() == 1", "[1, 2].last().value() == 2", "[].first().hasValue()",
    '[dyn(1), dyn("a")].sort() == []',
    "dyn([[1], [2]]).sort() == []", f'{_S}.sort()[0] == "com"', f"{_S}.distinct().size() == 3",
    f'{_S}.slice(0, 1) == ["gpu"]', f'{_S}.reverse()[0] == "com"', "lists.range(size(device.driver)).size() == 15",
    "dyn([[1, [2]], 3]).flatten(2) == [1, 2, 3]", "dyn([[1, [2]], 3]).flatten(-1) == [1, 2, 3]",
    "[[1, 2], [3]].flatten().distinct().sort().reverse().slice(0, 2) == [3, 2]",
    f'{_S}.first().orValue("") == "gpu"', f"lists.range({_G}.index).size() < 4",
    f"[{_G}.index, 1].sort()[0] == 1", f'[{_G}.model, "a"].distinct().size() == 2',
    # sortBy (a macro of the extension: an undeclared reference where the environment lacks it), in the
    # order Go's sort.Slice leaves equal keys, and an error among the keys (its macro errors are named
    # cases: beside a syntax error cel-go reports both, cel-cpp's parser only the syntax error)
    "[3, 1, 2].sortBy(x, -x) == [3, 2, 1]", f'{_S}.sortBy(p, p.size())[0] == "gpu"',
    "lists.range(20).sortBy(x, x % 3)[1] == 3", "lists.range(60).sortBy(x, x % 7)[59] == 55",
    '{"a": 1}["%s".format([lists.range(70).sortBy(x, x % 4)])] == 1', "[1, 2].sortBy(x, [x]) == []",
    '[1, 2].sortBy(x, dyn(x == 1 ? 1 : "a")) == []', '[1, 2].sortBy(x, x == 1 ? dyn(1) : dyn("a")) == []',
    "[1, 2].sortBy(x, 1 / (x - 1)) == []", f"[{_G}.index, 1, 5].sortBy(x, -x)[0] == 5",
    '[{"k": 2}, {"k": 1}].sortBy(m, m.k)[0].k == 1', '["b", "a", "c"].sortBy(s, s).reverse()[0] == "c"',
    "[0.0, -0.0, 1.0].sortBy(x, x)[0] == 0.0", "lists.range(10).sortBy(x, double(\"NaN\")).size() == 10",
)

# Two-variable comprehensions (cel-go ext.TwoVarComprehensions, base environment 1.32), over lists of
# constants and of the device's strings and over maps of constants (not over device.attributes: Go's map
# order would make the cost of an early stop vary). The macros' own errors (a variable that is not a
# name, twice the same) are unit-tested: beside a syntax error cel-go reports both, numalign's parser
# (cel-cpp) only the syntax error (docs/dra.md).
_COMPREHENSION_ATOMS = (
    "[1, 2].all(i, v, i < v)", "[1, 2].exists(i, v, i == v)", "[1, 2].existsOne(i, v, i == 1)",
    "[1, 2].exists_one(i, v, v == 2)", "[1, 2].transformList(i, v, i + v) == [1, 3]",
    "[1, 2].transformList(i, v, i > 0, v) == [2]", '{"a": 1}.transformMap(k, v, v + 1) == {"a": 2}',
    '{"a": 1, "b": 2}.transformMap(k, v, v > 1, v + 1) == {"b": 3}',
    '{"a": 1}.transformMapEntry(k, v, {v: k}) == {1: "a"}',
    '{"a": 1, "b": 1}.transformMapEntry(k, v, {v: k}).size() == 1',
    f'{_S}.all(i, p, i < 3 && p != "")', f'{_S}.exists(i, p, i == 2 && p == "com")',
    f'{_S}.transformList(i, p, p.size() > 3, i) == [1]', f'{_S}.transformMap(i, p, p).size() == 3',
    f'{_S}.transformMapEntry(i, p, {{p: i}})["gpu"] == 0', '{"a": 1}.all(k, v, k == "a" && v == 1)',
    "[1].all(@result, v, true)", "[1].exists(i, v, v)", "[1].exists(v, v)", "true && 1",
    '{"a": "b"}.transformMap(k, v, 1).a == 1', "[[1, 2], [3]].transformList(i, l, l.size()).sum() == 3",
)

# Conversions (cel-go's String.ConvertToType: one text for every string that does not convert), a
# constant conversion that fails refusing the program itself ("program instantiation failed"), and the
# duration/timestamp literal validators on literals of any type; %g for a double's string.
_CONVERSION_ATOMS = (
    'int("0x10") == 16', 'int(" 1") == 1', 'int("x") == 1', "uint(-1) == 1u", 'double("a") > 0.0',
    'duration("bad") > duration("1s")', 'timestamp("bad") > timestamp(1)', 'bool("yes")', 'bool("T")',
    'string(b"\\xff") == ""', "int(1e19) == 1", "uint(-1.0) == 1u", 'false && int("x") == 1',
    '[int("x")].size() == 1', 'dyn(int("x")) == 1', "int(18446744073709551615u) == 1",
    "int(device.driver) == 1", "uint(device.driver) == 1u", "double(device.driver) > 0.0",
    "duration(device.driver) > duration(\"1s\")", "timestamp(device.driver) > timestamp(1)",
    f'int(string({_G}.index) + " ") == 1', f'int("+" + string({_G}.index)) >= 0',
    f'uint("+" + string({_G}.index)) >= 0u', f'double(string({_G}.index) + "e400") > 1.0',
    f'double("0x1p-" + string({_G}.index)) < 2.0', 'double("-Inf" + device.driver.substring(0, 0)) < 0.0',
    'double("1e400") > 1.0', 'double("0x1p-2") == 0.25', 'double("Infinity") > 0.0', 'double("nan") != 0.0',
    'duration("--5s") > duration("1s")', 'duration("2562048h") > duration("1s")', 'duration(".5s") < duration("1s")',
    f'duration(string({_G}.index) + "h1") > duration("1s")', f'duration(string({_G}.index) + ".5m") > duration("1s")',
    "timestamp(253402300800) > timestamp(1)", "timestamp(-62135596801) > timestamp(1)",
    f"timestamp({_G}.index * 100000000000) > timestamp(1)",
    f'timestamp("2020-02-3" + string({_G}.index) + "T00:00:00Z") > timestamp(1)',
    f'timestamp("0000-01-01T00:00:0" + string({_G}.index) + "Z") > timestamp(1)',
    f'timestamp("2020-01-01T00:00:00.5" + string({_G}.index) + "+01:00") > timestamp(1)',
    'timestamp("2020-02-30T00:00:00Z") > timestamp(1)', 'int("99999999999999999999") == 1',
    'string(1000000.0) == "1e+06"', 'string(123456.0) == "123456"', 'string(0.00001) == "1e-05"',
    f'string(double({_G}.index) * 1e6) == "3e+06"', f'string(double({_G}.index) / 1e5) == "3e-05"',
    'string(duration("1.5s")) == "1.5s"', 'string(timestamp("2020-01-01T00:00:00.120Z")) == "2020-01-01T00:00:00.12Z"',
    f'string(duration(string({_G}.index) + "ms")) == "0.003s"', "[].min() == 1", "[].max() == 1",
    '["1", "x"].all(s, int(s) > 0)', f'[{_G}.index].min() == 1',
    # netip's parse errors through ip() and cidr(); Go's regexp refusing \C; the regex library's texts
    f'ip("10.0.0.0" + string({_G}.index)).family() == 4', f'isIP("1.2.3." + string({_G}.index + 300))',
    "ip(device.driver).family() == 4", f'ip("fe80::" + string({_G}.index) + "%").family() == 6',
    f'ip("1::2::" + string({_G}.index)).family() == 6', f'ip("::ffff:1.2.3." + string({_G}.index)).family() == 6',
    f'ip("12345::" + string({_G}.index)).family() == 6', f'isIP("1.2." + string({_G}.index))',
    f'cidr("1.2.3." + string({_G}.index) + "/" + string({_G}.index * 20)).prefixLength() > 0',
    'cidr(device.driver + "/8").prefixLength() > 0',
    f'cidr("fe80::1%" + string({_G}.index) + "/64").prefixLength() > 0',
    '"ab".matches(device.driver.substring(0, 0) + "a\\\\C")', '"ab".matches("\\\\C")', '"ab".find("\\\\C") == ""',
    '"ab".find("[") == ""', f'"ab".find(device.driver.substring({_G}.index, {_G}.index) + "[") == ""',
    '"ab".findAll("(" + device.driver.substring(0, 0)).size() == 0', '"a\\\\Cb".matches("\\\\Q\\\\C\\\\E")',
    # the timestamp and duration accessors (UTC unless a zone is given; a duration's are totals), int() of
    # a duration, the overflow checks of time arithmetic, the well-known types' names
    f"timestamp({_G}.index * 10000000000).getFullYear() == 2920", f"timestamp({_G}.index * 86400).getDayOfWeek() == 0",
    f'timestamp("2024-03-0" + string({_G}.index) + "T01:30:00+05:30").getDate() == 2',
    f'timestamp({_G}.index * 1000000).getHours("America/New_York") == 9',
    f'timestamp({_G}.index * 1000000).getMinutes("Asia/Kathmandu") == 5',
    f'timestamp({_G}.index).getDayOfYear(device.driver) == 0',
    f'timestamp({_G}.index).getHours("-0" + string({_G}.index) + ":30") == 20',
    f'timestamp({_G}.index).getMonth("x:" + string({_G}.index)) == 0', 'timestamp(1).getSeconds("Nowhere/Town") == 1',
    f'duration(string({_G}.index) + ".5h").getMinutes() == 210',
    f'duration("-" + string({_G}.index) + "ms").getMilliseconds() == -3',
    f'duration(string({_G}.index) + "h59m59.999999999s").getSeconds() > 0',
    f'int(duration(string({_G}.index) + "s")) == 3000000000',
    f'timestamp(253402300799) + duration(string({_G}.index) + "s") > timestamp(1)',
    f'timestamp(-62135596800) - duration(string({_G}.index) + "ns") > timestamp(1)',
    f'timestamp(253402300799) - timestamp(-62135596800 + {_G}.index) > duration("1s")',
    f'duration("2562047h") + duration(string({_G}.index) + "h") > duration("1s")',
    'type(duration("1s")) == google.protobuf.Duration', 'type(timestamp(1)) != google.protobuf.Timestamp',
    f'duration(string({_G}.index) + "s") + {_G}.index > duration("1s")', 'timestamp(1).getHours(1) == 0',
)

# The strings extension's format() (version 2 in every release): each clause on the device's values and
# on constants, lists and maps as CEL literals (a device's attribute map too: cel-go sorts its keys), the
# locale's %f and %e, precisions that wrap, the compile-time check of a constant format string against a
# literal list and the run-time errors of one it cannot check (dyn).
_FORMAT_ATOMS = (
    f'"%.2f".format([double({_G}.index) * 1000.5]) == "3,001.50"', f'"%e".format([double({_G}.index)]) != ""',
    f'"%x-%X-%o-%b".format([{_G}.index + 250, {_G}.index + 250, {_G}.index, {_G}.index]) == "fd-FD-3-11"',
    f'"%s".format([{_G}]).size() > 2', '"%s".format([device.attributes]).size() > 2',
    '"%s".format([device.capacity]) == ""', f'"%d".format([{_G}.model]) == ""',
    f'"%s".format([{_G}.model]) == "h100"', f'"%s".format([{_G}.driverVersion]) == ""',
    f'"%f".format([{_G}.index]) == ""', f'"%e".format([{_G}.model]) == ""', '"%.3f".format([1.0]) == "1.000"',
    '"%q".format([1]) == ""', '"%d %d".format([1]) == ""', '"%d".format([1, 2]) == ""', '"%".format([1]) == ""',
    '"%s".format([semver("1.0.0")]) == ""', '"%d".format([1.5]) == ""', '"%x".format([[1]]) == ""',
    '"%.f".format(dyn([1.5])) == ""', '"%.5".format(dyn([1.5])) == ""', '"%é".format(dyn([1])) == ""',
    '"%d".format(dyn(["x"])) == ""', '"%b".format(dyn([1.5])) == ""', '"%o".format(dyn([true])) == ""',
    '"%x".format(dyn([1.5])) == ""', '"%s".format(dyn([ip("10.0.0.1")])) == ""',
    '"%s".format(dyn([{1.5: 1}])) == ""',
    f'"%s".format([[{_G}.index, 1.5, "x\\"y", b"z", null, {{"k": true}}, int]]) == ""',
    f'"%b %o %X".format([{_G}.index, -{_G}.index, device.driver]) != ""',
    f'"%.300f".format([double({_G}.index)]).size() == 46',
    f'"%.20e".format([double({_G}.index) / 7.0]).startsWith(" ")',
    f'"%.256f|%.32768f".format([double({_G}.index) / 8.0, 0.1]) == ""',
    '"%.99999999f".format([1.5]) == "%!(NOVERB)"', '"%f".format(["NaN"]) == "NaN"',
    '"%e".format([-double("Infinity")]) == "    -∞"', '"%.0e".format([1e-300]) == ""',
    f'"%s".format([duration(string({_G}.index) + ".5s")]) == "3.5s"',
    '"%s|%s".format([timestamp("2021-06-01T12:00:00.5+02:00"), [timestamp("2021-06-01T12:00:00-00:30")]]) == ""',
    f'"%s".format([[{_G}.index * 1000000, double({_G}.index) * 1e21, -0.0, double("NaN")]]) == ""',
    f'"%s %s".format([double({_G}.index) * 1e6, double({_G}.index) / 1e5]) == "3e+06 3e-05"',
    f'"%%%d%%".format([{_G}.index]) == "%3%"', f'"%s".format([{_G}.tags]) == ""', f'"%s".format([{_R}]) != ""',
    f'"%.1f".format([double({_G}.index) / 12.0]) == "0.2"',
    f'"%s".format([{_G}.index > 2, null, type({_G}.index)]) != ""', '"%s".format([b"\\xff"]) == ""',
    'strings.quote("a\\u0001\\a") == ""',
)


def _compose(rng: random.Random, depth: int) -> str:
    if depth == 0 or rng.random() < 0.35:
        pick = rng.random()
        return rng.choice(_ATOMS if pick < 0.55 else _NET_ATOMS if pick < 0.65 else _LIST_ATOMS if pick < 0.75
                          else _COMPREHENSION_ATOMS if pick < 0.83 else _CONVERSION_ATOMS if pick < 0.91
                          else _FORMAT_ATOMS)
    a, b = _compose(rng, depth - 1), _compose(rng, depth - 1)
    shape = rng.randrange(6)
    if shape == 0:
        return f"({a}) && ({b})"
    if shape == 1:
        return f"({a}) || ({b})"
    if shape == 2:
        return f"!({a})"
    if shape == 3:
        return f"({a}) == ({b})"
    if shape == 4:
        return f"({a}) ? ({b}) : {rng.choice(('true', 'false'))}"
    return f"device.attributes.exists(k, ({a}))"


def _device(rng: random.Random, minor: int, list_type: bool) -> dict[str, Any]:
    attrs: dict[str, Any] = {}
    if rng.random() < 0.9:
        attrs["model"] = {"string": rng.choice(("h100", "h200", "l4", "B200", "mi300x"))}
    if rng.random() < 0.6:
        attrs["index"] = {"int": rng.randrange(8)}
    if rng.random() < 0.4:
        attrs["healthy"] = {"bool": rng.random() < 0.5}
    if rng.random() < 0.6:
        attrs["driverVersion"] = {"version": rng.choice(("1.2.3", "0.9.9", "2.0.0-rc.1", "12.4.0", "1.2.3+b1"))}
    if rng.random() < 0.7:
        attrs["resource.kubernetes.io/numaNode"] = {"int": rng.randrange(2)}
    if rng.random() < 0.5:
        attrs["resource.kubernetes.io/pcieRoot"] = {"string": f"pci0000:0{rng.randrange(8)}"}
    if list_type and rng.random() < 0.5:
        attrs["tags"] = {"strings": rng.sample(["x", "y", "z"], rng.randint(1, 3))}
    if list_type and rng.random() < 0.3:
        attrs["resource.kubernetes.io/numaNode"] = {"ints": rng.sample([0, 1, 2, 3], rng.randint(1, 4))}
    if list_type and rng.random() < 0.2:
        attrs["driverVersion"] = {"versions": rng.sample(["1.2.3", "2.0.0-rc.1", "0.9.9"], rng.randint(1, 3))}
    caps: dict[str, str] = {}
    if rng.random() < 0.7:
        caps["memory"] = rng.choice(("24Gi", "40Gi", "80Gi", "141Gi"))
    if rng.random() < 0.3:
        caps["cores"] = str(rng.choice((16, 132)))
    allow = rng.choice((None, True, False)) if minor >= 34 else None
    return {"driver": rng.choice(("gpu.example.com", "gpu.example.com", "other.example.org")),
            "allow_multiple_allocations": allow, "attributes": attrs, "capacity": caps}


# A macro over device.attributes/capacity walks a Go map in random order: where it stops early, so does
# the evaluated cost, so only the other selectors ask for it.
_OVER_A_MAP = re.compile(r"device\.(attributes|capacity)(\[[^\]]*\])?\.(exists|all|exists_one|filter|map)\(")


# Deeply nested selectors. cel-go's parser refuses beyond 250 levels (its default: neither the API
# server nor k8s.io/dynamic-resource-allocation/cel sets a parser option), cel-cpp's beyond 32
# (docs/fidelity.md): chains the grammar reads as repetitions (`||`, unary `!` and `-`) are generated
# at any depth, up to and past 250; parentheses, lists, calls and `+` chains stay below 32.
_CHAINS = (
    lambda n: " || ".join(["true"] * (n + 1)),
    lambda n: " && ".join(["true"] * (n + 1)),
    lambda n: "!" * (2 * (n // 2)) + "true",
    lambda n: "-" * (2 * (n // 2)) + "1 == 1",
)
_NESTINGS = (
    lambda n: "(" * n + "true" + ")" * n,
    lambda n: " + ".join(["1"] * (n + 1)) + " > 0",
    lambda n: "[" * n + "1" + "]" * n + " != []",
    lambda n: "!(" * n + "true" + ")" * n,
    lambda n: "string(" * n + "1" + ")" * n + ' != ""',
)
_CHAIN_DEPTHS = (1, 2, 31, 32, 33, 100, 249, 250, 251, 252, 300, 1000)


def _nested(rng: random.Random) -> str:
    if rng.random() < 0.5:
        return rng.choice(_CHAINS)(rng.choice(_CHAIN_DEPTHS))
    return rng.choice(_NESTINGS)(rng.randint(1, 28))


def generate(rng: random.Random, version: str) -> dict[str, Any]:
    minor = int(version.split(".")[1])
    list_type = minor >= 36 and rng.random() < 0.3
    # (1.33's package has no CEL features)
    consumable = rng.random() < (0.8 if minor >= 36 else 0.3) and minor >= 34
    expr = _nested(rng) if rng.random() < 0.08 else _compose(rng, rng.randint(0, 3))
    return {
        "expr": expr,
        "features": {"consumable_capacity": consumable, "list_type_attributes": list_type},
        "device": _device(rng, minor, list_type),
        "with_cost": _OVER_A_MAP.search(expr) is None,
    }


# kubernetes.URL values as cel-go compares them: by Go's url.URL String() forms (apiserver cel.URL.Equal),
# escapes decoded and made again, a lone `?` kept, `http:/p` apart from `http:///p`; with url.ParseRequestURI's
# refusals, url.Parse's getters and the equality's estimated cost (the right side's size, a tenth a unit).
# Each was a difference (numalign compared urllib's split of the input text) found by probing cel-go.
_URL_CASES = (
    ("url-equal-path-escapes", 'url("http://a/b c") == url("http://a/b%20c")'),
    ("url-equal-non-ascii-path", 'url("http://a/\u00e9") == url("http://a/%C3%A9")'),
    ("url-equal-request-path", 'url("/p q") == url("/p%20q")'),
    ("url-equal-userinfo-escapes", 'url("http://user:pa%73s@a/") == url("http://user:pass@a/")'),
    ("url-equal-lone-question-mark", 'url("http://a/b?") == url("http://a/b")'),
    ("url-equal-empty-authority", 'url("http:/path") == url("http:///path")'),
    ("url-equal-fragment", 'url("http://a/b#c") == url("http://a/b%23c")'),
    ("url-equal-cost", 'url("http://a/") == url("https://example.com/a/much/longer/path/than/the/left/one")'),
    ("url-ascii-host-escape", 'url("http://a%41/") == url("http://aA/")'),
    ("url-bad-escape", 'isURL("http://a/%") || url("http://a/%").getHost() == ""'),
    ("url-http-host-colons", 'isURL("http://a:1:2/") || !isURL("foo://a:1:2/")'),
    ("url-asterisk", 'isURL("*") && url("*").getEscapedPath() == "*"'),
    ("url-escaped-path", 'url("https://example.com/path with spaces/").getEscapedPath() == "/path%20with%20spaces/"'),
    ("url-host-unescaped", 'url("http://a%C3%A9/").getHost() == "a\u00e9"'),
    ("url-query-bad-pairs", 'url("http://a/?a=%zz&b;c=1&d=+").getQuery() == {"d": [" "]}'),
    # a bracketed host is netip.ParseAddr's, its zone included, with its words (review 4 F2)
    ("url-bracket-ipv4-zone", 'isURL("http://[1.2.3.4%25x]/")'),
    ("url-bracket-empty-zone", 'isURL("http://[fe80::1%25]/")'),
    ("url-bracket-empty-zone-error", 'url("http://[fe80::1%25]/").getHost() == ""'),
    ("url-bracket-ipv4-zone-error", 'url("http://[1.2.3.4%25x]/").getHost() == ""'),
    ("url-bracket-trailing-colon", 'url("http://[::1:]/").getHost() == ""'),
    ("url-bracket-leading-zero", 'url("http://[::ffff:01.2.3.4]/").getHost() == ""'),
    ("url-bracket-two-double-colons", 'url("http://[1::2::3]/").getHost() == ""'),
    ("url-bracket-missing-address", 'url("http://[a%2541]/").getHost() == ""'),
    ("url-bracket-not-an-address", 'url("http://[v1.x]/p").getHostname() == ""'),
    ("url-bracket-byte-not-utf8", 'url("http://[fe80::%80%25x]/").getHost() == ""'),  # quoted \\x80 (review 4 L5)
)



def _attribute(raw: dict[str, Any]) -> DeviceAttribute:
    ((kind, value),) = raw.items()
    if kind.endswith("s") and isinstance(value, list):
        return DeviceAttribute(kind[:-1], tuple(value), True)  # type: ignore[arg-type]
    return DeviceAttribute(kind, (value,))  # type: ignore[arg-type]


def numalign(case: dict[str, Any], version: str) -> dict[str, Any]:
    f = case["features"]
    features = CELFeatures(consumable_capacity=f["consumable_capacity"],
                           list_type_attributes=f["list_type_attributes"], minor=int(version.split(".")[1]))
    expr = case["expr"]
    answer: dict[str, Any] = {}
    created = compile_selector(expr, features, new_object=True)
    answer["create"] = created.error if created.error is not None else cost_error(created)
    stored = compile_selector(expr, features)
    answer["stored"] = stored.error
    if stored.error is not None:
        return answer
    answer["output_type"] = stored.output_type
    answer["max_cost"] = str(stored.max_cost)
    d = case["device"]
    attrs = {name: _attribute(raw) for name, raw in d["attributes"].items()}
    caps = {name: DeviceCapacity(Quantity.parse(v)) for name, v in d["capacity"].items()}
    device = device_variables(d["driver"], attrs, caps, d["allow_multiple_allocations"], features)
    try:
        value, cost = evaluate(stored, device)
        answer["value"] = {"result": value} if isinstance(value, bool) else {"runtime_error": to_bool_error(value)}
        if case.get("with_cost") and isinstance(value, bool):
            answer["actual_cost"] = cost
    except CELRuntimeError as exc:
        answer["value"] = {"runtime_error": str(exc)}
    return answer


def size(case: dict[str, Any]) -> int:
    return len(case["expr"]) + len(case["device"]["attributes"]) * 5


_NAMED_DEVICE: dict[str, Any] = {
    "driver": "gpu.example.com", "allow_multiple_allocations": None,
    "attributes": {"model": {"string": "h100"}, "index": {"int": 3},
                   "driverVersion": {"version": "1.2.3"}, "resource.kubernetes.io/numaNode": {"int": 1}},
    "capacity": {"memory": "80Gi"},
}
# Each gap closed against the real environment, by name (conformance/README.md): what the generated
# cases reach only by chance.
_NAMED = {
    # a constant conversion that fails fails the program, even where it is never evaluated
    "fold-conversion": 'false && int("x") == 1',
    "fold-uint-negative": "uint(-1) == 1u",
    "string-to-int-text": 'int(device.driver) == 1',
    "string-to-int-hex": 'int("0x" + string(device.attributes["gpu.example.com"].index)) == 3',
    "string-to-int-blank": 'int(" " + string(device.attributes["gpu.example.com"].index)) == 3',
    "duration-literal-overflow": 'duration("2562048h") > duration("1s")',
    "timestamp-literal-range": "timestamp(253402300800) > timestamp(1)",
    "double-string-g": 'string(double(device.attributes["gpu.example.com"].index) * 1e6) == "3e+06"',
    "empty-list-min": "[].min() == 1",
    # format(): x/text's en_US printer, cel-go's precision-as-width for %e, the compile-time check
    "format-fixed-locale": '"%.2f".format([double(device.attributes["gpu.example.com"].index) * 1000.5]) == "3,001.50"',
    "format-scientific-width": '"%.20e".format([double(device.attributes["gpu.example.com"].index)]) == ""',
    "format-constant-check": '"%d".format([1.5]) == ""',
    "format-map-literal": '"%s".format([device.attributes["gpu.example.com"]]) == ""',
    # a failed comprehension step leaves the error as the accumulator; the loop goes on, charged
    "comprehension-error-goes-on": "[1, 1, 1].transformMapEntry(k, v, {v: k}).size() == 1 || true",
    # netip's own words through ip(); Go's regexp refuses \C (RE2 takes it)
    "ip-netip-error": 'ip("10.0.0.0" + string(device.attributes["gpu.example.com"].index)).family() == 4',
    "regex-backslash-c": '"ab".matches(device.driver.substring(0, 0) + "a\\\\C")',
    # sortBy leaves equal keys where Go's sort.Slice (pattern-defeating quicksort) leaves them
    "sortby-go-order": '{"a": 1}["%s".format([lists.range(70).sortBy(x, x % 4)])] == 1',
    "sortby-key-error": "[1, 2].sortBy(x, 1 / (x - 1)) == []",
    "sortby-macro-target": "1.sortBy(x, x) == []",
    "sortby-macro-variable": "[1].sortBy(1, x) == []",
    # doubleToUint64Checked refuses any double below 0: (-1, 0) overflows, at program build and at run time
    "fold-uint-negative-fraction": "uint(-0.5) == 0u",
    "uint-negative-fraction": 'uint(double(device.attributes["gpu.example.com"].index) - 3.5) == 0u',
    "uint-negative-zero": "uint(-0.0) == 0u",
    # time.Parse(RFC3339) past its fast path: the layout parser's comma fraction, one-digit hour and
    # zone offsets up to 24:60; beside them what it still refuses
    "timestamp-comma-fraction": 'string(timestamp("2024-01-01T00:00:00,5+01:00")) == "2024-01-01T00:00:00.5+01:00"',
    "timestamp-one-digit-hour": 'timestamp(device.driver.substring(0, 0) + "2024-02-29T7:05:09Z") > timestamp(1)',
    "timestamp-offset-24-60": 'string(timestamp("2024-01-01T00:00:00-24:60")) == "2024-01-01T00:00:00-25:00"',
    "timestamp-offset-23-60-runtime":
        'string(timestamp(device.driver.substring(0, 0) + "2024-01-01T00:00:00+23:60")) == "2024-01-01T00:00:00+24:00"',
    "timestamp-offset-hour-25": 'timestamp(device.driver.substring(0, 0) + "2024-01-01T00:00:00+25:00") > timestamp(1)',
    "timestamp-offset-minute-61": 'timestamp("2024-01-01T00:00:00+00:61") > timestamp(1)',
    "timestamp-two-fractions": 'timestamp("2024-01-01T00:00:00.5,5Z") > timestamp(1)',
    "timestamp-year-zero-offset-24": 'timestamp("0000-12-31T00:00:00-24:00") > timestamp(1)',
    # timestamp and duration accessors: the zero-argument ones in UTC (not the zone a string was read with)
    "timestamp-getters-utc": 'timestamp("2024-01-01T00:00:00+05:30").getDayOfYear() == 364',
    "timestamp-getters-zone": 'timestamp(86400).getHours("America/New_York") == 19',
    "timestamp-getters-offset": 'timestamp(0).getMinutes("-00:30") == 30 && timestamp(0).getHours("05:99") == 6',
    "timestamp-getters-bad-zone": 'timestamp(0).getHours(device.driver.substring(0, 3) + ":00") == 0',
    "timestamp-getters-unknown-zone": 'timestamp(0).getHours("Nowhere/Town") == 0',
    "duration-getters-totals": 'duration("1.5s").getMilliseconds() == 1500 && duration("-90m").getHours() == -1',
    "duration-getseconds-rounds": 'duration("5000000000.999999999s").getSeconds() == 5000000001',
    "duration-to-int": 'int(duration("1s")) == 1000000000',
    "timestamp-add-overflow": 'timestamp(253402300799) + duration("1s") > timestamp(1)',
    "timestamp-sub-overflow": 'timestamp(253402300799) - timestamp(-62135596800) > duration("1s")',
    "type-well-known-names": 'type(duration("1s")) == google.protobuf.Duration',
    "checker-duration-name": '-duration("1s") < duration("0s")',
}


def named_cases(version: str) -> list[tuple[str, dict[str, Any], str]]:
    """Cases run by name after the generated ones (run.py), each with its CPU-time bound in the harness:
    the URL cases on a device without attributes, the others on _NAMED_DEVICE."""
    minor = int(version.split(".")[1])
    features = {"consumable_capacity": False, "list_type_attributes": False}
    bare: dict[str, Any] = {"driver": "gpu.example.com", "allow_multiple_allocations": None, "attributes": {},
                            "capacity": {}}
    device = dict(_NAMED_DEVICE, allow_multiple_allocations=None if minor < 34 else False)
    return ([(name, {"expr": expr, "features": features, "device": bare, "with_cost": True}, "20s")
             for name, expr in _URL_CASES]
            + [(name, {"expr": expr, "features": features, "device": device, "with_cost": True}, "20s")
               for name, expr in _NAMED.items()])
