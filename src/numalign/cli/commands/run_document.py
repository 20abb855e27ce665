"""What `numalign run -o json|yaml` prints on stderr (docs/schemas/run.schema.json): the summary first
(the pod, admitted or not, the kubelet's reason), then the kubelet version, the decision record as
admit's document has it, where COMMAND was placed and the cgroup made (admitted only), and what the run
noted. Keys in the one style of every document (answer/present/keys.py); environment variables keep
their names."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

SCHEMA_VERSION: Final = 1  # of run's document; docs/changelog.md lists what each version changed


@dataclass(frozen=True)
class RunDocument:
    """`record`: the decision record's dict (DecisionRecord.to_dict()); `version`: versionargs'
    version_fields; `placement` and `cgroup`: an admitted container's, None when it was rejected."""

    record: Mapping[str, Any]
    version: Mapping[str, Any]
    numalign_pid: int
    notes: Sequence[str] = ()
    released_ended_runs: Sequence[str] = ()
    not_applied: Sequence[str] = ()
    placement: Mapping[str, Any] | None = None
    cgroup: Mapping[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        from numalign.answer.present.keys import camel_keys

        result = self.record["result"]
        summary = {"pod": self.record["pod"], "admitted": bool(result["admit"]), "reason": result["reason"],
                   "message": result["message"]}
        out: dict[str, Any] = {"schemaVersion": SCHEMA_VERSION, "summary": summary, **self.version,
                               "decision": camel_keys(dict(self.record))}
        if self.placement is not None:
            out["placement"] = {k: (dict(v) if k == "env" else v) for k, v in self.placement.items()}
        if self.cgroup is not None:
            out["cgroup"] = camel_keys(dict(self.cgroup))
        return {**out, "notes": list(self.notes), "numalignPID": self.numalign_pid,
                "releasedEndedRuns": list(self.released_ended_runs), "notApplied": list(self.not_applied)}
