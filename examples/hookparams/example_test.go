package main

import "os"

// The output is the proof: a misspelled, a mistyped and a missing parameter
// each fail when the graph loads, naming node, hook, key and the valid keys.
func Example() {
	if err := run(os.Stdout); err != nil {
		panic(err)
	}
	// Output:
	// with {max: 500, ignoreCode: true}: compiles
	// with {max: 500, ignoreCdoe: true}:
	// invalid graph notes.yaml: notes.yaml:8:38: node 'draft': hook 'word-limit' has no parameter 'ignoreCdoe'; valid parameters are: ignoreCode, max
	// with {max: lots}:
	// invalid graph notes.yaml: notes.yaml:8:21: node 'draft': hook 'word-limit' parameter 'max' must be a whole number, not a string
	// with {ignoreCode: true}:
	// invalid graph notes.yaml: notes.yaml:8:15: node 'draft': hook 'word-limit' needs parameter 'max' (a whole number); valid parameters are: ignoreCode, max
}
