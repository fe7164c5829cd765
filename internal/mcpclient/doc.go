// Package mcpclient gives errand's agents the tools of MCP servers: the
// servers named under mcp_servers in errand.yaml, reached with the official
// Go SDK as a client, over stdio (a command errand starts) or Streamable
// HTTP (a url).
//
// A Manager owns one connection per server, in one of three states:
//
//   - down: not connected. The first need (a task's model call listing
//     tools, or a tool call) connects it, unless it is backing off.
//   - connecting: one connect runs; everyone else who needs the server waits
//     for it (or for their own context), so a server is never started twice.
//   - up: connected, its tool list cached. A tools/list_changed notification
//     marks the list stale; the next need lists again.
//
// A server goes down when its process exits, its connection breaks, or a
// call fails in a way that is not the server's own answer. The first
// restart after a death is made at the next need; each further failure in
// a row doubles the wait (MinBackoff up to MaxBackoff) before the next try,
// measured on the injected clock. A session that lived StableAfter or more
// before it died starts the count again.
//
// Child processes: a command server runs in its own process group with the
// parent-death signal set (Linux), started from a locked OS thread that
// stays locked until the process is reaped, because the kernel sends that
// signal when the starting thread ends, not the process. So a server dies
// with errand, even on SIGKILL. Close stops each server the way the MCP
// spec asks (close stdin, wait, SIGTERM, SIGKILL), then kills what is left
// of its process group.
//
// A tool call carries the errand step's idempotency key in its _meta
// (MetaIdempotencyKey), so a server can recognise a call errand repeats
// after a crash in the middle of the step. Calls errand recorded as done
// are replayed by the agent and never reach the server again.
//
// With traces on, a tool call runs inside the agent's execute_tool span,
// and carries that span's W3C traceparent (and tracestate) twice: in its
// _meta under "traceparent" and "tracestate", which any MCP server can
// read whatever the transport (a stdio server has nothing else), and, to
// a url server, as the Traceparent and Tracestate headers of its HTTP
// requests, for servers and proxies that trace HTTP. The server's spans
// then hang under the tool call's in errand's trace. With traces off
// there is no span and nothing is added.
package mcpclient
