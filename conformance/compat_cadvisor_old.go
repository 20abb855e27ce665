//go:build k8s133 || k8s134 || k8s135 || k8s136

package main

import (
	cinfo "github.com/google/cadvisor/info/v1"
	cmachine "github.com/google/cadvisor/machine"
	csysfs "github.com/google/cadvisor/utils/sysfs"
	csysinfo "github.com/google/cadvisor/utils/sysinfo"
)

// 1.33 to 1.36: cadvisor's packages in the github.com/google/cadvisor module.
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
