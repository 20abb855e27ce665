"""The conformance harness's Python side: cases, numalign's answers, the comparison (scripts/conformance).

The Go side (conformance/ at the repository root) answers the same cases with the real upstream
packages of each supported kubelet release; see conformance/README.md.
"""
