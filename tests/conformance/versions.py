"""The kubelet version numalign decides a harness release as: the release itself."""

from __future__ import annotations

import functools

from numalign.k8s.version import KubeletVersion


@functools.cache
def kubelet_version(version: str) -> KubeletVersion:
    """The harness's release (conformance/modfiles lists the newest patch of each minor, which numalign
    models as its newest: a release it refuses is a difference to fix, not to paper over)."""
    return KubeletVersion.parse(version)
