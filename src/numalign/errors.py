"""Error types. Every message says what went wrong, where, what was expected and how to fix it.

The CLI is the only place these become exit codes; library users catch them by type.
"""

from __future__ import annotations


class NumalignError(Exception):
    """Root of every error numalign raises on purpose."""


class InvalidInputError(NumalignError, ValueError):
    """A value a user gave us (manifest, option, config, vector line) is not valid."""


class DiscoveryError(NumalignError):
    """The machine's topology could not be read (sysfs, cadvisor JSON, machine file)."""


class CheckpointError(NumalignError):
    """A state file is corrupt, mismatches the configuration, or cannot be written."""


class AllocationError(NumalignError):
    """A hint provider could not allocate what it promised.

    `reason` is what the kubelet reports as the pod's admission failure reason: a provider error
    with a `Type()` in Go (e.g. SMTAlignmentError) keeps that type; anything else is reported as
    UnexpectedAdmissionError by the admission layer.
    """

    reason: str | None = None

    def __init__(self, message: str, *, reason: str | None = None) -> None:
        super().__init__(message)
        if reason is not None:
            self.reason = reason


class PluginError(NumalignError):
    """A device plugin misbehaved or could not be reached."""


class EmptyAllocateError(PluginError):
    """A device plugin answered Allocate with no container response (the kubelet's device manager says
    so in its own words and, unlike for a failing call, keeps the devices taken)."""


class ConfigError(InvalidInputError):
    """A kubelet configuration value or manager option is invalid (kubelet wording kept)."""
