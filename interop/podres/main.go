// Command podres is the kubelet's own PodResources v1 client (k8s.io/kubernetes
// pkg/kubelet/apis/podresources.GetV1Client over k8s.io/kubelet's generated API) pointed at a
// PodResources socket. It makes the calls an exporter makes (List, GetAllocatableResources, and Get
// for each -get namespace/name) and prints their answers as one JSON object, so numalign's tests can
// compare what a real client decodes from `numalign serve` with `numalign pods`.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	podresourcesapi "k8s.io/kubelet/pkg/apis/podresources/v1"
	"k8s.io/kubernetes/pkg/kubelet/apis/podresources"
)

// The values the kubelet's own callers use (16 MiB messages, as pkg/kubelet/apis/podresources'
// tests and NFD do); the timeout bounds a socket that accepts but never answers.
const (
	maxMsgSize  = 1024 * 1024 * 16
	callTimeout = 10 * time.Second
)

type getList []string

func (g *getList) String() string     { return strings.Join(*g, ",") }
func (g *getList) Set(v string) error { *g = append(*g, v); return nil }

type getAnswer struct {
	Namespace string                        `json:"namespace"`
	Name      string                        `json:"name"`
	Pod       *podresourcesapi.PodResources `json:"pod,omitempty"`
	Error     string                        `json:"error,omitempty"`
}

type output struct {
	List        []*podresourcesapi.PodResources               `json:"list"`
	Allocatable *podresourcesapi.AllocatableResourcesResponse `json:"allocatable"`
	Get         []getAnswer                                   `json:"get"`
}

func main() {
	socket := flag.String("socket", "", "the PodResources socket (a path)")
	var gets getList
	flag.Var(&gets, "get", "namespace/name of a pod to Get (repeatable)")
	flag.Parse()
	if *socket == "" {
		fmt.Fprintln(os.Stderr, "podres: -socket is required")
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	client, conn, err := podresources.GetV1Client(ctx, "unix://"+*socket, callTimeout, maxMsgSize)
	if err != nil {
		fail("GetV1Client", err)
	}
	defer conn.Close()
	out := output{Get: []getAnswer{}}
	list, err := client.List(ctx, &podresourcesapi.ListPodResourcesRequest{})
	if err != nil {
		fail("List", err)
	}
	out.List = list.GetPodResources()
	if out.List == nil {
		out.List = []*podresourcesapi.PodResources{}
	}
	if out.Allocatable, err = client.GetAllocatableResources(ctx, &podresourcesapi.AllocatableResourcesRequest{}); err != nil {
		fail("GetAllocatableResources", err)
	}
	for _, g := range gets {
		ns, name, ok := strings.Cut(g, "/")
		if !ok {
			fmt.Fprintf(os.Stderr, "podres: -get %q: expected namespace/name\n", g)
			os.Exit(2)
		}
		a := getAnswer{Namespace: ns, Name: name}
		resp, err := client.Get(ctx, &podresourcesapi.GetPodResourcesRequest{PodNamespace: ns, PodName: name})
		if err != nil {
			a.Error = err.Error()
		} else {
			a.Pod = resp.GetPodResources()
		}
		out.Get = append(out.Get, a)
	}
	enc := json.NewEncoder(os.Stdout)
	if err := enc.Encode(out); err != nil {
		fail("encode", err)
	}
}

func fail(what string, err error) {
	fmt.Fprintf(os.Stderr, "podres: %s: %v\n", what, err)
	os.Exit(1)
}
