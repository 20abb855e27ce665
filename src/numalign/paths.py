"""The kubelet's default paths and periods, in a module with no imports of its own.

The CLI's argument parsers need these defaults at start-up; keeping them here spares
`numalign --help` from importing gRPC and the agent just to print a default.
"""

from __future__ import annotations

from pathlib import Path

# kubelet --root-dir; the state files (cpu_manager_state, memory_manager_state, ...) live here.
DEFAULT_STATE_DIR = Path("/var/lib/kubelet")
# upstream pluginapi.DevicePluginPath; kubelet.sock is served inside it.
DEFAULT_DEVICE_PLUGIN_DIR = Path("/var/lib/kubelet/device-plugins")
# upstream podresources socket: <root-dir>/pod-resources/kubelet.sock
DEFAULT_POD_RESOURCES_SOCKET = Path("/var/lib/kubelet/pod-resources/kubelet.sock")
# upstream endpointStopGracePeriod (5 minutes), in seconds.
ENDPOINT_STOP_GRACE_PERIOD = 300.0
# numalign's own data files (built-in pods, kubelet configurations, cluster examples), shipped in the package.
DATA_DIR = Path(__file__).resolve().parent / "data"
