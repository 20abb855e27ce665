// Command harness answers conformance cases with the real upstream Kubernetes packages of one release.
//
// It reads JSON lines {"id": ..., "area": ..., "case": {...}} on standard input and writes one line
// {"id": ..., "answer": ...} or {"id": ..., "error": "..."} per case, in order. The numalign side answers
// the same cases (tests/conformance); scripts/conformance compares the two.
//
// A case that does not return within -hang-after is answered {"hang": true} and the harness exits 3:
// the goroutine is still running the real code (k/k #140730 loops for ever), and only a new process
// can continue. scripts/conformance restarts it after that case.
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
	hangAfter := flag.Duration("hang-after", 20*time.Second,
		"answer a case that has not returned by then with {\"hang\": true} and exit 3 (k/k #140730)")
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
		select {
		case o := <-done:
			resp := response{ID: req.ID, Answer: o.answer}
			if o.err != nil {
				resp = response{ID: req.ID, Error: o.err.Error()}
			}
			if err := enc.Encode(resp); err != nil {
				fmt.Fprintf(os.Stderr, "harness: cannot write an answer: %v\n", err)
				os.Exit(2)
			}
		case <-time.After(*hangAfter):
			_ = enc.Encode(response{ID: req.ID, Answer: map[string]bool{"hang": true}})
			out.Flush()
			os.Exit(3)
		}
		out.Flush()
	}
	if err := in.Err(); err != nil {
		fmt.Fprintf(os.Stderr, "harness: reading standard input: %v\n", err)
		os.Exit(2)
	}
}
