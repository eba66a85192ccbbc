// Package hooks holds the hooks the-loop ships: the checks that decide
// "is this step done?" (validate-artifacts, enforces-boundaries-from,
// lint-artifacts, verify-tests, await-inner-loops), the human-gate hooks
// (classify-feedback, lock-artifacts, record-feedback, record-decision,
// post-phase-selection, classify-phase-selection, post-goal-request,
// classify-goal, classify-adhoc-reply) and the side effects
// (set-phase-label, request-review, escalate-on-ticket, notify,
// publish-artifact, log-entry, deliver-assignment, mcp-call). A test holds
// these lists to Specs.
//
// Every hook is a pure function of its graph.HookContext: artifact files come
// through hc.Artifacts, outbound calls through hc.Integrations, programs
// through hc.Commands, the session through hc.Deliver. Under
// graph.ModeCheck none of the last three exist, so a check is pure.
//
// Two rules hold for every hook here:
//   - Untrusted text stays data. Comment bodies are classified, recorded into
//     artifacts verbatim, or kept in result data — never put into a hook's
//     messages, an assignment, or a command line.
//   - Side effects degrade, they do not wedge. An outbound call that fails
//     returns pass with HookResult.Degraded set (the runtime reports it and emits
//     graph.hook_degraded); a hook reference declared `blocking: true` turns
//     that into a block.
//
// Importing the package registers every hook in graph.DefaultRegistry();
// Register adds them to another registry.
package hooks
