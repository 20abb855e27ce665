"""A Node's state directory: the kubelet's three state files plus numalign's pod record, read as a
NodeState and written from one, in the order numalign.kubelet.nodestate gives, only when they changed,
under the directory's transaction lock.

Layout (the kubelet's, so a kubelet pointed at the directory reads our files and we read its):
cpu_manager_state, memory_manager_state, device-plugins/kubelet_internal_checkpoint, and
numalign_pods.json; numalign.lock and numalign-owner.lock (adapters.statelock) beside them.

Beside the NodeState, the directory keeps `numalign run`'s process records (`processes`, by pod uid: an
entry's `process` in the pod record), read with every load and written with every commit, so a record
changes in the same transaction as its pod; the run layer (run/records.py) is their one reader and
writer, the Node never sees them.

"Changed" is judged on the state, not the bytes: a file is rewritten when the manager's state differs
from what this process last read (as the node adopted it) or wrote there, so a kubelet-written file is
not rewritten for its formatting alone, and a write that failed is tried again at the next commit.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from numalign.adapters.statedir.draclaims import claims_path, read_claims
from numalign.adapters.statedir.files import (
    CheckpointFileError,
    CheckpointStore,
    path_kind_problem,
    read_checkpoint,
    write_atomic,
)
from numalign.adapters.statedir.layout import POD_RECORD_FILE
from numalign.adapters.statedir.locks import transaction
from numalign.adapters.statedir.podrecord import (
    PodEntry,
    PodRecord,
    decode_pod_record,
    encode_pod_record,
)
from numalign.errors import CheckpointError, InvalidInputError
from numalign.k8s.manifest import pod_from_dict
from numalign.k8s.pod import pod_to_manifest
from numalign.k8s.version import KubeletVersion
from numalign.kubelet.cpumanager.checkpoint import CPUManagerCheckpoint
from numalign.kubelet.cpumanager.state import CPUManagerState
from numalign.kubelet.dramanager.state import HeldClaim, reconcile
from numalign.kubelet.state import AdmittedPod, NodeState

log = logging.getLogger("numalign.state")

_Fingerprint = tuple[int, int, int, int] | None
_T = TypeVar("_T")


class StateDirectory:
    """NodeStore over one directory. `read_only`: read under the shared lock, never write (--dry-run,
    `pods`, `nrt` on a live node's directory)."""

    def __init__(
        self,
        state_dir: str | os.PathLike[str],
        *,
        read_only: bool = False,
        before_write: Callable[[str], None] | None = None,
        kubelet_version: KubeletVersion | None = None,
    ) -> None:
        """`before_write(what)` is called right before each write ("record", or a kubelet file's key:
        "cpu", "memory", "devices"): the crash tests stop a commit there, as SIGKILL would.
        `kubelet_version`: the release whose kubelet files these are (the layout it reads and writes;
        CheckpointStore); give the node's."""
        self.state_dir = Path(state_dir)
        self.read_only = read_only
        self.before_write = before_write
        self.files = CheckpointStore.under(self.state_dir, kubelet_version=kubelet_version)
        self.record_path = self.state_dir / POD_RECORD_FILE
        self.record: PodRecord | None = None  # as last read or written; None: no file
        self._fingerprint: _Fingerprint = None
        # Per kubelet file, the manager state it holds as far as this process knows (None: no file).
        self._disk: dict[str, Any] = {"cpu": None, "memory": None, "devices": None}
        # `numalign run`'s process per pod uid, as last loaded and changed since (see the module's docstring).
        self.processes: dict[str, Mapping[str, Any]] = {}

    @property
    def name(self) -> str:
        return str(self.state_dir)

    @property
    def device_checkpoint(self) -> str:
        return str(self.files.device_path)

    def lock(self) -> contextlib.AbstractContextManager[None]:
        return transaction(self.state_dir, shared=self.read_only)

    # ---- reading ---------------------------------------------------------------------------------
    def load(self, *, cpu_policy: str | None = None, memory_policy: str | None = None) -> NodeState:
        record = self._read_record()
        # The kubelet opens both managers' checkpoints whatever the policy (the none policies included),
        # so a file written under another policy is refused here too, never silently ignored.
        cp = self.files.load_cpu(policy_name=cpu_policy)
        cpu = None if cp is None else CPUManagerState.from_strings(cp.policy_name, cp.default_cpu_set, cp.entries,
                                                                  baselines=cp.baselines)
        mcp = self.files.load_memory(policy_name=memory_policy)
        dcp = self.files.load_devices()
        state = NodeState(self._pods(record), cpu, None if mcp is None else mcp.state(),
                          None if dcp is None else dcp.state(), recorded=record is not None,
                          claims=self._claims(record))
        self.record = record
        self.processes = {e.uid: e.process for e in record.pods if e.process is not None} if record else {}
        self._disk = {"cpu": state.cpu, "memory": state.memory, "devices": state.devices}
        return state

    def adopted(self, state: NodeState) -> None:
        self._disk = {"cpu": _if_read(self._disk["cpu"], state.cpu),
                      "memory": _if_read(self._disk["memory"], state.memory),
                      "devices": _if_read(self._disk["devices"], state.devices)}

    def _read_record(self) -> PodRecord | None:
        self._fingerprint = _stat(self.record_path)
        data = read_checkpoint(self.record_path)
        if data is None:
            return None
        try:
            return decode_pod_record(data)
        except CheckpointError as e:
            raise CheckpointFileError(self._record_problem(str(e)), path=self.record_path, reason=e) from None

    def _claims(self, record: PodRecord | None) -> tuple[HeldClaim, ...]:
        """The record's claims; for a record written before claims joined it, the old claims file's."""
        if record is None:
            return ()
        if record.claims is not None:
            return record.claims
        return tuple(read_claims(self.state_dir))  # one line naming the file when it cannot be read

    def _record_problem(self, what: str) -> str:
        return (f"{self.record_path}: cannot read numalign's pod record: {what}; expected the file numalign wrote; "
                f"fix: restore it from backup, or remove it together with the kubelet state files in "
                f"{self.state_dir} to start from an empty node")

    def _pods(self, record: PodRecord | None) -> tuple[AdmittedPod, ...]:
        out = []
        for i, entry in enumerate(record.pods if record else ()):
            try:
                pod = pod_from_dict(entry.manifest, f"pods[{i}].manifest")
            except (InvalidInputError, ValueError, TypeError, RecursionError) as e:
                raise CheckpointError(self._record_problem(str(e))) from None
            if pod.uid != entry.uid:
                raise CheckpointError(self._record_problem(
                    f"pods[{i}]: the manifest's uid {pod.uid[:80]!r} differs from the entry's {entry.uid[:80]!r}"))
            out.append(AdmittedPod(pod, entry.allocation))
        return tuple(out)

    def changed(self) -> bool:
        now = _stat(self.record_path)
        if now == self._fingerprint:
            return False
        if now is None or self.record is None:
            return True
        try:
            data = read_checkpoint(self.record_path)
            generation = decode_pod_record(data).generation if data is not None else -1
        except CheckpointError:
            return True  # the reload reports it
        if generation != self.record.generation:
            return True
        self._fingerprint = now
        return False

    # ---- writing ---------------------------------------------------------------------------------
    def commit(self, state: NodeState) -> None:
        # A process record goes with its pod, however the pod left (released, or dropped on reconcile).
        for uid in set(self.processes) - {a.pod.uid for a in state.pods}:
            del self.processes[uid]
        if self.read_only:
            return
        entries = tuple(PodEntry(a.pod.uid, pod_to_manifest(a.pod), a.allocation, self.processes.get(a.pod.uid))
                        for a in state.pods)
        docs = {"devices": state.devices, "cpu": state.cpu, "memory": state.memory}
        stale = [k for k, doc in docs.items() if doc != self._disk[k]]
        old = self.record.pods if self.record is not None else None
        old_claims = self.record.claims if self.record is not None else None
        if not stale and old == entries and old_claims == state.claims:
            return
        wrote_record = False
        if old is not None and {e.uid for e in old} - {e.uid for e in entries}:
            # A removal commits before its release: the record first, so a crash can only leave
            # allocations no pod claims (released on the next open), never a pod without its allocations.
            # Its claims are the new state's reserved by the pods it keeps: a removed (or replaced) pod's
            # claims go with it, a new pod's come with it in the last write.
            new = {e.uid for e in entries}
            kept = tuple(e for e in old if e.uid in new)
            self._write_record(kept, tuple(reconcile(state.claims, {e.uid for e in kept})))
            wrote_record = True
        for key in stale:
            self._write_file(key, docs[key])
        if not wrote_record or self.record is None or self.record.pods != entries or \
                self.record.claims != state.claims:
            # An admission commits here, after the kubelet files hold its allocations: the pod and the
            # claims it reserves in one atomic write.
            self._write_record(entries, state.claims)

    def _write_record(self, pods: tuple[PodEntry, ...], claims: tuple[HeldClaim, ...]) -> None:
        if self.before_write is not None:
            self.before_write("record")
        generation = (self.record.generation if self.record is not None else 0) + 1
        record = PodRecord(generation, pods, claims)
        self.state_dir.mkdir(parents=True, exist_ok=True)
        write_atomic(self.record_path, encode_pod_record(record))
        self.record = record
        self._fingerprint = _stat(self.record_path)
        # The record holds the claims now; the file earlier versions kept them in is no longer read.
        with contextlib.suppress(OSError):  # left behind, it is never read again (the record has claims)
            claims_path(self.state_dir).unlink()

    def _write_file(self, key: str, doc: Any) -> None:
        if doc is None:  # nothing to write (a state without that manager's model)
            return
        if self.before_write is not None:
            self.before_write(key)
        if key == "cpu":
            policy, default, entries = doc.to_strings()
            self.files.save_cpu(CPUManagerCheckpoint(policy, default, entries, baselines=doc.baseline_strings()),
                                force=True)
        elif key == "memory":
            self.files.save_memory(doc, force=True)
        else:
            self.files.save_devices(doc, force=True)
        self._disk[key] = doc


def _stat(path: Path) -> _Fingerprint:
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _if_read(read: object, adopted: _T | None) -> _T | None:
    """What a file holds as far as this process knows: nothing when there was no file to read."""
    return None if read is None else adopted


def read_pod_record(state_dir: str | os.PathLike[str]) -> PodRecord | None:
    """numalign_pods.json read and checked as a StateDirectory reads it (None: no file), for a reader that
    wants the record without opening a Node; the caller holds the directory's lock."""
    return StateDirectory(state_dir, read_only=True)._read_record()


def state_directory(
    state_dir: str | os.PathLike[str] | None,
    *,
    read_only: bool = False,
    kubelet_version: KubeletVersion | None = None,
) -> StateDirectory | None:
    """The store for an optional --state-dir (None: the node lives in memory only), its kubelet files in
    the layout of `kubelet_version` (the node's)."""
    return None if state_dir is None else StateDirectory(state_dir, read_only=read_only,
                                                         kubelet_version=kubelet_version)


def check_state_dir(state_dir: str | os.PathLike[str]) -> None:
    """Refuse, before any lock is taken, a --state-dir that is a file or lies under one."""
    problem = path_kind_problem(Path(state_dir) / "cpu_manager_state")
    if problem is not None:
        raise CheckpointError(f"cannot use --state-dir {state_dir}: {problem}")
