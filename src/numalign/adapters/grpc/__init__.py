"""numalign.adapters.grpc: the kubelet's gRPC surfaces over unix sockets.

- registration: RegistrationServer, the v1beta1.Registration service on <dir>/kubelet.sock, and
  cleanup_plugin_directory (stale-socket removal at start).
- plugin_client: PluginEndpointClient, the kubelet's client for one plugin (implements the device
  manager's Endpoint protocol; follows ListAndWatch).
- podresources: PodResourcesServer, the v1.PodResourcesLister service, reading a PodResourcesSource.
- convert: protobuf <-> numalign.kubelet.devicemanager.endpoint dataclasses.
- sockets: unix-socket helpers (0600/0660 sockets, blocking dial with a deadline).
- gen: code generated from proto/ by scripts/gen-protos (committed; do not edit).

The plugin side (serving DevicePlugin, registering) is numalign.deviceplugin.
"""
