//go:build !(k8s133 || k8s134 || k8s135 || k8s136)

package main

import (
	cmachine "github.com/google/cadvisor/lib/machine"
	cinfo "github.com/google/cadvisor/lib/model"
	csysfs "github.com/google/cadvisor/lib/utils/sysfs"
	csysinfo "github.com/google/cadvisor/lib/utils/sysinfo"
)

// 1.37: cadvisor's library module, github.com/google/cadvisor/lib.
// The discover area reads the machine through these names only.
type (
	cMachineInfo = cinfo.MachineInfo
	cHugePages   = cinfo.HugePagesInfo
)

func cTopology() ([]cinfo.Node, int, error) { return cmachine.GetTopology(csysfs.NewRealSysFs()) }

func cHugePagesInfo() ([]cinfo.HugePagesInfo, error) {
	return csysinfo.GetHugePagesInfo(csysfs.NewRealSysFs(), "/sys/kernel/mm/hugepages/")
}

var (
	cMemoryCapacity = cmachine.GetMachineMemoryCapacity
	cPhysicalCores  = cmachine.GetPhysicalCores
	cSockets        = cmachine.GetSockets
)
