package mcpclient

import (
	"context"
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/errandhq/errand/internal/provider"
)

// Tool is a tool of an MCP server, named "<server>.<tool>" for errand's
// agents. It satisfies agent.Tool.
type Tool struct {
	// Server and Name are the server's name in errand.yaml and the tool's
	// name on that server.
	Server, Name string
	spec         provider.Tool
	srv          *server
}

func newTool(s *server, t *mcp.Tool) *Tool {
	desc := t.Description
	if desc == "" {
		desc = t.Title
	}
	if desc == "" && t.Annotations != nil {
		desc = t.Annotations.Title
	}
	return &Tool{
		Server: s.cfg.Name, Name: t.Name, srv: s,
		spec: provider.Tool{Name: s.cfg.Name + "." + t.Name, Description: desc, Parameters: inputSchema(t.InputSchema)},
	}
}

// FullName is "<server>.<tool>".
func (t *Tool) FullName() string { return t.spec.Name }

// Spec is the tool as a model is offered it, under its full name.
func (t *Tool) Spec() provider.Tool { return t.spec }

// Call calls the tool; see Manager.Call.
func (t *Tool) Call(ctx context.Context, key string, args json.RawMessage) (json.RawMessage, error) {
	return t.srv.call(ctx, t.Name, key, args)
}

// inputSchema is a tool's input schema as model APIs take it: a JSON
// object whose type is object. A server that sends anything else gets the
// schema of any object.
func inputSchema(schema any) json.RawMessage {
	anyObject := json.RawMessage(`{"type":"object"}`)
	raw, err := json.Marshal(schema)
	if err != nil {
		return anyObject
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil || m == nil {
		return anyObject
	}
	if typ, ok := m["type"]; !ok {
		m["type"] = json.RawMessage(`"object"`)
	} else if string(typ) != `"object"` {
		return anyObject
	}
	out, err := json.Marshal(m)
	if err != nil {
		return anyObject
	}
	return out
}
