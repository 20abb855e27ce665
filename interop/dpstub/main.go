// Command dpstub runs the kubelet's own device-plugin test stub (k8s.io/kubernetes
// pkg/kubelet/cm/devicemanager/plugin/v1beta1.NewDevicePluginStub, the plugin server the kubelet's
// device manager tests use) against a kubelet's device-plugin directory: it serves its socket,
// registers with kubelet.sock, re-registers when kubelet.sock is created again (the stub's own
// Watch), and stops on SIGTERM or SIGINT.
//
// Each call the kubelet side makes that the stub lets us observe is appended to -events as one JSON
// line (written whole, then synced), so a test can wait for a line instead of a moment:
//
//	{"event":"registered"}                      after a Register call succeeded
//	{"event":"reregister"}                      kubelet.sock was created again; registering anew
//	{"event":"preferred","request":{...}}       GetPreferredAllocation (the answer is in "response")
//	{"event":"allocate","request":{...}}        Allocate (the answer is in "response")
//
// The preferred allocation is deliberate, so a test can tell it was honoured: the must-include
// devices, then the available ones in descending ID order. Allocate answers one environment
// variable per container, STUB_DEVICES=<the IDs, comma-separated>.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"k8s.io/klog/v2"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	plugin "k8s.io/kubernetes/pkg/kubelet/cm/devicemanager/plugin/v1beta1"
)

type events struct {
	mu   sync.Mutex
	path string
}

func (e *events) add(v map[string]any) {
	line, err := json.Marshal(v)
	if err != nil {
		fail("encode event", err)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	f, err := os.OpenFile(e.path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		fail("events file", err)
	}
	defer f.Close()
	if _, err := f.Write(append(line, '\n')); err != nil {
		fail("events file", err)
	}
	if err := f.Sync(); err != nil {
		fail("events file", err)
	}
}

// parseDevices reads "id@numa,id@numa,id" (a device without @ has no topology).
func parseDevices(s string) ([]*pluginapi.Device, error) {
	var devs []*pluginapi.Device
	for _, item := range strings.Split(s, ",") {
		id, numa, hasNUMA := strings.Cut(strings.TrimSpace(item), "@")
		if id == "" {
			return nil, fmt.Errorf("-devices %q: an empty device ID (expected id@numa,...)", s)
		}
		d := &pluginapi.Device{ID: id, Health: pluginapi.Healthy}
		if hasNUMA {
			n, err := strconv.ParseInt(numa, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("-devices %q: NUMA node %q of %s is not an integer", s, numa, id)
			}
			d.Topology = &pluginapi.TopologyInfo{Nodes: []*pluginapi.NUMANode{{ID: n}}}
		}
		devs = append(devs, d)
	}
	return devs, nil
}

func main() {
	dir := flag.String("plugin-dir", "", "the kubelet's device-plugin directory (holds kubelet.sock)")
	resource := flag.String("resource", "example.com/gpu", "the extended resource name")
	endpoint := flag.String("endpoint", "stub.sock", "this plugin's socket name in -plugin-dir")
	devices := flag.String("devices", "", "the devices: id@numa,id@numa,...")
	eventsPath := flag.String("events", "", "the file the observed calls are appended to")
	flag.Parse()
	if *dir == "" || *devices == "" || *eventsPath == "" {
		fmt.Fprintln(os.Stderr, "dpstub: -plugin-dir, -devices and -events are required")
		os.Exit(2)
	}
	devs, err := parseDevices(*devices)
	if err != nil {
		fmt.Fprintln(os.Stderr, "dpstub:", err)
		os.Exit(2)
	}
	ev := &events{path: *eventsPath}
	logger := klog.Background()
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), logger))
	defer cancel()

	kubeletSock := filepath.Join(*dir, filepath.Base(pluginapi.KubeletSocket))
	stub := plugin.NewDevicePluginStub(logger, devs, filepath.Join(*dir, *endpoint), *resource, true, true)
	stub.SetGetPreferredAllocFunc(func(r *pluginapi.PreferredAllocationRequest, _ map[string]*pluginapi.Device) (*pluginapi.PreferredAllocationResponse, error) {
		resp := &pluginapi.PreferredAllocationResponse{}
		for _, c := range r.ContainerRequests {
			ids := slices.Clone(c.MustIncludeDeviceIDs)
			rest := slices.Clone(c.AvailableDeviceIDs)
			slices.Sort(rest)
			slices.Reverse(rest)
			for _, id := range rest {
				if len(ids) >= int(c.AllocationSize) {
					break
				}
				if !slices.Contains(ids, id) {
					ids = append(ids, id)
				}
			}
			resp.ContainerResponses = append(resp.ContainerResponses, &pluginapi.ContainerPreferredAllocationResponse{DeviceIDs: ids})
		}
		ev.add(map[string]any{"event": "preferred", "request": r, "response": resp})
		return resp, nil
	})
	stub.SetAllocFunc(func(r *pluginapi.AllocateRequest, _ map[string]*pluginapi.Device) (*pluginapi.AllocateResponse, error) {
		resp := &pluginapi.AllocateResponse{}
		for _, c := range r.ContainerRequests {
			resp.ContainerResponses = append(resp.ContainerResponses, &pluginapi.ContainerAllocateResponse{
				Envs: map[string]string{"STUB_DEVICES": strings.Join(c.DevicesIds, ",")},
			})
		}
		ev.add(map[string]any{"event": "allocate", "request": r, "response": resp})
		return resp, nil
	})
	// The stub asks this before it registers again after kubelet.sock was re-created.
	stub.SetRegisterControlFunc(func() bool {
		ev.add(map[string]any{"event": "reregister"})
		return true
	})

	if err := stub.Start(ctx); err != nil {
		fail("start", err)
	}
	if err := stub.Register(ctx, kubeletSock, *resource, ""); err != nil {
		fail("register", err)
	}
	ev.add(map[string]any{"event": "registered"})
	go stub.Watch(ctx, kubeletSock, *resource, "")

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
	if err := stub.Stop(logger); err != nil {
		fail("stop", err)
	}
}

func fail(what string, err error) {
	fmt.Fprintf(os.Stderr, "dpstub: %s: %v\n", what, err)
	os.Exit(1)
}
