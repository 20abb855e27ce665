package main

// kubernetesVersion is the release this harness was built against; conformance/build sets it with
// -ldflags "-X main.kubernetesVersion=v1.X.Y" from the modfile's k8s.io/kubernetes requirement.
var kubernetesVersion = "unknown"
