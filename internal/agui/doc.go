// Package agui maps an errand task onto AG-UI 1.0, the event protocol
// agent frontends speak (CopilotKit and the @ag-ui/client HttpAgent): it
// reads a RunAgentInput (ParseInput) and turns what the task does into the
// events of one run (Run). It does no I/O; internal/server feeds it.
//
// The mapping:
//
//   - A run starts with RUN_STARTED and a STATE_SNAPSHOT of the task
//     (task_id, status, progress, the plan from its checkpoint); another
//     snapshot follows each change of these.
//   - Each errand step is an AG-UI step "step N", opened by the first
//     thing seen of it and finished when a later step opens or the run
//     ends.
//   - The live output of a call (task.output.delta) is a text message
//     msg-<task>-<step>-<call>: started by its first piece, ended by the
//     call's record (task.step). The record's text beyond what streamed is
//     sent before the end, so a call that streamed nothing, or a client
//     that fell behind, still gets the whole text; the concatenated deltas
//     always equal the recorded text.
//   - A tool call, question or subtask record is a tool call
//     call-<task>-<step>-<call> (start, its input as the arguments, end)
//     under the step's message, then TOOL_CALL_RESULT with its output. A
//     question's result is the person's answer, which the interrupt asks
//     for: it has none.
//   - The run ends with RUN_FINISHED (outcome success, result the task's
//     result) when the task completes; RUN_FINISHED with outcome interrupt
//     when it asks a person, the interrupt's id being the question's
//     request id (inp_…); RUN_FINISHED with outcome cancelled when someone
//     cancels it; RUN_ERROR when it fails.
//
// Invariants a client checks and Run keeps: RUN_STARTED comes first;
// messages and steps open and close in pairs and are all closed before the
// run ends; nothing follows the end.
package agui
