"""YAML/JSON text -> documents: the one parser behind every file numalign reads (manifests, the
KubeletConfiguration, machine, cluster, sweep, mix and device files), and the one way a syntax error
is worded. Pure: text in, data out; adapters.textfiles reads the files (or stdin) and calls it.
"""

from __future__ import annotations

import json
import re
from typing import Any, cast

import yaml

from numalign.errors import InvalidInputError
from numalign.limits import check_nesting, go_quote


class DuplicateKeyError(Exception):
    """A key written twice in one mapping: `key`, the 1-based line (and column) of the second and the
    line of the first. Raised by the loaders below, worded by duplicate_key_message."""

    def __init__(self, key: object, line: int, column: int, first_line: int, json_form: bool) -> None:
        super().__init__(key)
        self.key, self.line, self.column, self.first_line, self.json_form = key, line, column, first_line, json_form


class _UniqueKeys:
    """A mixin for PyYAML's safe loaders: a key written twice in one mapping raises DuplicateKeyError.
    PyYAML keeps the last value silently; Kubernetes' strict decoding (kubectl apply's default, go-yaml's
    "key already set in map") refuses the file, and a pod whose `cpu:` is written twice would otherwise be
    admitted with a number the user may not have meant. Keys a merge (`<<: *anchor`) brings in are not
    duplicates: overriding them is what a merge is for."""

    def flatten_mapping(self, node: yaml.MappingNode) -> None:
        # The pairs as written: PyYAML deletes the '<<' pairs from this very list and puts the merged
        # pairs before it in a new one. Kept on the node, as a merged anchor can be flattened before
        # its own mapping is constructed.
        if getattr(node, "written_pairs", None) is None:
            node.written_pairs = node.value  # type: ignore[attr-defined]
        super().flatten_mapping(node)  # type: ignore[misc]

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        mapping: dict[Any, Any] = super().construct_mapping(node, deep)  # type: ignore[misc]
        written = cast("list[tuple[yaml.Node, yaml.Node]]", getattr(node, "written_pairs", node.value))
        # Cheap in the usual case: with no merge, a duplicate is the only way to end with fewer keys.
        if len(mapping) < len(written) or written is not node.value:
            first: dict[Any, int] = {}
            for key_node, _ in written:
                key = self.construct_object(key_node, deep)  # type: ignore[attr-defined]  # built: cached
                mark = key_node.start_mark
                if key in first:
                    raise DuplicateKeyError(key, mark.line + 1, mark.column + 1, first[key], json_form=False)
                first[key] = mark.line + 1
        return mapping


# libyaml's C loader when PyYAML was built with it (several times faster on large manifests).
_Fast: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _Loader(_UniqueKeys, _Fast):  # type: ignore[misc,valid-type]
    pass


class _PureLoader(_UniqueKeys, yaml.SafeLoader):
    pass


def _unique_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """json's object_pairs_hook: the object, or DuplicateKeyError (located afterwards by
    _locate_json_duplicate: the hook is not told where the object is)."""
    obj = dict(pairs)
    if len(obj) < len(pairs):
        # Which key is left to _locate_json_duplicate, one pass over the text: looking for it here by
        # comparing pairs was quadratic in the object's keys (a 30,000-key object took 10 s to refuse).
        raise DuplicateKeyError("?", 0, 0, 0, json_form=True)
    return obj


def loads_json(text: str) -> Any:
    """json.loads, refusing an object with a key written twice (DuplicateKeyError, located): Go's
    encoding/json keeps the last silently, Kubernetes' strict decoding refuses it."""
    try:
        return json.loads(text, object_pairs_hook=_unique_object)
    except DuplicateKeyError:
        raise _locate_json_duplicate(text) from None


# A JSON string or one structural character; in valid JSON every `"` inside a string is escaped.
_JSON_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[{}\[\]:]')


