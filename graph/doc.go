// Package graph is theloop's process kernel: it decides where a work item is
// in a process graph and whether it may move.
//
// A graph is declared data: nodes with ordered entry and exit hook chains,
// and edges keyed on the outcome of a node's exit chain. Package
// graph/graphfile reads graph files (YAML validated against the JSON Schema
// graph/graphfile/graph.schema.json) into a [File]; a program may also build
// a File in code, as theloop does for its shipped graphs. [Compile] checks every structural rule once and
// binds hook names to the functions in a [Registry]; the result, a
// [*Graph], is immutable and safe to share between goroutines.
//
// A [*Runtime] walks work items through a compiled graph: [Runtime.Start],
// [Runtime.Complete] (an agent's claim that a node's work is done),
// [Runtime.Advance] (re-evaluate the current node, optionally with an inbound
// event such as a reviewer's comment), [Runtime.Status] (the report that
// `loopctl check` prints), [Runtime.Force] (the audited escape hatch) and
// [Runtime.DeclareSkips]. The daemon, `loopctl`, the `loop-gate` Stop hook and
// CI all call these same methods.
//
// Facts, not instructions. A hook reports what the runtime acts on in typed
// fields of its [HookResult] — Route (the edge), Degraded (a failed side
// effect), Decision (a [DecisionFact]: a human decision and its provenance)
// — and keeps Data for the later hooks of its chain. The runtime's errors are
// sentinels in one block and typed values ([*UnknownNodeError]) to branch on
// with errors.Is and errors.As; a state lock that stays held is [ErrBusy]
// from every verb. Which command gets a user past an error is the caller's
// to say (package loop's ExplainGraphError says it for theloop's CLI and
// API). Events are named by the Event* constants.
//
// Lifecycle. A Runtime owns no goroutine and needs no Close: open one per
// work item if that suits you. Hooks run on one small process-wide worker
// pool whose parked goroutines exit after a while without work.
//
// Hook parameters. A [HookSpec] declares the `with:` keys its hook reads
// ([Param]: name, [ParamType], required). Compile refuses an unknown key, a
// value of the wrong type and a missing required key, naming the node, the
// hook, the key and the valid keys; graphfile.SchemaFor puts the same
// declarations in the JSON Schema for editors. A spec whose Params is nil has
// not declared them and its values pass unchecked ([NoParams] declares none).
//
// Boundaries. The package does no I/O: it imports nothing that touches files,
// processes or the network. Everything outside the process reaches it through
// interfaces supplied by the embedder: graph-state persistence ([Store]), the
// work item's artifact files ([Artifacts]), outbound integrations
// ([Integrations]), time ([Clock]), observations ([Sink]) and audit trails
// ([Auditor]). The graph/graphtest package provides in-memory versions of each
// for tests and embedders.
//
// Guarantees that callers rely on:
//   - A hook that panics, returns an error status, or outlives its deadline is
//     a non-retriable block, never a pass.
//   - State is saved before the entry chain of a newly entered node runs.
//   - Gates read only the [Event] handed to Advance; claims (Complete) carry
//     no event, so a human gate can never be passed by a claim.
//   - Status with recompute ignores the stored pointer, parking and forced
//     flags and derives the current node from the artifacts and the recorded
//     human decisions alone.
package graph
