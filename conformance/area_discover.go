package main

// The "discover" area: cadvisor's machine info and the CPU manager's topology.Discover on a sysfs dump.
// cadvisor reads fixed paths (/sys/devices/system/..., /sys/kernel/mm/hugepages, /proc/meminfo,
// /proc/cpuinfo), so each case runs in a child process of this harness in its own mount namespace,
// with the dump's sys/ bind-mounted over /sys and its proc/meminfo and proc/cpuinfo over /proc's (an
// empty file where the dump has none). The child prints the answer; nothing outside it sees the mounts.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"syscall"
)

const discoverChildFlag = "-discover-child"

type discoverCase struct {
	Root string `json:"root"` // an extracted dump: holds sys/ and usually proc/
}

type cacheOut struct {
	ID    int `json:"id"`
	Level int `json:"level"`
}

type coreOut struct {
	CoreID       int        `json:"core_id"`
	Threads      []int      `json:"thread_ids"`
	SocketID     int        `json:"socket_id"`
	UncoreCaches []cacheOut `json:"uncore_caches"`
}

type hugePagesOut struct {
	PageSize uint64 `json:"page_size"`
	NumPages uint64 `json:"num_pages"`
}

type nodeOut struct {
	ID        int            `json:"node_id"`
	Memory    uint64         `json:"memory"`
	HugePages []hugePagesOut `json:"hugepages"`
	Cores     []coreOut      `json:"cores"`
	Caches    []cacheOut     `json:"caches"`
	Distances []uint64       `json:"distances"`
}

// discoverAnswer is the part of MachineInfo the kubelet reads (capacity, the managers' NUMA and CPU
// views) and the CPU manager's topology. Cache sizes and types, core-private caches and the
// rest of MachineInfo (disks, network, cloud) are left out: no kubelet decision reads them.
type discoverAnswer struct {
	NumCores         int            `json:"num_cores"`
	NumPhysicalCores int            `json:"num_physical_cores"`
	NumSockets       int            `json:"num_sockets"`
	MemoryCapacity   any            `json:"memory_capacity"` // bytes, or {"error": ...}
	HugePages        any            `json:"hugepages"`       // machine level, or {"error": ...}
	Topology         []nodeOut      `json:"topology"`
	TopologyError    string         `json:"topology_error,omitempty"`
	Discover         map[string]any `json:"discover"`
}

func init() {
	register("discover", discoverArea)
	if len(os.Args) == 3 && os.Args[1] == discoverChildFlag {
		os.Exit(discoverChild(os.Args[2]))
	}
}

func discoverArea(raw json.RawMessage) (any, error) {
	var c discoverCase
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, fmt.Errorf("discover case: %w", err)
	}
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self, discoverChildFlag, c.Root)
	// A new mount namespace for the child alone (Go makes its mounts private before exec).
	cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS}
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("discover child on %s: %v: %s", c.Root, err, errOut.String())
	}
	var answer any
	if err := json.Unmarshal(out.Bytes(), &answer); err != nil {
		return nil, fmt.Errorf("discover child on %s printed no answer: %v", c.Root, err)
	}
	return answer, nil
}

// bindOver mounts src (or an empty file when the dump has none) over target.
func bindOver(src, target, scratch string) error {
	if _, err := os.Stat(src); err != nil {
		src = filepath.Join(scratch, "empty-"+filepath.Base(target))
		if err := os.WriteFile(src, nil, 0o644); err != nil {
			return err
		}
	}
	if err := syscall.Mount(src, target, "", syscall.MS_BIND|syscall.MS_REC, ""); err != nil {
		return fmt.Errorf("bind %s over %s: %w", src, target, err)
	}
	return nil
}

