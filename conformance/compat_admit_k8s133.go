//go:build k8s133 || k8s134

package main

import (
	"context"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	"k8s.io/kubernetes/pkg/kubelet/cm/containermap"
	"k8s.io/kubernetes/pkg/kubelet/cm/cpumanager"
	"k8s.io/kubernetes/pkg/kubelet/cm/devicemanager"
	plugin "k8s.io/kubernetes/pkg/kubelet/cm/devicemanager/plugin/v1beta1"
	"k8s.io/kubernetes/pkg/kubelet/cm/topologymanager"
	"k8s.io/kubernetes/pkg/kubelet/lifecycle"
	"k8s.io/kubernetes/pkg/kubelet/nodestatus"
	schedulerframework "k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/utils/cpuset"
)

// 1.33 and 1.34: no loggers (the memory manager takes a context in 1.34: compat_admit_mem_*.go);
// cadvisor's info/v1 MachineInfo.

type newDMFunc[T any] func(T, topologymanager.Store) (*devicemanager.ManagerImpl, error)

func callNewDM[T any](f newDMFunc[T], nodes []byte, tm topologymanager.Manager) (*devicemanager.ManagerImpl, error) {
	topo, err := decodeJSON[T](nodes)
	if err != nil {
		return nil, err
	}
	return f(topo, tm)
}

func newDeviceManager(nodes []byte, tm topologymanager.Manager) (*devicemanager.ManagerImpl, error) {
	return callNewDM(devicemanager.NewManagerImpl, nodes, tm)
}
func startDeviceManager(dm *devicemanager.ManagerImpl, active func() []*v1.Pod) error {
	return dm.Start(active, sourcesReady{}, containermap.NewContainerMap(), sets.New[string]())
}
func stopDeviceManager(dm *devicemanager.ManagerImpl) { _ = dm.Stop() }
func stopStub(s *plugin.Stub)                         { _ = s.Stop() }
func newStub(devs []*pluginapi.Device, socket, resource string) *plugin.Stub {
	return plugin.NewDevicePluginStub(devs, socket, resource, false, true)
}
func startStub(_ context.Context, s *plugin.Stub) error { return s.Start() }
func registerStub(_ context.Context, s *plugin.Stub, resource string) error {
	return s.Register(pluginapi.KubeletSocket, resource, pluginapi.DevicePluginPath)
}
func updateAllocatedDevices(dm *devicemanager.ManagerImpl) { dm.UpdateAllocatedDevices() }
func dmCapacity(dm *devicemanager.ManagerImpl) (v1.ResourceList, v1.ResourceList, []string) {
	return dm.GetCapacity()
}

func newCPUManager(policy string, options map[string]string, m *cMachineInfo, reserved cpuset.CPUSet,
	reservation v1.ResourceList, dir string, tm topologymanager.Manager) (cpumanager.Manager, error) {
	return cpumanager.NewManager(policy, options, reconcilePeriod, m, reserved, reservation, dir, tm)
}
func startCPUManager(_ context.Context, m cpumanager.Manager, active func() []*v1.Pod) error {
	return m.Start(active, sourcesReady{}, noStatus{}, noRuntime{}, containermap.NewContainerMap())
}
func cpuAddContainer(m cpumanager.Manager, pod *v1.Pod, c *v1.Container, id string) {
	m.AddContainer(pod, c, id)
}

func handlerAdmit(_ context.Context, h lifecycle.PodAdmitHandler, attrs *lifecycle.PodAdmitAttributes) lifecycle.PodAdmitResult {
	return h.Admit(attrs)
}

func newPredicateHandler(node func() *v1.Node, dm *devicemanager.ManagerImpl) lifecycle.PodAdmitHandler {
	return lifecycle.NewPredicateAdmitHandler(func() (*v1.Node, error) { return node(), nil },
		lifecycle.NewAdmissionFailureHandlerStub(),
		func(n *schedulerframework.NodeInfo, a *lifecycle.PodAdmitAttributes) error {
			return dm.UpdatePluginResources(n, a)
		})
}

func nodeStatus(m *cMachineInfo, maxPods int, dm *devicemanager.ManagerImpl, reserved v1.ResourceList) *v1.Node {
	node := &v1.Node{}
	node.Name = "node"
	node.Labels = map[string]string{v1.LabelOSStable: "linux", v1.LabelHostname: "node"}
	setter := nodestatus.MachineInfo("node", maxPods, 0,
		func() (*cMachineInfo, error) { return m, nil },
		func(bool) v1.ResourceList { return nil },
		func() (v1.ResourceList, v1.ResourceList, []string) { return dm.GetCapacity() },
		func() v1.ResourceList { return reserved },
		func(string, string, string) {},
		false)
	_ = setter(context.Background(), node)
	return node
}
