// Package loop is the-loop as a product on top of the graph kernel and the
// shipped hooks: the four shipped PDLC graphs (embedded YAML, compiled at
// start-up), the configuration files (the operator's cli-config.yaml, a
// repository's .the-loop/harness-config.yaml and collaborators.yaml), the
// filesystem state store (docs/specs/<id>/graph-state.json under a flock,
// written atomically, never losing a corrupt file), the JSONL event log, and
// Open, which turns a repository checkout into a ready *graph.Runtime.
//
// Boundaries: loop reads and writes the repository's spec tree and theloop's
// own state root; it never runs code from the repository and never reaches
// the network itself — outbound calls go through the graph.Integrations the
// caller injects. Everything here is safe to call from the Stop hook and CI:
// opening a repository and checking a work item does no network I/O and
// starts no subprocess.
package loop
