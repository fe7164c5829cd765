// v1.mjs drives errand's A2A server with the official A2A v1.0 client
// (@a2a-js/sdk), as another agent would: read the card, send a message
// and wait, read the task, stream a task, cancel one, answer the question
// of one that asks, list a context's tasks, keep push configs, and see an
// unknown task refused.
//
//   node v1.mjs <base url of errand> <token>
//
// Agents the daemon must have: the default one (finishes with
// "Finished: <goal>", reporting progress), "asker" (asks "What is your
// name?", then finishes with "Hello, <answer>!") and "slow" (runs until
// cancelled). It prints one JSON line describing what it saw on stdout and
// exits 0, or says what went wrong on stderr and exits 1.
import { randomUUID } from 'node:crypto';
import { Role, TaskState } from '@a2a-js/sdk';
import {
  ClientFactory,
  ClientFactoryOptions,
  DefaultAgentCardResolver,
  JsonRpcTransportFactory,
} from '@a2a-js/sdk/client';

const [base, token] = process.argv.slice(2);
if (!base || !token) {
  throw new Error('usage: v1.mjs <base url> <token>');
}

// Every request carries the token; the card is open, but it does no harm.
const fetchImpl = (url, init = {}) => {
  const headers = new Headers(init.headers);
  headers.set('Authorization', `Bearer ${token}`);
  return fetch(url, { ...init, headers });
};

const factory = new ClientFactory(
  ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
    transports: [new JsonRpcTransportFactory({ fetchImpl })],
    cardResolver: new DefaultAgentCardResolver({ fetchImpl }),
  }),
);

const stateName = (s) => TaskState[s];
const text = (part) => (part?.content?.$case === 'text' ? part.content.value : undefined);

function message(words, extra = {}) {
  return {
    messageId: randomUUID(),
    role: Role.ROLE_USER,
    parts: [{ content: { $case: 'text', value: words } }],
    ...extra,
  };
}

const out = {};

// The card, read with A2A-Version: 1.0, picks the v1.0 interface.
const client = await factory.createFromUrl(base);
const card = await client.getAgentCard();
out.card = {
  name: card.name,
  streaming: card.capabilities?.streaming,
  push: card.capabilities?.pushNotifications,
  interfaces: card.supportedInterfaces.map((i) => `${i.protocolBinding} ${i.protocolVersion} ${i.url}`),
  skills: card.skills.map((s) => s.id),
  schemes: Object.keys(card.securitySchemes),
};
out.protocolVersion = client.protocolVersion;

// A blocking send runs the task to its end.
const ctx = randomUUID();
const done = await client.sendMessage({ message: message('say hello', { contextId: ctx }) });
out.send = {
  id: done.id,
  context: done.contextId,
  state: stateName(done.status.state),
  artifact: text(done.artifacts[0]?.parts[0]),
  history: done.history.map((m) => text(m.parts[0])),
};

const got = await client.getTask({ id: done.id });
out.get = { state: stateName(got.status.state), artifact: text(got.artifacts[0]?.parts[0]) };

// A stream: the task first, then its updates, to the end.
out.stream = [];
for await (const ev of client.sendMessageStream({ message: message('stream it', { contextId: ctx }) })) {
  const p = ev.payload;
  if (p.$case === 'task') out.stream.push(`task ${stateName(p.value.status.state)}`);
  if (p.$case === 'statusUpdate') out.stream.push(`status ${stateName(p.value.status.state)}`);
  if (p.$case === 'artifactUpdate') out.stream.push(`artifact ${text(p.value.artifact.parts[0])}`);
}

// Cancel a task that runs until cancelled.
const slow = await client.sendMessage({
  message: message('take forever', { metadata: { agent: 'slow' } }),
  configuration: { returnImmediately: true },
});
const cancelled = await client.cancelTask({ id: slow.id });
out.cancel = { before: stateName(slow.status.state), after: stateName(cancelled.status.state) };
try {
  await client.cancelTask({ id: slow.id });
  out.cancelAgain = 'accepted';
} catch (e) {
  out.cancelAgain = e.name;
}

// A task that asks: the question is the status message; the answer is a
// message to the task.
const asking = await client.sendMessage({ message: message('greet me', { metadata: { agent: 'asker' } }) });
out.ask = {
  state: stateName(asking.status.state),
  role: Role[asking.status.message?.role],
  question: text(asking.status.message?.parts[0]),
};
const answered = await client.sendMessage({
  message: message('Ada', { taskId: asking.id, contextId: asking.contextId }),
});
out.answer = {
  id: answered.id,
  state: stateName(answered.status.state),
  artifact: text(answered.artifacts[0]?.parts[0]),
  history: answered.history.map((m) => `${Role[m.role]} ${text(m.parts[0])}`),
};

const listed = await client.listTasks({ contextId: ctx, pageSize: 10 });
out.list = { count: listed.tasks.length, next: listed.nextPageToken };

// Push configs, kept and dropped (an address that never resolves: nothing
// is delivered).
const cfg = await client.createTaskPushNotificationConfig({
  taskId: slow.id,
  url: 'https://hooks.example.invalid/a2a',
  token: 'tok-1',
});
const read = await client.getTaskPushNotificationConfig({ taskId: slow.id, id: cfg.id });
const all = await client.listTaskPushNotificationConfig({ taskId: slow.id });
await client.deleteTaskPushNotificationConfig({ taskId: slow.id, id: cfg.id });
const after = await client.listTaskPushNotificationConfig({ taskId: slow.id });
out.push = { url: read.url, token: read.token, listed: all.configs.length, afterDelete: after.configs.length };

try {
  await client.getTask({ id: 'tsk_00000000000000000000000000' });
  out.unknown = 'found';
} catch (e) {
  out.unknown = e.name;
}

console.log(JSON.stringify(out));
