"""Every file a state directory holds, named once.

The kubelet's own files keep the kubelet's names and places, so a kubelet pointed at the directory
reads numalign's files and numalign reads the kubelet's (the device checkpoint lives in the device
plugins' socket directory, as the kubelet keeps it there whatever --root-dir says). numalign's files
sit beside them with a `numalign` prefix.
"""

from __future__ import annotations

# the kubelet's checkpoints (cpumanager, memorymanager, devicemanager)
CPU_MANAGER_STATE_FILE = "cpu_manager_state"
MEMORY_MANAGER_STATE_FILE = "memory_manager_state"
DEVICE_PLUGINS_DIR = "device-plugins"
DEVICE_MANAGER_CHECKPOINT_FILE = "kubelet_internal_checkpoint"  # in DEVICE_PLUGINS_DIR

# numalign's: the pods it admitted (statedir.podrecord), the node it was given (`admit --state-dir`),
# the ResourceClaims it allocated there (statedir.draclaims), the agent's status (`numalign serve`),
# and the two locks (statedir.locks)
POD_RECORD_FILE = "numalign_pods.json"
NODE_RECORD_FILE = "numalign_node.json"
DRA_CLAIMS_FILE = "numalign_dra_claims.json"
STATUS_FILE = "numalign_status.json"
TRANSACTION_LOCK_FILE = "numalign.lock"
OWNER_LOCK_FILE = "numalign-owner.lock"

# the kubelet's files, relative to the directory (what a snapshot of a node copies)
KUBELET_STATE_FILES = (
    CPU_MANAGER_STATE_FILE,
    MEMORY_MANAGER_STATE_FILE,
    f"{DEVICE_PLUGINS_DIR}/{DEVICE_MANAGER_CHECKPOINT_FILE}",
)
