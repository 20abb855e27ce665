"""The kubelet version numalign decides a harness release as."""

from __future__ import annotations

import functools
import sys

from numalign.errors import InvalidInputError
from numalign.k8s.version import KubeletVersion


@functools.cache
def kubelet_version(version: str) -> KubeletVersion:
    """The release itself; a patch numalign does not model yet is decided as its minor, said once."""
    try:
        return KubeletVersion.parse(version)
    except InvalidInputError:
        minor = version.rsplit(".", 1)[0]
        print(f"conformance: numalign does not model {version}; decided as {minor} (its newest modelled patch)",
              file=sys.stderr)
        return KubeletVersion.parse(minor)
