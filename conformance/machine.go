package main

import (
	"encoding/json"
	"fmt"
	"strconv"
)

// The kubelet hands the managers cadvisor's machine info, whose Go package moved in 1.37 (info/v1 to
// lib/model) with the same JSON form. The harness builds it as JSON and decodes it into whatever type
// the release's function takes (inferred from the function's signature, see compat_topology_*.go), so no
// file imports either cadvisor package and `go mod tidy` (which reads every build tag) adds none.

type numaNodeJSON struct {
	ID        int      `json:"node_id"`
	Distances []uint64 `json:"distances"`
}

// machineNUMANodes is MachineInfo.Topology as the Topology Manager reads it: each NUMA node's id and
// its row of distances (none when the case gives none, as cadvisor without the sysfs file).
func machineNUMANodes(ids []int, distances map[string][]int) ([]byte, error) {
	nodes := make([]numaNodeJSON, 0, len(ids))
	for _, id := range ids {
		n := numaNodeJSON{ID: id}
		if distances != nil {
			row, ok := distances[strconv.Itoa(id)]
			if !ok {
				return nil, fmt.Errorf("machine: no distances for NUMA node %d", id)
			}
			for _, d := range row {
				n.Distances = append(n.Distances, uint64(d))
			}
		}
		nodes = append(nodes, n)
	}
	return json.Marshal(nodes)
}

func decodeJSON[T any](data []byte) (T, error) {
	var v T
	err := json.Unmarshal(data, &v)
	return v, err
}
