"""CEL device selectors (k8s.io/dynamic-resource-allocation/cel): compile, check, estimate and evaluate
as the API server and the scheduler do.

Parsing is cel-cpp's (PyPI `cel-expr-python`: the ANTLR grammar, macros, `cel.bind` and optional syntax
of cel-go, so the same syntax errors, ids and positions). Everything after the parse is numalign's,
following cel-go v0.26 and k8s.io/apiserver's CEL libraries: the type checker (checker.py), the DRA
environment's declarations per version (decls.py), the API server's cost estimate (cost.py) and the
evaluator with runtime cost tracking (interp.py), regular expressions on RE2 (PyPI `google-re2`).

Two environments, as upstream: a new object is checked with the release's gated options only where
their gate is on, a stored one -- and the scheduler's allocator -- with every option of the release.
A compiled selector is cached by its text and features.
"""

from __future__ import annotations

from numalign.k8s.dra.cel.selector import (
    RUNTIME_COST_LIMIT,
    CELFeatures,
    CELRuntimeError,
    CompiledSelector,
    Path,
    attribute_value,
    compile_selector,
    cost_error,
    device_key,
    device_matches,
    device_variables,
    evaluate,
    matches_costed,
)

__all__ = [
    "RUNTIME_COST_LIMIT",
    "CELFeatures",
    "CELRuntimeError",
    "CompiledSelector",
    "Path",
    "attribute_value",
    "compile_selector",
    "cost_error",
    "device_key",
    "device_matches",
    "device_variables",
    "evaluate",
    "matches_costed",
]
