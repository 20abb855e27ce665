package main

import (
	"bytes"
	"encoding/json"
	"sort"
)

// Go ranges over a map in an order that changes from one range statement to the next: where upstream
// ranges over a map and its answer depends on the order (which of several bad options an error names,
// which pool the 1.34/1.35 DRA allocator searches first), one run sees one of the answers the kubelet or
// scheduler can give. The areas call the same thing several times and answer with every distinct result.

// mapOrderTries is how often a call whose error depends on Go's map order is repeated to see every
// text it can give. A small map's iteration starts at a random slot, so one order may come up only
// once in 8 tries: 32 tries missed it about once in a hundred such cases; 1,024 do not.
const mapOrderTries = 1024

// everyMapOrder calls try `tries` times and returns each distinct result it gave (compared by their JSON
// text), `known` ones included, sorted by that text. A call whose ok is false gave no result (the error
// it walks for did not happen this time).
func everyMapOrder[T any](tries int, try func(i int) (T, bool), known ...T) []T {
	seen := map[string]T{}
	add := func(v T) {
		seen[jsonText(v)] = v
	}
	for _, v := range known {
		add(v)
	}
	for i := 0; i < tries; i++ {
		if v, ok := try(i); ok {
			add(v)
		}
	}
	keys := make([]string, 0, len(seen))
	for k := range seen {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]T, 0, len(keys))
	for _, k := range keys {
		out = append(out, seen[k])
	}
	return out
}

// jsonText is v's JSON text without HTML escaping (so strings sort as their text does).
func jsonText(v any) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic(err) // the areas' answers are plain JSON values
	}
	return b.String()
}

// startErrorAnswer is a set-up error's answer: its text, and every text when map order gave several.
func startErrorAnswer(texts []string) map[string]any {
	if len(texts) == 1 {
		return map[string]any{"start_error": texts[0]}
	}
	return map[string]any{"start_error": texts[0], "start_error_map_order": texts}
}

// errorText is a retried call's result: its error text, and whether it failed this time.
func errorText(err error) (string, bool) {
	if err == nil {
		return "", false
	}
	return err.Error(), true
}
