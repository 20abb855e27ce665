"""A memory manager's state as the JSON of its memory_manager_state file, for tests that write the
file's content by hand (a kubelet's file, a damaged one) or assert on its layout."""

from __future__ import annotations

import json
from typing import Any, Protocol

from numalign.kubelet.memorymanager.checkpoint import decode_memory_checkpoint, encode_memory_checkpoint
from numalign.kubelet.memorymanager.state import MemoryManagerState


class _Manager(Protocol):
    def snapshot(self) -> MemoryManagerState: ...

    def restore(self, state: MemoryManagerState) -> None: ...


def file_document(manager: _Manager) -> dict[str, Any]:
    """The file's JSON object for the manager's state, without "checksum"."""
    doc: dict[str, Any] = json.loads(encode_memory_checkpoint(manager.snapshot()))
    doc.pop("checksum")
    return doc


def restore_document(manager: _Manager, doc: dict[str, Any]) -> None:
    """Restore the manager from a file holding `doc` (and no checksum, which 1.36+ accepts)."""
    data = json.dumps({**doc, "checksum": 0}).encode()
    manager.restore(decode_memory_checkpoint(data, accept_zero_checksum=True))