def _locate_json_duplicate(text: str) -> DuplicateKeyError:
    """The first key written twice in one object of valid JSON text, in the order of the text (the error
    path only: one pass, lines counted as it goes)."""
    stack: list[dict[str, int] | None] = []  # per open bracket: an object's keys (line of each) or None
    string: re.Match[str] | None = None  # the string token just before, a key if ':' follows
    line, counted = 1, 0
    for token in _JSON_TOKEN.finditer(text):
        t = token.group()
        if t == ":" and string is not None and stack and (keys := stack[-1]) is not None:
            at = string.start()
            line += text.count("\n", counted, at)
            counted = at
            key = json.loads(string.group()) if "\\" in string.group() else string.group()[1:-1]
            if key in keys:
                column = at - (text.rfind("\n", 0, at) + 1) + 1
                return DuplicateKeyError(key, line, column, keys[key], json_form=True)
            keys[key] = line
        elif t in ("{", "["):
            stack.append({} if t == "{" else None)
        elif t in ("}", "]") and stack:
            stack.pop()
        string = token if t.startswith('"') else None
    return DuplicateKeyError("?", 0, 0, 0, json_form=True)  # not reached: the hook found one


def duplicate_key_message(exc: DuplicateKeyError, source: str, expected: str) -> str:
    """One line in the words of Kubernetes' strict decoding (go-yaml for YAML, its JSON decoder for JSON)."""
    key = go_quote(exc.key) if isinstance(exc.key, str) else str(exc.key)
    at = f" line {exc.line}, column {exc.column}:" if exc.line else ""
    problem = f"duplicate field {key}" if exc.json_form else f"key {key} already set in map"
    first = f" (first on line {exc.first_line})" if exc.first_line else ""
    return (
        f"{source}:{at} {problem}{first}: a key written twice, which Kubernetes' strict decoding (kubectl "
        f"apply) refuses and a lenient reader answers with the last value only; expected {expected}; keep "
        "one of the two (merge their values, or rename the one that belongs elsewhere)"
    )


def parse_documents(
    text: str, source: str, expected: str, error: type[InvalidInputError] = InvalidInputError
) -> list[Any]:
    """Every document of `text` in order, empty ones as None (so "document N" counts as an editor
    does). Text that looks like JSON is read as JSON first; YAML (a superset) reads the rest. A syntax
    error raises `error` worded by syntax_error_message; JSON-looking text that neither parser takes
    gets the JSON parser's complaint, which points at the real mistake."""
    try:
        # Before any parser: text nested thousands deep makes json recurse past Python's stack and
        # overflows the C stack of libyaml's loader (a segmentation fault, not an exception).
        check_nesting(text, source, expected)
    except InvalidInputError as exc:
        raise error(str(exc)) from None
    docs = _parse(text, source, expected, error)
    if ("\\u" in text or "\\U" in text) and _has_surrogate(docs):
        raise error(surrogate_message(text, source, expected))
    return docs


def _parse(text: str, source: str, expected: str, error: type[InvalidInputError]) -> list[Any]:
    json_error: json.JSONDecodeError | None = None
    try:
        if text.lstrip().startswith(("{", "[")):
            try:
                return [loads_json(text)]
            except json.JSONDecodeError as exc:
                json_error = exc  # maybe YAML flow style, which JSON does not take
        try:
            return list(yaml.load_all(text, Loader=_Loader))
        except yaml.YAMLError:
            pass
        try:
            # Parsed again by the pure-Python loader only to word the error: libyaml's marks and phrases
            # differ from PyYAML's, and the messages stay the same whichever PyYAML build is installed.
            # (Where it succeeds, libyaml refused a surrogate escape, which parse_documents refuses too.)
            return list(yaml.load_all(text, Loader=_PureLoader))
        except yaml.YAMLError as exc:
            raise error(syntax_error_message(json_error or exc, source, expected)) from None
    except DuplicateKeyError as exc:
        raise error(duplicate_key_message(exc, source, expected)) from None
    except ValueError as exc:  # not a syntax error: an integer of more than 4,300 digits
        if isinstance(exc, InvalidInputError):
            raise
        raise error(number_error_message(exc, source, expected)) from None


