// live.mjs follows a task's stream with an official A2A client, as an
// agent frontend would, and prints each event the moment it arrives, one
// JSON line each, so the test can act mid-stream (let the model finish
// once the text written so far has been shown):
//
//   node live.mjs <base url of errand> <token> <1.0|0.3> stream <agent>
//   node live.mjs <base url of errand> <token> <1.0|0.3> resubscribe <task id>
//
// stream sends a message to the agent (SendStreamingMessage, or v0.3's
// message/stream); resubscribe follows a running task (SubscribeToTask,
// tasks/resubscribe). Lines:
//
//   {"kind":"task","id":…,"state":…}
//   {"kind":"status","state":…}
//   {"kind":"artifact","id":…,"text":…,"append":…,"lastChunk":…,"live":…}
//   {"kind":"end"}
//
// states as the version spells them; live marks errand's live output. It
// exits 0 once the stream ends, or says what went wrong on stderr and
// exits 1.
import { randomUUID } from 'node:crypto';
import { Role, TaskState } from '@a2a-js/sdk';
import {
  ClientFactory,
  ClientFactoryOptions,
  DefaultAgentCardResolver,
  JsonRpcTransportFactory,
} from '@a2a-js/sdk/client';
import { A2AClient } from 'a2a-sdk-v03/client';

const [base, token, version, op, arg] = process.argv.slice(2);
if (!base || !token || !['1.0', '0.3'].includes(version) || !['stream', 'resubscribe'].includes(op) || !arg) {
  throw new Error('usage: live.mjs <base url> <token> <1.0|0.3> <stream AGENT|resubscribe TASK_ID>');
}

const fetchImpl = (url, init = {}) => {
  const headers = new Headers(init.headers);
  headers.set('Authorization', `Bearer ${token}`);
  return fetch(url, { ...init, headers });
};

const print = (line) => process.stdout.write(`${JSON.stringify(line)}\n`);
const isLive = (metadata) => metadata?.errand?.live_output === true;

// v1.0: events are a oneof (payload.$case), parts too (content.$case).
async function followV1() {
  const factory = new ClientFactory(
    ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
      transports: [new JsonRpcTransportFactory({ fetchImpl })],
      cardResolver: new DefaultAgentCardResolver({ fetchImpl }),
    }),
  );
  const client = await factory.createFromUrl(base);
  const events = op === 'stream'
    ? client.sendMessageStream({
      message: {
        messageId: randomUUID(),
        role: Role.ROLE_USER,
        parts: [{ content: { $case: 'text', value: 'write it out' } }],
        metadata: { agent: arg },
      },
    })
    : client.resubscribeTask({ id: arg });
  const textOf = (parts) => parts.map((p) => (p.content?.$case === 'text' ? p.content.value : '')).join('');
  for await (const ev of events) {
    const p = ev.payload;
    if (p.$case === 'task') print({ kind: 'task', id: p.value.id, state: TaskState[p.value.status.state] });
    if (p.$case === 'statusUpdate') print({ kind: 'status', state: TaskState[p.value.status.state] });
    if (p.$case === 'artifactUpdate') {
      const u = p.value;
      print({
        kind: 'artifact', id: u.artifact.artifactId, text: textOf(u.artifact.parts),
        append: u.append, lastChunk: u.lastChunk, live: isLive(u.artifact.metadata),
      });
    }
  }
}

// v0.3: events and parts are told apart by kind.
async function followV03() {
  const client = await A2AClient.fromCardUrl(`${base}/.well-known/agent-card.json`, { fetchImpl });
  const events = op === 'stream'
    ? client.sendMessageStream({
      message: {
        kind: 'message', messageId: randomUUID(), role: 'user',
        parts: [{ kind: 'text', text: 'write it out' }], metadata: { agent: arg },
      },
    })
    : client.resubscribeTask({ id: arg });
  const textOf = (parts) => parts.map((p) => (p.kind === 'text' ? p.text : '')).join('');
  for await (const ev of events) {
    if (ev.kind === 'task') print({ kind: 'task', id: ev.id, state: ev.status.state });
    if (ev.kind === 'status-update') print({ kind: 'status', state: ev.status.state });
    if (ev.kind === 'artifact-update') {
      print({
        kind: 'artifact', id: ev.artifact.artifactId, text: textOf(ev.artifact.parts),
        append: ev.append ?? false, lastChunk: ev.lastChunk ?? false, live: isLive(ev.artifact.metadata),
      });
    }
  }
}

await (version === '1.0' ? followV1() : followV03());
print({ kind: 'end' });
