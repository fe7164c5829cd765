// client.mjs drives errand's AG-UI endpoint with the official client
// (@ag-ui/client's HttpAgent), as a frontend would: it starts a run whose
// task asks a question, then answers the interrupt in a second run that
// follows the task to its end. The client checks every event it gets
// against the AG-UI 1.0 rules and rejects the run on any it refuses.
//
//   node client.mjs <base url of errand> <token>
//
// While a run streams it prints "first-delta <run>" on stdout when the
// first piece of text arrives, so a test can hold the model back until
// then. At the end it prints one line, "result <JSON>", describing what
// each run saw, and exits 0; on any error or client warning it says what
// went wrong on stderr and exits 1.
import { randomUUID } from 'node:crypto';
import { HttpAgent } from '@ag-ui/client';

const [base, token] = process.argv.slice(2);
if (!base || !token) {
  throw new Error('usage: client.mjs <base url> <token>');
}

// The client reports events it cannot apply as warnings, not errors:
// here any warning fails the run.
const warnings = [];
for (const level of ['warn', 'error']) {
  const original = console[level];
  console[level] = (...args) => {
    warnings.push(args.map(String).join(' '));
    original(...args);
  };
}

const agent = new HttpAgent({
  url: `${base}/api/ag-ui`,
  headers: { Authorization: `Bearer ${token}` },
  threadId: `thread-${randomUUID()}`,
  initialMessages: [{ id: randomUUID(), role: 'user', content: 'Plan a trip to Rome' }],
});

// watch records what one run shows its subscriber.
function watch(label) {
  const seen = { types: [], texts: {}, toolCalls: {}, states: [] };
  let announced = false;
  const subscriber = {
    onEvent({ event }) {
      seen.types.push(event.type);
    },
    onTextMessageContentEvent({ event }) {
      seen.texts[event.messageId] = (seen.texts[event.messageId] ?? '') + event.delta;
      if (!announced) {
        announced = true;
        process.stdout.write(`first-delta ${label}\n`);
      }
    },
    onToolCallStartEvent({ event }) {
      seen.toolCalls[event.toolCallId] = { name: event.toolCallName, args: '', parent: event.parentMessageId };
    },
    onToolCallArgsEvent({ event }) {
      seen.toolCalls[event.toolCallId].args += event.delta;
    },
    onToolCallResultEvent({ event }) {
      seen.toolCalls[event.toolCallId].result = event.content;
    },
    onStateSnapshotEvent({ event }) {
      seen.states.push(event.snapshot);
    },
    onRunFinishedEvent({ outcome, result, interrupts }) {
      seen.finished = { outcome, result, interrupts };
    },
    onRunErrorEvent({ event }) {
      seen.error = { message: event.message, code: event.code };
    },
  };
  return { seen, subscriber };
}

const out = { threadId: agent.threadId };

const first = watch('run1');
await agent.runAgent({ forwardedProps: { errand: { agent: 'default' } } }, first.subscriber);
out.run1 = first.seen;
out.pending = agent.pendingInterrupts.map((i) => ({ id: i.id, reason: i.reason, message: i.message, toolCallId: i.toolCallId }));
if (agent.pendingInterrupts.length !== 1) {
  throw new Error(`run 1 ended with ${agent.pendingInterrupts.length} interrupts, want 1: ${JSON.stringify(first.seen.finished)}`);
}

const second = watch('run2');
const { result } = await agent.runAgent(
  { resume: [{ interruptId: agent.pendingInterrupts[0].id, status: 'resolved', payload: 'May' }] },
  second.subscriber,
);
out.run2 = second.seen;
out.result = result;
out.state = agent.state;
out.pendingAfter = agent.pendingInterrupts.length;
out.messages = agent.messages.map((m) => ({
  id: m.id,
  role: m.role,
  content: m.content,
  toolCalls: (m.toolCalls ?? []).map((c) => c.function.name),
  toolCallId: m.toolCallId,
}));

if (warnings.length > 0) {
  process.stderr.write(`the client warned:\n${warnings.join('\n')}\n`);
  process.exit(1);
}
process.stdout.write(`result ${JSON.stringify(out)}\n`);
