package main

// The "checkpoint" area: the kubelet's three state files, both ways, through the real code that writes
// and reads them (cpumanager/state, memorymanager/state, devicemanager/checkpoint, checkpointmanager).
// A case gives a state and, optionally, a file's bytes. The answer is
//   - written: the bytes the real state code writes for that state (a fresh checkpoint directory,
//     the state set through the State interface as the managers set it, each set storing the file);
//   - reread: what the real code restores from the file it wrote;
//   - read: what it restores from the given file (numalign-written, corrupted or foreign), or how it
//     refuses it: {"refused": class, "text": the error}.

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/kubernetes/pkg/kubelet/checkpointmanager"
	cpustate "k8s.io/kubernetes/pkg/kubelet/cm/cpumanager/state"
	"k8s.io/kubernetes/pkg/kubelet/cm/devicemanager/checkpoint"
	memstate "k8s.io/kubernetes/pkg/kubelet/cm/memorymanager/state"
	"k8s.io/utils/cpuset"
)

const (
	cpuCheckpointName    = "cpu_manager_state"
	memoryCheckpointName = "memory_manager_state"
	deviceCheckpointName = "kubelet_internal_checkpoint"
)

type checkpointCase struct {
	Kind       string          `json:"kind"` // cpu, memory, device
	Policy     string          `json:"policy"`
	ReadPolicy string          `json:"read_policy"` // the policy configured when the file is read
	Gates      map[string]bool `json:"gates"`
	State      json.RawMessage `json:"state"`
	File       *string         `json:"file"` // bytes to read; null: none
}

type cpuCheckpointState struct {
	Default string                       `json:"default"`
	Entries map[string]map[string]string `json:"entries"`
}

type memoryCheckpointState struct {
	Machine memstate.NUMANodeMap                `json:"machine"`
	Entries memstate.ContainerMemoryAssignments `json:"entries"`
}

type deviceEntry struct {
	Pod       string             `json:"pod"`
	Container string             `json:"container"`
	Resource  string             `json:"resource"`
	Devices   map[int64][]string `json:"devices"`
	AllocResp string             `json:"alloc_resp"` // base64
}

type deviceCheckpointState struct {
	Entries    []deviceEntry       `json:"entries"`
	Registered map[string][]string `json:"registered"`
}

func init() { register("checkpoint", checkpointArea) }

func checkpointArea(raw json.RawMessage) (any, error) {
	var c checkpointCase
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, fmt.Errorf("checkpoint case: %w", err)
	}
	restore, err := withGates(c.Gates)
	if err != nil {
		return map[string]string{"start_error": err.Error()}, nil
	}
	defer restore()
	dir, err := os.MkdirTemp(scratchDir(), "checkpoint-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	switch c.Kind {
	case "cpu":
		return cpuCheckpoint(c, dir)
	case "memory":
		return memoryCheckpoint(c, dir)
	case "device":
		return deviceCheckpoint(c, dir)
	}
	return nil, fmt.Errorf("checkpoint case: unknown kind %q", c.Kind)
}

// scratchDir is where the state files go: tmpfs when the machine has one, since the checkpoint store
// syncs every write and a case writes a file per state change.
func scratchDir() string {
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		if f, err := os.CreateTemp("/dev/shm", "probe-"); err == nil {
			f.Close()
			os.Remove(f.Name())
			return "/dev/shm"
		}
	}
	return ""
}

// refusal is how the real code refused a file: the class numalign's refusal must have, and the text.
func refusal(err error) map[string]string {
	text := err.Error()
	class := "decode"
	switch {
	case strings.Contains(text, "checkpoint is corrupted"):
		class = "corrupt"
	case strings.Contains(text, "configured policy"):
		class = "policy"
	case strings.Contains(text, "could not parse"):
		class = "cpuset"
	case strings.Contains(text, "migrate"):
		class = "migrate"
	}
	return map[string]string{"refused": class, "text": text}
}

func writeFile(dir, name string, data *string) (string, error) {
	sub, err := os.MkdirTemp(dir, "read-")
	if err != nil {
		return "", err
	}
	return sub, os.WriteFile(filepath.Join(sub, name), []byte(*data), 0o600)
}

func cpuView(st cpustate.State) cpuCheckpointState {
	out := cpuCheckpointState{Default: st.GetDefaultCPUSet().String(), Entries: map[string]map[string]string{}}
	for pod, ctrs := range st.GetCPUAssignments() {
		out.Entries[pod] = map[string]string{}
		for name, set := range ctrs {
			out.Entries[pod][name] = set.String()
		}
	}
	return out
}

