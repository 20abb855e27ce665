"""The kubelet's pod admit handlers other than the Topology Manager's: pure functions over a node's
allocatable resources, its conditions and the pods admitted so far (see numalign.kubelet.node for their order)."""
