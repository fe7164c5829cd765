// Package a2a serves the Agent2Agent protocol (A2A) over errand's tasks:
// its JSON-RPC binding in v1.0, with the v0.3 method names as aliases,
// the agent cards, SSE streams and push notifications. errand's task store
// is the A2A task store; this package only translates.
//
// # Versions
//
// One endpoint, POST /a2a, serves both versions: the method name says
// which one a request speaks (SendMessage or message/send, GetTask or
// tasks/get, …) and the answer takes that version's shapes: v1.0's
// protocol-buffer JSON (TASK_STATE_WORKING, ROLE_AGENT, parts as
// {"text"} or {"data"}) or v0.3's kinds ("kind": "task", "working",
// {"kind": "text"}). An A2A-Version header (or X-A2A-Protocol-Version)
// naming a version other than 1.0 and 0.3 is refused with -32009. The
// card at /.well-known/agent-card.json follows the same header: see
// Cards.
//
// # Messages and tasks
//
// A message without a taskId submits an errand task: its text parts,
// one per line, are the goal; its data parts the input (one object part
// as it is, otherwise {"data": [each part]}); file parts are refused with
// -32005. The agent is the one metadata.agent names, in the message's or
// the request's metadata, else Config.DefaultAgent. The contextId is the
// task's session (a new UUID when the message has none); a task with no
// session shows its own id as its context. The messageId is the submit's
// idempotency key ("a2a:" and the id), so a send retried with the same
// message gets the task the first one made.
//
// A message with a taskId answers that task's open question (the task is
// input-required); its text is the answer. To a task in any other state
// it is refused with -32004 (UnsupportedOperation), as is any message to
// a task that has ended.
//
// errand's statuses map onto A2A's states: pending, blocked and
// retry_scheduled are submitted; running, waiting_subtasks and paused
// are working (see stateOf for paused); input_required is input-required;
// completed, failed and cancelled are completed, failed and canceled. The
// status message, from the agent, is the open question of an
// input-required task, the error of a failed or canceled one, or what a
// running task reports doing. The metadata's errand.status keeps errand's
// own status. A completed task's result is its one artifact, "result": its
// output as a text part when it is a string, else a data part. The
// history is the message that made the task, then each question its agent
// asked and the answer it got.
//
// SendMessage waits (unless returnImmediately, or blocking false in v0.3)
// until the task ends or asks a question, at most Config.MaxBlock, then
// answers with the task as it is. CancelTask waits for a running task's
// agent to stop, at most Config.CancelWait.
//
// # Streams
//
// SendStreamingMessage and SubscribeToTask (message/stream,
// tasks/resubscribe) answer with Server-Sent Events: the task, then a
// status update each time its state or status message changes, the
// result as an artifact update just before the completed status, driven
// by the task's events in the journal, read from before the task was
// read. The stream ends once the task has ended or asks a question (v0.3
// marks that update final).
//
// While the task runs, its live output (the model's words as they come)
// reaches the stream as artifact updates, one artifact per call of a step,
// "output-<step>-<call>" (metadata errand.live_output): the first piece
// with append false, the next with append true; a client that joins or
// falls behind mid-call gets the call's text so far, append false, which
// replaces what it had. An empty piece with lastChunk closes the artifact
// once the step is recorded. These artifacts are not the task's: GetTask
// shows only the result.
//
// # Push notifications
//
// A task's push configs (url, token, authentication) are kept in the
// store; writing one journals a2a.push_config_set, so a config made after
// the task's last change still hears where it stands. PushSource turns
// journal events into pushes, one per change of what a config was last
// told (state or status message), for a webhook.PushDispatcher, which
// delivers them as webhooks are delivered: from a durable cursor, retried
// with a backoff, with the Standard Webhooks headers (signed with the
// config's token, read as a webhook secret), never to a private address
// unless Config.AllowPrivate. Each push carries the token in
// X-A2A-Notification-Token and, with authentication, an Authorization
// header.
//
// # Traces
//
// With Config.Traces (the daemon exports traces), the W3C traceparent
// header of a SendMessage or SendStreamingMessage (message/send,
// message/stream) that submits a task is kept with it, as on POST
// /api/tasks: the task's run becomes a child of the caller's span. A
// header that is not a valid traceparent, or is repeated, is ignored;
// it never fails the request. An answer to a task's question starts no
// run and keeps nothing.
//
// # Errors
//
// Malformed requests get JSON-RPC's codes (-32700, -32600, -32601,
// -32602 naming the field), an unknown task -32001, a task that has
// ended -32002 on cancel, and errand's own failures -32603 (logged). A
// body is at most Config.MaxBodyBytes (413 above), valid UTF-8, one
// request: batches are refused. A params field that the method, in the
// version its name speaks, does not have is -32602 naming it (v0.3's
// pushNotificationConfig sent to v1.0's SendMessage, a misspelt option)
// and nothing is done: ignored, it would drop what the client asked for
// without a word. A v0.3 name with v0.3's fields, or a v1.0 name with
// v1.0's, is served as before.
package a2a