func cpuCheckpoint(c checkpointCase, dir string) (any, error) {
	var s cpuCheckpointState
	if err := json.Unmarshal(c.State, &s); err != nil {
		return nil, fmt.Errorf("cpu state: %w", err)
	}
	answer := map[string]any{}
	st, err := openCPUState(dir, cpuCheckpointName, c.Policy)
	if err != nil {
		return nil, fmt.Errorf("a fresh cpu state: %w", err)
	}
	def, err := cpuset.Parse(s.Default)
	if err != nil {
		return nil, err
	}
	st.SetDefaultCPUSet(def)
	for pod, ctrs := range s.Entries {
		for name, text := range ctrs {
			set, err := cpuset.Parse(text)
			if err != nil {
				return nil, err
			}
			st.SetCPUSet(pod, name, set)
		}
	}
	written, err := os.ReadFile(filepath.Join(dir, cpuCheckpointName))
	if err != nil {
		return nil, err
	}
	answer["written"] = string(written)
	if again, err := openCPUState(dir, cpuCheckpointName, c.Policy); err != nil {
		answer["reread"] = refusal(err)
	} else {
		answer["reread"] = cpuView(again)
	}
	if c.File != nil {
		sub, err := writeFile(dir, cpuCheckpointName, c.File)
		if err != nil {
			return nil, err
		}
		if st, err := openCPUState(sub, cpuCheckpointName, c.ReadPolicy); err != nil {
			answer["read"] = refusal(err)
		} else {
			answer["read"] = cpuView(st)
		}
	}
	return answer, nil
}

func memoryView(st memstate.State) memoryCheckpointState {
	return memoryCheckpointState{Machine: st.GetMachineState(), Entries: st.GetMemoryAssignments()}
}

func memoryCheckpoint(c checkpointCase, dir string) (any, error) {
	var s memoryCheckpointState
	if err := json.Unmarshal(c.State, &s); err != nil {
		return nil, fmt.Errorf("memory state: %w", err)
	}
	answer := map[string]any{}
	st, err := openMemoryState(dir, memoryCheckpointName, c.Policy)
	if err != nil {
		return nil, fmt.Errorf("a fresh memory state: %w", err)
	}
	st.SetMachineState(s.Machine)
	for pod, ctrs := range s.Entries {
		for name, blocks := range ctrs {
			st.SetMemoryBlocks(pod, name, blocks)
		}
	}
	written, err := os.ReadFile(filepath.Join(dir, memoryCheckpointName))
	if err != nil {
		return nil, err
	}
	answer["written"] = string(written)
	if again, err := openMemoryState(dir, memoryCheckpointName, c.Policy); err != nil {
		answer["reread"] = refusal(err)
	} else {
		answer["reread"] = memoryView(again)
	}
	if c.File != nil {
		sub, err := writeFile(dir, memoryCheckpointName, c.File)
		if err != nil {
			return nil, err
		}
		if st, err := openMemoryState(sub, memoryCheckpointName, c.ReadPolicy); err != nil {
			answer["read"] = refusal(err)
		} else {
			answer["read"] = memoryView(st)
		}
	}
	return answer, nil
}

func deviceView(cp checkpoint.DeviceManagerCheckpoint) deviceCheckpointState {
	entries, registered := cp.GetData()
	out := deviceCheckpointState{Entries: []deviceEntry{}, Registered: registered}
	for _, e := range entries {
		out.Entries = append(out.Entries, deviceEntry{
			Pod: e.PodUID, Container: e.ContainerName, Resource: e.ResourceName,
			Devices: e.DeviceIDs, AllocResp: base64.StdEncoding.EncodeToString(e.AllocResp),
		})
	}
	return out
}

// readDevices reads a device checkpoint as the device manager's readCheckpoint does: a fresh
// checkpoint.New(nil, nil), then GetCheckpoint (unmarshal, verify the checksum).
func readDevices(cm checkpointmanager.CheckpointManager) (any, error) {
	cp := checkpoint.New(nil, nil)
	if err := cm.GetCheckpoint(deviceCheckpointName, cp); err != nil {
		return refusal(err), nil
	}
	return deviceView(cp), nil
}

func deviceCheckpoint(c checkpointCase, dir string) (any, error) {
	var s deviceCheckpointState
	if err := json.Unmarshal(c.State, &s); err != nil {
		return nil, fmt.Errorf("device state: %w", err)
	}
	var entries []checkpoint.PodDevicesEntry
	for _, e := range s.Entries {
		resp, err := base64.StdEncoding.DecodeString(e.AllocResp)
		if err != nil {
			return nil, err
		}
		entries = append(entries, checkpoint.PodDevicesEntry{
			PodUID: e.Pod, ContainerName: e.Container, ResourceName: e.Resource,
			DeviceIDs: checkpoint.DevicesPerNUMA(e.Devices), AllocResp: resp,
		})
	}
	cm, err := checkpointmanager.NewCheckpointManager(dir)
	if err != nil {
		return nil, err
	}
	if err := cm.CreateCheckpoint(deviceCheckpointName, checkpoint.New(entries, s.Registered)); err != nil {
		return nil, err
	}
	written, err := os.ReadFile(filepath.Join(dir, deviceCheckpointName))
	if err != nil {
		return nil, err
	}
	answer := map[string]any{"written": string(written)}
	if answer["reread"], err = readDevices(cm); err != nil {
		return nil, err
	}
	if c.File != nil {
		sub, err := writeFile(dir, deviceCheckpointName, c.File)
		if err != nil {
			return nil, err
		}
		other, err := checkpointmanager.NewCheckpointManager(sub)
		if err != nil {
			return nil, err
		}
		if answer["read"], err = readDevices(other); err != nil {
			return nil, err
		}
	}
	return answer, nil
}
