"""Codec-level checkpoint errors. They name what is wrong inside the bytes; the file adapter adds the
path and the kubelet's fix (drain the node, delete the file, restart)."""

from __future__ import annotations

from numalign.errors import CheckpointError


class CheckpointDecodeError(CheckpointError):
    """The bytes are not JSON, or a JSON value has the wrong type for the kubelet's Go struct."""


class CorruptCheckpointError(CheckpointError):
    """The stored checksum does not match the content (kubelet: "checkpoint is corrupted")."""

    def __init__(self, message: str, *, expected: int, actual: int) -> None:
        super().__init__(message)
        self.expected = expected  # the checksum stored in the file
        self.actual = actual  # the checksum computed over the content


class PolicyMismatchError(CheckpointError):
    """The checkpoint was written by a different manager policy than the one configured now."""


class MigrationError(CheckpointError):
    """A legacy checkpoint could not be converted to the current format."""
