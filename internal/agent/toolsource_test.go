package agent

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/internal/engine"
	"github.com/errandhq/errand/internal/mcpclient"
	"github.com/errandhq/errand/internal/provider"
	"github.com/errandhq/errand/store"
)

// fakeSource is a ToolSource of "server.tool" tools that records what it
// was asked and every call.
type fakeSource struct {
	tools []Tool

	mu    sync.Mutex
	lists int
	wants [][]string // the servers want accepted, per list
	calls []string   // "name key args"
}

func (s *fakeSource) add(name string) {
	s.tools = append(s.tools, ToolFunc(provider.Tool{Name: name, Parameters: json.RawMessage(`{"type":"object"}`)},
		func(_ context.Context, key string, args json.RawMessage) (json.RawMessage, error) {
			s.mu.Lock()
			s.calls = append(s.calls, name+" "+key+" "+string(args))
			s.mu.Unlock()
			return json.Marshal("ran " + name)
		}))
}

func (s *fakeSource) Tools(_ context.Context, want func(string) bool) ([]Tool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lists++
	var wanted []string
	for _, server := range []string{"files", "web"} {
		if want == nil || want(server) {
			wanted = append(wanted, server)
		}
	}
	s.wants = append(s.wants, wanted)
	return s.tools, nil
}

func (s *fakeSource) recorded() (lists int, wants [][]string, calls []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lists, s.wants, append([]string(nil), s.calls...)
}

// Tools of a source are offered to the model under names it accepts,
// called under errand's names, recorded as steps and held to the task's
// allow and deny lists.
func TestLLMSourcedTools(t *testing.T) {
	t.Parallel()
	b := setup(t)
	src := &fakeSource{}
	src.add("files.read")
	src.add("files.delete")
	src.add("files.read.all")
	src.add("finish_task") // a source cannot replace a built-in
	src.add("web.fetch")
	model := &scriptedModel{script: []provider.Response{
		{ToolCalls: []provider.ToolCall{
			toolCall("a", "files__read", `{"path":"/a"}`),
			toolCall("b", modelToolName("files.read.all"), `{}`),
			toolCall("c", "files__delete", `{"path":"/"}`),
			toolCall("d", "web__fetch", `{}`),
		}},
		{ToolCalls: []provider.ToolCall{toolCall("e", "finish_task", `{"result":"read"}`)}},
	}}
	agent, err := NewLLM(LLMConfig{Provider: model, Model: "m", ToolSource: src, Policy: Policy{Deny: []string{"files.delete"}}})
	require.NoError(t, err)
	b.start(t, agent)
	task, err := b.engine.Submit(context.Background(), &engine.SubmitParams{
		Goal: "read", Tools: []string{"files.read", "files.read.all", "files.delete", "recall"},
	})
	require.NoError(t, err)
	done := b.waitEnd(t, task.ID)
	require.Equal(t, store.StatusCompleted, done.Status, "%+v", done.Error)

	model.mu.Lock()
	first, second := model.requests[0], model.requests[1]
	model.mu.Unlock()
	var offered []string
	for _, tool := range first.Tools {
		require.Regexp(t, `^[a-zA-Z0-9_-]{1,64}$`, tool.Name)
		offered = append(offered, tool.Name)
	}
	require.Equal(t, []string{"finish_task", "recall", "files__read", modelToolName("files.read.all")}, offered,
		"only what the task allows, under names models accept")
	for _, m := range second.Messages {
		for _, c := range m.ToolCalls {
			require.Regexp(t, `^[a-zA-Z0-9_-]{1,64}$`, c.Name, "the transcript shows the model its own names")
		}
	}

	lists, wants, calls := src.recorded()
	require.Equal(t, 2, lists, "asked for each request")
	require.Equal(t, []string{"files"}, wants[0], "web's tools are not allowed: it need not start")
	require.Equal(t, []string{
		"files.read " + task.ID + ":1:1 " + `{"path":"/a"}`,
		"files.read.all " + task.ID + ":1:2 {}",
	}, calls)

	steps, err := b.engine.Steps(context.Background(), task.ID)
	require.NoError(t, err)
	var kinds []string
	for _, st := range steps {
		kinds = append(kinds, st.Type+":"+st.Tool+":"+st.Status+":"+st.ErrorCode)
	}
	require.Equal(t, []string{
		"llm_call:m:done:",
		"tool_call:files.read:done:", "tool_call:files.read.all:done:",
		"tool_call:files.delete:denied:" + CodeToolDenied, "tool_call:web.fetch:denied:" + CodeToolDenied,
		"llm_call:m:done:", "tool_call:finish_task:done:",
	}, kinds)
}

