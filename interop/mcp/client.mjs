// client.mjs drives errand's MCP server with the official TypeScript SDK,
// as an MCP host would: list the tools, submit a task, wait for it, read its
// result and its output resource, and check that a bad call is a tool error.
//
//   node client.mjs http  <url of /mcp> <token>
//   node client.mjs stdio <command> [args...]    (e.g. errand mcp --server URL)
//
// It prints one JSON line describing what it saw on stdout and exits 0, or
// says what went wrong on stderr and exits 1.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

const [mode, ...rest] = process.argv.slice(2);

function fail(msg) {
  throw new Error(msg);
}

function transportFor() {
  if (mode === 'http') {
    const [url, token] = rest;
    if (!url || !token) fail('usage: client.mjs http <url> <token>');
    return new StreamableHTTPClientTransport(new URL(url), {
      requestInit: { headers: { Authorization: `Bearer ${token}` } },
    });
  }
  if (mode === 'stdio') {
    const [command, ...args] = rest;
    if (!command) fail('usage: client.mjs stdio <command> [args...]');
    // The SDK passes only a few variables by default; errand mcp needs
    // ERRAND_HOME to find the daemon's token.
    return new StdioClientTransport({ command, args, env: { ...process.env }, stderr: 'inherit' });
  }
  fail(`unknown mode ${JSON.stringify(mode)}: want http or stdio`);
}

// call calls a tool that must succeed and returns its structured content.
async function call(client, name, args, options) {
  const res = await client.callTool({ name, arguments: args }, undefined, options);
  const text = (res.content ?? []).filter((c) => c.type === 'text').map((c) => c.text);
  if (res.isError) fail(`${name} failed: ${text.join('\n')}`);
  if (!res.structuredContent) fail(`${name}: no structured content`);
  // The same JSON comes as text for clients that read only text.
  const last = JSON.parse(text[text.length - 1]);
  if (JSON.stringify(last) !== JSON.stringify(res.structuredContent)) fail(`${name}: the text JSON differs from the structured content`);
  return res.structuredContent;
}

const client = new Client({ name: 'errand-interop', version: '1.0.0' });
const out = { mode };
try {
  await client.connect(transportFor());
  out.server = client.getServerVersion()?.name;

  const { tools } = await client.listTools();
  out.tools = tools.map((t) => t.name).sort();
  const submit = tools.find((t) => t.name === 'submit_task');
  if (!submit?.inputSchema?.required?.includes('goal')) fail('submit_task does not require goal');

  const goal = `interop over ${mode}`;
  const submitted = await call(client, 'submit_task', { goal, title: `MCP ${mode}`, input: { via: mode } });
  const id = submitted.task.id;
  out.task_id = id;
  out.submitted_status = submitted.task.status;

  let progress = 0;
  const waited = await call(client, 'wait_for_task', { task_id: id, timeout_seconds: 120 }, {
    timeout: 150_000,
    resetTimeoutOnProgress: true,
    onprogress: () => { progress++; },
  });
  out.status = waited.task.status;
  out.timed_out = waited.timed_out;
  out.result = waited.task.result;
  out.input = waited.task.input;

  const got = await call(client, 'get_task_status', { task_id: id });
  if (got.task.status !== waited.task.status) fail(`get_task_status says ${got.task.status}, wait_for_task said ${waited.task.status}`);
  const listed = await call(client, 'list_tasks', { status: ['completed'], limit: 5 });
  out.listed = listed.tasks.some((t) => t.id === id);

  const uri = `errand://tasks/${id}/output`;
  const { resources } = await client.listResources();
  out.resource_listed = resources.some((r) => r.uri === uri);
  const { resourceTemplates } = await client.listResourceTemplates();
  out.templates = resourceTemplates.map((t) => t.uriTemplate);
  const read = await client.readResource({ uri });
  out.resource = { mime: read.contents[0].mimeType, text: read.contents[0].text };

  const bad = await client.callTool({ name: 'submit_task', arguments: { title: 'no goal' } });
  out.bad_is_error = bad.isError === true;
  out.bad_text = bad.content.map((c) => c.text).join('\n');

  console.log(JSON.stringify(out));
  await client.close();
} catch (err) {
  console.error(`client.mjs (${mode}): ${err?.stack ?? err}`);
  await client.close().catch(() => {});
  process.exit(1);
}
