"""numalign.state: the kubelet's checkpoint formats, as pure bytes <-> dataclass codecs.

gospew (go-spew `%#v` for the checkpoint types) and checksum (FNV-1a-32 of that text) reproduce the
kubelet's checksums; gojson reproduces encoding/json where it changes the decoded Go value or the
written bytes; cpu_checkpoint, memory_checkpoint and device_checkpoint are the three files. No I/O
here: numalign.adapters.checkpoints reads and writes the files atomically.
"""
