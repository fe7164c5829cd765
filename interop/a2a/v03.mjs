// v03.mjs drives errand's A2A server with the official A2A v0.3 client
// (@a2a-js/sdk 0.3, installed as a2a-sdk-v03) from the card URL, as a v0.3
// agent would: send and wait, read the task, stream one, resubscribe to
// one, cancel one, answer a question, and keep a push config.
//
//   node v03.mjs <base url of errand> <token>
//
// The daemon's agents are those v1.mjs needs. It prints one JSON line
// describing what it saw on stdout and exits 0, or says what went wrong on
// stderr and exits 1.
import { randomUUID } from 'node:crypto';
import { A2AClient } from 'a2a-sdk-v03/client';

const [base, token] = process.argv.slice(2);
if (!base || !token) {
  throw new Error('usage: v03.mjs <base url> <token>');
}

const fetchImpl = (url, init = {}) => {
  const headers = new Headers(init.headers);
  headers.set('Authorization', `Bearer ${token}`);
  return fetch(url, { ...init, headers });
};

// The card of a request that names no A2A version is the v0.3 one.
const client = await A2AClient.fromCardUrl(`${base}/.well-known/agent-card.json`, { fetchImpl });
const card = await client.getAgentCard();

function message(words, extra = {}) {
  return { kind: 'message', messageId: randomUUID(), role: 'user', parts: [{ kind: 'text', text: words }], ...extra };
}

// result unwraps a JSON-RPC answer, or fails with its error.
function result(res) {
  if (res.error) throw new Error(`${res.error.code}: ${res.error.message}`);
  return res.result;
}

const text = (part) => (part?.kind === 'text' ? part.text : undefined);
const out = {
  card: { protocolVersion: card.protocolVersion, url: card.url, transport: card.preferredTransport, streaming: card.capabilities.streaming },
};

const done = result(await client.sendMessage({ message: message('say hello') }));
out.send = { kind: done.kind, id: done.id, context: done.contextId, state: done.status.state, artifact: text(done.artifacts?.[0]?.parts[0]) };

const got = result(await client.getTask({ id: done.id }));
out.get = { kind: got.kind, state: got.status.state };

out.stream = [];
for await (const ev of client.sendMessageStream({ message: message('stream it') })) {
  if (ev.kind === 'task') out.stream.push(`task ${ev.status.state}`);
  if (ev.kind === 'status-update') out.stream.push(`status ${ev.status.state}${ev.final ? ' final' : ''}`);
  if (ev.kind === 'artifact-update') out.stream.push(`artifact ${text(ev.artifact.parts[0])}`);
}

// Resubscribe to a running task, then cancel it: the stream ends with it.
const slow = result(await client.sendMessage({
  message: message('take forever', { metadata: { agent: 'slow' } }),
  configuration: { blocking: false },
}));
out.resubscribe = [];
const stream = client.resubscribeTask({ id: slow.id });
const first = await stream.next();
out.resubscribe.push(`${first.value.kind} ${first.value.status.state}`);
const cancelled = result(await client.cancelTask({ id: slow.id }));
for await (const ev of stream) {
  out.resubscribe.push(`${ev.kind} ${ev.status.state}${ev.final ? ' final' : ''}`);
}
out.cancel = { state: cancelled.status.state };
const again = await client.cancelTask({ id: slow.id });
out.cancelAgain = again.error?.code;

const asking = result(await client.sendMessage({ message: message('greet me', { metadata: { agent: 'asker' } }) }));
out.ask = { state: asking.status.state, role: asking.status.message?.role, question: text(asking.status.message?.parts[0]) };
const answered = result(await client.sendMessage({ message: message('Grace', { taskId: asking.id, contextId: asking.contextId }) }));
out.answer = { id: answered.id, state: answered.status.state, artifact: text(answered.artifacts?.[0]?.parts[0]) };

const set = result(await client.setTaskPushNotificationConfig({
  taskId: slow.id,
  pushNotificationConfig: { url: 'https://hooks.example.invalid/a2a', token: 'tok-3' },
}));
const read = result(await client.getTaskPushNotificationConfig({ id: slow.id }));
const listed = result(await client.listTaskPushNotificationConfig({ id: slow.id }));
result(await client.deleteTaskPushNotificationConfig({ id: slow.id, pushNotificationConfigId: set.pushNotificationConfig.id }));
out.push = { url: read.pushNotificationConfig.url, token: read.pushNotificationConfig.token, listed: listed.length };

const unknown = await client.getTask({ id: 'tsk_00000000000000000000000000' });
out.unknown = unknown.error?.code;

console.log(JSON.stringify(out));
