// Command harness answers conformance cases with the real upstream Kubernetes packages of one release.
//
// It reads JSON lines {"id": ..., "area": ..., "case": {...}} on standard input and writes one line
// {"id": ..., "answer": ...} or {"id": ..., "error": "..."} per case, in order. The numalign side answers
// the same cases (tests/conformance); scripts/conformance compares the two.
//
// A case that has used -hang-after-cpu of CPU time (or a request's own hang_after_cpu) without returning
// is answered {"hang": true} and the harness exits 3: the goroutine is still running the real code (k/k
// #140730 loops for ever), and only a new process can continue. scripts/conformance restarts it after
// that case. CPU time, not wall time: a spinning loop is told from slow progress by the work done, so
// a machine at load 25 gives the same answers as an idle one. -hang-after (wall time) is the backstop
// for a case blocked without spinning.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"runtime/debug"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"
)

// An area answers one kind of case with the real packages. Its answer must be a plain JSON value.
type area func(raw json.RawMessage) (any, error)

var areas = map[string]area{}

func register(name string, a area) { areas[name] = a }

type request struct {
	ID   string          `json:"id"`
	Area string          `json:"area"`
	Case json.RawMessage `json:"case"`
	// HangAfterCPU overrides -hang-after-cpu for this case (a Go duration): a named case known to hang
	// (k/k #140730) is given a short bound, so that it cannot stall a run.
	HangAfterCPU string `json:"hang_after_cpu,omitempty"`
}

type response struct {
	ID     string `json:"id"`
	Answer any    `json:"answer,omitempty"`
	Error  string `json:"error,omitempty"`
}

type outcome struct {
	answer any
	err    error
}

func main() {
	hangAfterCPU := flag.Duration("hang-after-cpu", 20*time.Second,
		"answer a case that has used this much CPU time without returning with {\"hang\": true} and exit 3 (k/k #140730)")
	hangAfter := flag.Duration("hang-after", 10*time.Minute,
		"as -hang-after-cpu, in wall time: for a case blocked without using CPU")
	list := flag.Bool("areas", false, "print the areas this harness answers and its Kubernetes version, then exit")
	flag.Parse()
	// The managers log every allocation at V(0); the answers are the output, not the log.
	klog.SetLogger(logr.Discard())
	if *list {
		names := make([]string, 0, len(areas))
		for n := range areas {
			names = append(names, n)
		}
		sort.Strings(names)
		fmt.Printf("{\"kubernetes\": %q, \"areas\": [\"%s\"]}\n", kubernetesVersion, strings.Join(names, "\", \""))
		return
	}
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 0, 1<<20), 64<<20)
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	enc := json.NewEncoder(out)
	for in.Scan() {
		line := in.Bytes()
		if len(strings.TrimSpace(string(line))) == 0 {
			continue
		}
		var req request
		if err := json.Unmarshal(line, &req); err != nil {
			fmt.Fprintf(os.Stderr, "harness: a line of standard input is not a case: %v\n", err)
			os.Exit(2)
		}
		a, ok := areas[req.Area]
		if !ok {
			_ = enc.Encode(response{ID: req.ID, Error: fmt.Sprintf("harness: no area %q at Kubernetes %s", req.Area, kubernetesVersion)})
			continue
		}
		cpuLimit := *hangAfterCPU
		if req.HangAfterCPU != "" {
			d, err := time.ParseDuration(req.HangAfterCPU)
			if err != nil {
				fmt.Fprintf(os.Stderr, "harness: case %s: hang_after_cpu %q is not a duration: %v\n", req.ID, req.HangAfterCPU, err)
				os.Exit(2)
			}
			cpuLimit = d
		}
		done := make(chan outcome, 1)
		go func() {
			defer func() {
				if r := recover(); r != nil {
					if os.Getenv("HARNESS_PANIC_STACK") != "" { // where upstream panicked, for a reproduction
						fmt.Fprintf(os.Stderr, "harness: case %s panicked: %v\n%s", req.ID, r, debug.Stack())
					}
					done <- outcome{err: fmt.Errorf("panic: %v", r)}
				}
			}()
			ans, err := a(req.Case)
			done <- outcome{answer: ans, err: err}
		}()
		o, hung := wait(done, cpuLimit, *hangAfter)
		if hung {
			_ = enc.Encode(response{ID: req.ID, Answer: map[string]bool{"hang": true}})
			out.Flush()
			os.Exit(3)
		}
		resp := response{ID: req.ID, Answer: o.answer}
		if o.err != nil {
			resp = response{ID: req.ID, Error: o.err.Error()}
		}
		if err := enc.Encode(resp); err != nil {
			fmt.Fprintf(os.Stderr, "harness: cannot write an answer: %v\n", err)
			os.Exit(2)
		}
		out.Flush()
	}
	if err := in.Err(); err != nil {
		fmt.Fprintf(os.Stderr, "harness: reading standard input: %v\n", err)
		os.Exit(2)
	}
}

// cpuTime is the CPU time the process has used (user and system).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// wait is the case's outcome, or hung when the process has used cpuLimit of CPU time since the case
// started (what a spinning upstream loop uses up, whatever the machine's load), or wallLimit has passed.
func wait(done <-chan outcome, cpuLimit, wallLimit time.Duration) (outcome, bool) {
	start := cpuTime()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	wall := time.After(wallLimit)
	for {
		select {
		case o := <-done:
			return o, false
		case <-tick.C:
			if cpuTime()-start >= cpuLimit {
				return outcome{}, true
			}
		case <-wall:
			return outcome{}, true
		}
	}
}