func discoverChild(root string) int {
	scratch, err := os.MkdirTemp("", "discover-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer os.RemoveAll(scratch)
	for _, m := range [][2]string{{"sys", "/sys"}, {"proc/meminfo", "/proc/meminfo"}, {"proc/cpuinfo", "/proc/cpuinfo"}} {
		if err := bindOver(filepath.Join(root, m[0]), m[1], scratch); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
	}
	answer := readMachine()
	if err := json.NewEncoder(os.Stdout).Encode(answer); err != nil {
		return 2
	}
	return 0
}

func sortedCaches(in []cacheOut) []cacheOut {
	sort.Slice(in, func(i, j int) bool { return in[i].ID < in[j].ID || (in[i].ID == in[j].ID && in[i].Level < in[j].Level) })
	return in
}

func hugePagesOf(in []cHugePages) []hugePagesOut {
	out := []hugePagesOut{}
	for _, h := range in {
		out = append(out, hugePagesOut{PageSize: h.PageSize, NumPages: h.NumPages})
	}
	return out
}

// readMachine reads the machine as cadvisor's machine.Info does for the fields the kubelet uses, then
// runs topology.Discover on the result as the CPU manager does at start-up.
func readMachine() discoverAnswer {
	var a discoverAnswer
	cpuinfo, _ := os.ReadFile("/proc/cpuinfo")
	a.NumPhysicalCores = cPhysicalCores(cpuinfo)
	a.NumSockets = cSockets(cpuinfo)
	if mem, err := cMemoryCapacity(); err != nil {
		a.MemoryCapacity = map[string]string{"error": err.Error()}
	} else {
		a.MemoryCapacity = mem
	}
	hp, err := cHugePagesInfo()
	if err != nil {
		a.HugePages = map[string]string{"error": err.Error()}
	} else {
		a.HugePages = hugePagesOf(hp)
	}
	nodes, numCores, err := cTopology()
	if err != nil {
		a.TopologyError = err.Error() // machine.Info logs it and goes on with what it has
	}
	a.NumCores = numCores
	a.Topology = []nodeOut{}
	for _, n := range nodes {
		no := nodeOut{ID: n.Id, Memory: n.Memory, HugePages: hugePagesOf(n.HugePages), Cores: []coreOut{},
			Caches: []cacheOut{}, Distances: n.Distances}
		for _, c := range n.Caches {
			no.Caches = append(no.Caches, cacheOut{ID: c.Id, Level: c.Level})
		}
		no.Caches = sortedCaches(no.Caches)
		for _, core := range n.Cores {
			co := coreOut{CoreID: core.Id, Threads: core.Threads, SocketID: core.SocketID, UncoreCaches: []cacheOut{}}
			for _, c := range core.UncoreCaches {
				co.UncoreCaches = append(co.UncoreCaches, cacheOut{ID: c.Id, Level: c.Level})
			}
			co.UncoreCaches = sortedCaches(co.UncoreCaches)
			no.Cores = append(no.Cores, co)
		}
		a.Topology = append(a.Topology, no)
	}
	mi := cMachineInfo{NumCores: numCores, NumPhysicalCores: a.NumPhysicalCores, NumSockets: a.NumSockets, Topology: nodes}
	if mem, ok := a.MemoryCapacity.(uint64); ok {
		mi.MemoryCapacity = mem
	}
	topo, err := discoverTopology(&mi)
	if err != nil {
		a.Discover = map[string]any{"error": err.Error()}
		return a
	}
	cpus := [][5]int{}
	for cpu, d := range topo.CPUDetails {
		cpus = append(cpus, [5]int{cpu, d.NUMANodeID, d.SocketID, d.CoreID, d.UncoreCacheID})
	}
	sort.Slice(cpus, func(i, j int) bool { return cpus[i][0] < cpus[j][0] })
	a.Discover = map[string]any{
		"num_cpus": topo.NumCPUs, "num_cores": topo.NumCores, "num_sockets": topo.NumSockets,
		"num_numa_nodes": topo.NumNUMANodes, "num_uncore_cache": topo.NumUncoreCache, "cpus": cpus,
	}
	return a
}
