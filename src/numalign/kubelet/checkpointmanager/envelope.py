"""The data/dataChecksum envelope of kubelet 1.37's CPU (v4) and memory (v3) state files.

1.37 writes the old layout's fields (so an older kubelet still reads the file after a rollback), plus
`data`: the new content serialized as a JSON string, and `dataChecksum`: checksum.New(data), the
FNV-1a-32 of the spew text of that string. The new content is authoritative; the outer fields are not
read back. A file whose `data` is empty and whose `dataChecksum` is 0 is an older layout, which the
kubelet reads with its older loaders; a file with either set and any fault is refused outright.
"""

from __future__ import annotations

from typing import Any

from numalign.kubelet.checkpointmanager import gojson
from numalign.kubelet.checkpointmanager.checksum import go_checksum
from numalign.kubelet.checkpointmanager.errors import CheckpointDecodeError, CorruptCheckpointError
from numalign.kubelet.checkpointmanager.gospew import CHECKSUM, STRING, Field, Struct

_ENVELOPE = Struct("envelope", (Field("Data", STRING, "data"), Field("DataChecksum", CHECKSUM, "dataChecksum")))


def with_envelope(outer: Struct) -> Struct:
    """The file's struct: the older layout's fields, then data and dataChecksum (Go's inline embedding)."""
    return Struct(outer.name, (*outer.fields, *_ENVELOPE.fields))


def seal(data_type: Struct, data_value: dict[str, Any]) -> dict[str, Any]:
    """The Data and DataChecksum values for this content."""
    data = gojson.encode(data_type, data_value)
    return {"Data": data, "DataChecksum": go_checksum(STRING, data)}


def open_envelope(
    j: Any, outer: Struct, outer_initial: dict[str, Any], data_type: Struct, initial: dict[str, Any], what: str
) -> dict[str, Any] | None:
    """The content of an enveloped file, or None when the file has no envelope (an older layout).

    Raises as 1.37 refuses an enveloped file: its outer JSON (the older layout's fields included) or its
    data does not decode (CheckpointDecodeError), or dataChecksum does not match data
    (CorruptCheckpointError; 0 is a checksum like any other here).
    """
    try:
        env = gojson.decode(with_envelope(outer), j, {**outer_initial, "Data": "", "DataChecksum": 0}, what)
    except CheckpointDecodeError:
        # Go's Unmarshal fills what it can before the type error: the envelope decides only when set.
        if not _has_envelope(j):
            return None
        raise
    if not env["Data"] and not env["DataChecksum"]:
        return None
    try:
        value: dict[str, Any] = gojson.decode(data_type, gojson.parse_json(env["Data"].encode("utf-8")), initial,
                                              f"{what} data")
    except CheckpointDecodeError as e:
        raise CheckpointDecodeError(f"could not load the data of a 1.37 {what} checkpoint: {e}") from e
    actual = go_checksum(STRING, env["Data"])
    if actual != int(env["DataChecksum"]):
        raise CorruptCheckpointError(
            f"checkpoint is corrupted: stored dataChecksum {env['DataChecksum']} does not match the data ({actual})",
            expected=int(env["DataChecksum"]),
            actual=actual,
        )
    return value


def _has_envelope(j: Any) -> bool:
    pairs = dict(gojson.object_pairs(j))
    data, cs = pairs.get("data"), pairs.get("dataChecksum")
    return (isinstance(data, str) and data != "") or (isinstance(cs, int) and not isinstance(cs, bool) and cs != 0)