// A plan_execute task plans without starting any server, and a task whose
// tool budget is spent does not start them either.
func TestLLMSourceNotAskedWhenNoToolCanRun(t *testing.T) {
	t.Parallel()
	b := setup(t)
	src := &fakeSource{}
	src.add("files.read")
	model := &scriptedModel{script: []provider.Response{
		{ToolCalls: []provider.ToolCall{toolCall("p", "update_plan", `{"steps":[{"title":"Read"}]}`)}},
		{ToolCalls: []provider.ToolCall{toolCall("r", "files__read", `{}`)}},
		{ToolCalls: []provider.ToolCall{toolCall("c", "complete_step", `{"result":"read"}`)}},
		{ToolCalls: []provider.ToolCall{toolCall("f", "finish_task", `{"result":"done"}`)}},
	}}
	agent, err := NewLLM(LLMConfig{Provider: model, Model: "m", ToolSource: src, Mode: ModePlanExecute})
	require.NoError(t, err)
	b.start(t, agent)
	task, err := b.engine.Submit(context.Background(), &engine.SubmitParams{Goal: "plan"})
	require.NoError(t, err)
	done := b.waitEnd(t, task.ID)
	require.Equal(t, store.StatusCompleted, done.Status, "%+v", done.Error)
	lists, _, calls := src.recorded()
	require.Equal(t, 2, lists, "asked in the two execute steps only")
	require.Len(t, calls, 1)
}

// Through a real MCP client: the model calls a server's tool twice in one
// step by the name it was offered; the worker dies during the second call.
// Resumed, the task replays the first call's recorded result and makes the
// second again, with the same idempotency key, for the server to dedupe.
func TestLLMCallsMCPToolOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var mu sync.Mutex
	var keys []string
	inSecond := make(chan struct{})
	var blocked bool
	srv := mcp.NewServer(&mcp.Implementation{Name: "notes", Version: "1"}, nil)
	srv.AddTool(&mcp.Tool{Name: "append", Description: "Appends a note.", InputSchema: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}}}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			key, _ := req.Params.Meta[mcpclient.MetaIdempotencyKey].(string)
			mu.Lock()
			keys = append(keys, key)
			block := len(keys) == 2 && !blocked
			blocked = blocked || block
			mu.Unlock()
			if block {
				close(inSecond)
				<-ctx.Done() // the worker dies during this call
				return nil, ctx.Err()
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "noted " + key}}}, nil
		})
	m, err := mcpclient.New(&mcpclient.Config{Servers: []mcpclient.Server{{Name: "notes", TransportFunc: func(ctx context.Context) (mcp.Transport, error) {
		client, server := mcp.NewInMemoryTransports()
		if _, err := srv.Connect(ctx, server, nil); err != nil {
			return nil, err
		}
		return client, nil
	}}}})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, m.Close()) })

	model := &scriptedModel{script: []provider.Response{
		{ToolCalls: []provider.ToolCall{
			toolCall("a", "notes__append", `{"text":"milk"}`),
			toolCall("b", "notes__append", `{"text":"eggs"}`),
		}},
		{ToolCalls: []provider.ToolCall{toolCall("f", "finish_task", `{"result":"noted"}`)}},
	}}
	agent, err := NewLLM(LLMConfig{Provider: model, Model: "m", ToolSource: MCPTools(m)})
	require.NoError(t, err)
	kill := b.startDoomed(t, agent)
	task, err := b.engine.Submit(context.Background(), &engine.SubmitParams{Goal: "note it"})
	require.NoError(t, err)
	select {
	case <-inSecond:
	case <-time.After(waitTimeout):
		t.Fatal("the second call did not reach the server")
	}
	kill()

	b.start(t, agent)
	done := b.waitEnd(t, task.ID)
	require.Equal(t, store.StatusCompleted, done.Status, "%+v", done.Error)
	mu.Lock()
	require.Equal(t, []string{task.ID + ":1:1", task.ID + ":1:2", task.ID + ":1:2"}, keys,
		"the first call is not made again; the interrupted one is, with its key")
	mu.Unlock()
	require.Equal(t, 2, model.calls(), "the model is not asked for step 1 again")
	model.mu.Lock()
	last := model.requests[1]
	model.mu.Unlock()
	var offered []string
	for _, tool := range last.Tools {
		offered = append(offered, tool.Name)
	}
	require.Contains(t, offered, "notes__append")
	msgs := last.Messages
	block := func(out string) string { return "<data kind=\"tool\" tool=\"notes.append\">\n" + out + "\n</data>" }
	require.Equal(t, block(`"noted `+task.ID+`:1:1"`), msgs[len(msgs)-2].Content, "the recorded result is replayed")
	require.Equal(t, block(`"noted `+task.ID+`:1:2"`), msgs[len(msgs)-1].Content)

	steps, err := b.engine.Steps(context.Background(), task.ID)
	require.NoError(t, err)
	require.Equal(t, "notes.append", steps[1].Tool)
	require.Equal(t, "done", steps[1].Status)
	require.Equal(t, "notes.append", steps[2].Tool)
}
