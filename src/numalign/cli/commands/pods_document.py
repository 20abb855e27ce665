"""What `numalign pods -o json|yaml` prints (docs/schemas/pods.schema.json): the summary first (pods by
status, `numalign run` processes, invalid manifests), then the pods keyed by UID with their allocations,
runtime options and decision records, the manifests, the device plugins' resources, the agent's faults
and the run processes. The agent's status file and the pod record keep their own (snake_case) keys; this
renames them to the one key style of every document (answer/present/keys.py).

Nothing is folded: each pod entry is that pod's own allocation, and a rejected pod carries only its
decision record (no free-capacity table or what-ifs, which is what repeats at scale in `admit`)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any, Final

SCHEMA_VERSION: Final = 1  # of pods' document; docs/changelog.md lists what each version changed

# Maps whose keys are data the status file spells as the runtime does: environment variable names and
# annotation keys are not field names, and stay as written (even with underscores).
_VERBATIM: Final = ("envs", "annotations")


def pods_document(status: Mapping[str, Any], processes: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """`status`: the agent's status document (or the same shape read from state files); `processes`: the
    `numalign run` processes holding allocations in the directory (run/listing.py)."""
    pods = {uid: _pod(entry) for uid, entry in sorted(status["pods"].items())}
    manifests = status.get("manifests") or {}
    by_status = Counter(str(p.get("status")) for p in pods.values())
    summary = {"pods": len(pods), "byStatus": dict(sorted(by_status.items())), "processes": len(processes),
               "invalidManifests": sum(1 for m in manifests.values() if m.get("status") == "invalid")}
    version = {k: status[k] for k in ("kubeletVersion", "previews") if k in status}
    from numalign.answer.present.keys import camel_keys

    # serve's explanation of pods run without their DRA claims (the status file's draUnallocatable, the
    # `dra_unallocatable` fault's why), carried as serve writes it, and on each such pod: absent when none.
    unallocatable = {str(uid): {"pod": str(e.get("pod")), "message": str(e.get("message")),
                                "why": [str(w) for w in e.get("why") or ()]}
                     for uid, e in sorted((status.get("draUnallocatable") or {}).items())}
    for uid, entry in unallocatable.items():
        if uid in pods:
            pods[uid]["draUnallocatable"] = {"message": entry["message"], "why": entry["why"]}
    return {"schemaVersion": SCHEMA_VERSION, "summary": summary, **version, "pods": pods,
            "manifests": camel_keys(manifests), "resources": camel_keys(status.get("resources") or {}),
            "faults": dict(status.get("faults") or {}),
            **({"draUnallocatable": unallocatable} if unallocatable else {}),
            "processes": [camel_keys(dict(p)) for p in processes]}


def _pod(entry: Mapping[str, Any]) -> dict[str, Any]:
    from numalign.answer.present.keys import CAMEL_KEYS, camel_keys

    runtime = entry.get("runtime")
    out: dict[str, Any] = camel_keys({k: v for k, v in entry.items() if k != "runtime"})
    if runtime is not None:
        out["runtime"] = {container: {CAMEL_KEYS.get(k, k): dict(v) if k in _VERBATIM else camel_keys(v)
                                      for k, v in opts.items()}
                          for container, opts in runtime.items()}
    return out
