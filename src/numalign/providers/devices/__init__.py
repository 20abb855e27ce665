"""numalign.providers.devices."""
