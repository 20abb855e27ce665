"""Dynamic Resource Allocation's API objects (resource.k8s.io/v1): models (types.py), reading and the
API server's validation (read.py, documents.py, podclaims.py), CEL selectors (cel.py, semver.py).
The structured allocator that uses them is numalign.scheduler.dra."""
