// The MCP reference server (@modelcontextprotocol/server-everything) over
// stdio, as errand starts an MCP server, with a record of its life for the
// tests: each tools/call it receives is appended as one JSON line to
// $ERRAND_MCP_CALL_LOG (name, arguments, _meta), and its pid is appended to
// $ERRAND_MCP_PID_LOG when it starts.
import { appendFileSync } from "node:fs";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { createServer } from "@modelcontextprotocol/server-everything/dist/server/index.js";

const callLog = process.env.ERRAND_MCP_CALL_LOG;
const pidLog = process.env.ERRAND_MCP_PID_LOG;
if (pidLog) {
  appendFileSync(pidLog, `${process.pid}\n`);
}

const transport = new StdioServerTransport();
const { server, cleanup } = createServer();
await server.connect(transport);

// Record calls before the server handles them.
const handle = transport.onmessage;
transport.onmessage = (message, extra) => {
  if (callLog && message.method === "tools/call") {
    const { name, arguments: args, _meta } = message.params ?? {};
    appendFileSync(callLog, JSON.stringify({ name, arguments: args, _meta }) + "\n");
  }
  handle(message, extra);
};

// errand stops a server by closing its stdin.
process.stdin.on("end", async () => {
  await server.close();
  cleanup();
  process.exit(0);
});