# A \\uXXXX (or \\U0000XXXX) escape of a UTF-16 surrogate, D800-DFFF: half of a character, not one.
_SURROGATE_ESCAPE = re.compile(r"\\(?:u|U0000)([dD][89a-fA-F][0-9a-fA-F]{2})")


def _has_surrogate(value: Any) -> bool:
    """Whether a string anywhere in the documents holds a lone surrogate. PyYAML's pure loader decodes
    each \\uD83C of a pair on its own and JSON keeps an unpaired one: such a string cannot be written out
    as UTF-8 (every later print or encode of it failed with a traceback)."""
    stack = [value]
    seen: set[int] = set()  # YAML aliases share one object: walked once, or nine anchors of nine are 9**9
    while stack:
        v = stack.pop()
        if isinstance(v, str):
            if not v.isascii() and any("\ud800" <= ch <= "\udfff" for ch in v):
                return True
        elif isinstance(v, (dict, list)) and id(v) not in seen:
            seen.add(id(v))
            stack.extend([*v.keys(), *v.values()] if isinstance(v, dict) else v)
    return False


def surrogate_message(text: str, source: str, expected: str) -> str:
    """Where the first surrogate escape is. Kubernetes' YAML decoder (go-yaml, as libyaml) refuses every
    one, a pair too, with this phrase; decided: an unpaired one in JSON is refused as well, where Go's JSON
    decoder would put U+FFFD in its place and so change the string silently."""
    pairs_decode = text.lstrip().startswith(("{", "["))  # JSON joins a high and a low surrogate into one
    found = _SURROGATE_ESCAPE.search(text)
    while pairs_decode and found is not None and found.group(1)[1] in "89abAB":
        low = _SURROGATE_ESCAPE.match(text, found.end())
        if low is None or low.group(1)[1] not in "cdefCDEF":
            break
        found = _SURROGATE_ESCAPE.search(text, low.end())  # a pair is one character: look further on
    at = ""
    escape = ""
    if found is not None:
        line = text.count("\n", 0, found.start()) + 1
        column = found.start() - (text.rfind("\n", 0, found.start()) + 1) + 1
        at, escape = f" line {line}, column {column}:", f" {found.group(0)}"
    return (
        f"{source}:{at} found invalid Unicode character escape code{escape} (a UTF-16 surrogate, half of a "
        f"character; not valid YAML or JSON); expected {expected}; write the character itself (UTF-8), or "
        "one escape of its code point, e.g. \\U0001F600 in YAML (JSON: a high and a low surrogate together)"
    )


def number_error_message(exc: ValueError, source: str, expected: str) -> str:
    """The parsers' ValueError that is not a syntax error: an integer too long for Python to convert."""
    reason = str(exc).split(";")[0].split(":")[0]
    return (
        f"{source}: a number in the file is too long ({reason}); expected {expected}; write numbers of at "
        "most a few dozen digits"
    )


def syntax_error_message(exc: yaml.YAMLError | json.JSONDecodeError, source: str, expected: str) -> str:
    """"SOURCE: line L, column C: <problem>; expected EXPECTED; fix the syntax ..." for a PyYAML or
    json error (1-based line and column, as editors count)."""
    fix = "fix the syntax (indentation, quoting, ':' after keys) and try again"
    if isinstance(exc, json.JSONDecodeError):
        at = f"line {exc.lineno}, column {exc.colno}"
        return f"{source}: {at}: {exc.msg} (not valid JSON); expected {expected}; {fix}"
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    mark = getattr(exc, "problem_mark", None)
    at = f" line {mark.line + 1}, column {mark.column + 1}:" if mark is not None else ""
    context = getattr(exc, "context", None)
    where_context = f" ({context})" if context else ""
    return f"{source}:{at} {problem}{where_context} (not valid YAML or JSON); expected {expected}; {fix}"
