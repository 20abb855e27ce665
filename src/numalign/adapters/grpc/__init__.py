"""numalign.adapters.grpc."""
