package main

import "os"

func Example() {
	if err := run(os.Stdout); err != nil {
		panic(err)
	}
	// Output:
	// start                        pass    at draft
	// claim draft (no section)     block   at draft
	//     required section is missing: Changes (docs/specs/release-7/notes.md)
	// claim draft                  pass    at sign-off
	//     advanced to sign-off
	// claim the human gate         wait    at sign-off
	// approval arrives             pass    at shipped
	//     advanced to shipped
	// check --recompute: current=shipped ok=true
	//     draft     pass
	//     sign-off  pass
	//     shipped   pass
}
