package mcpserver

import (
	"errors"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/internal/id"
)

func TestOutputResources(t *testing.T) {
	t.Parallel()
	for _, kind := range backends {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			b := setup(t, kind)
			ctx := t.Context()

			templates, err := b.session.ListResourceTemplates(ctx, nil)
			require.NoError(t, err)
			require.Len(t, templates.ResourceTemplates, 1)
			require.Equal(t, "errand://tasks/{id}/output", templates.ResourceTemplates[0].URITemplate)

			text := b.submit(map[string]any{"goal": "write a poem", "title": "Poem"})
			data := b.submit(map[string]any{"goal": "count", "agent": "data"})
			b.waitDone(text.ID)
			b.waitDone(data.ID)
			held := b.submit(map[string]any{"goal": "held", "agent": "gate"})

			list, err := b.session.ListResources(ctx, nil)
			require.NoError(t, err)
			require.Empty(t, list.NextCursor)
			byURI := map[string]*mcp.Resource{}
			for _, r := range list.Resources {
				byURI[r.URI] = r
			}
			require.Len(t, byURI, 2, "only completed tasks have outputs")
			poem := byURI["errand://tasks/"+text.ID+"/output"]
			require.NotNil(t, poem)
			require.Equal(t, "Poem", poem.Title)
			require.Equal(t, text.ID, poem.Name)
			require.Equal(t, "text/markdown", poem.MIMEType)
			require.EqualValues(t, len("done: write a poem"), poem.Size)
			require.Equal(t, "application/json", byURI["errand://tasks/"+data.ID+"/output"].MIMEType)

			read, err := b.session.ReadResource(ctx, &mcp.ReadResourceParams{URI: poem.URI})
			require.NoError(t, err)
			require.Len(t, read.Contents, 1)
			require.Equal(t, "done: write a poem", read.Contents[0].Text)
			require.Equal(t, "text/markdown", read.Contents[0].MIMEType)
			require.Equal(t, poem.URI, read.Contents[0].URI)

			read, err = b.session.ReadResource(ctx, &mcp.ReadResourceParams{URI: OutputURI(data.ID)})
			require.NoError(t, err)
			require.Equal(t, "application/json", read.Contents[0].MIMEType)
			require.JSONEq(t, `{"answer":42,"items":["a","b"]}`, read.Contents[0].Text)

			// No output yet, no such task, not an output URI.
			_, err = b.session.ReadResource(ctx, &mcp.ReadResourceParams{URI: OutputURI(held.ID)})
			requireRPCError(t, err, mcp.CodeResourceNotFound, "task "+held.ID+" is ")
			require.ErrorContains(t, err, "has no output yet; wait_for_task returns when it ends")
			unknown := id.New(id.Task)
			_, err = b.session.ReadResource(ctx, &mcp.ReadResourceParams{URI: OutputURI(unknown)})
			requireRPCError(t, err, mcp.CodeResourceNotFound, "Resource not found")
			_, err = b.session.ReadResource(ctx, &mcp.ReadResourceParams{URI: "errand://tasks/nope/output"})
			requireRPCError(t, err, jsonrpc.CodeInvalidParams, "is not errand://tasks/{id}/output with a task id")
			_, err = b.session.ReadResource(ctx, &mcp.ReadResourceParams{URI: "errand://other"})
			requireRPCError(t, err, mcp.CodeResourceNotFound, "Resource not found")
			_, err = b.session.ListResources(ctx, &mcp.ListResourcesParams{Cursor: "more"})
			requireRPCError(t, err, jsonrpc.CodeInvalidParams, "cursor")
			close(b.gateRelease)
		})
	}
}

// The list shows at most RecentOutputs outputs, the newest.
func TestOutputResourcesBounded(t *testing.T) {
	t.Parallel()
	b := setup(t, "local")
	var last string
	for range 3 {
		task := b.submit(map[string]any{"goal": "g"})
		b.waitDone(task.ID)
		last = task.ID
	}
	session := connect(t, NewServer(LocalBackend(b.client), &Config{RecentOutputs: 2, Logger: testLogger(t)}), nil)
	list, err := session.ListResources(t.Context(), nil)
	require.NoError(t, err)
	require.Len(t, list.Resources, 2)
	require.Equal(t, OutputURI(last), list.Resources[0].URI)
}

func requireRPCError(t *testing.T, err error, code int64, contains string) {
	t.Helper()
	var rpcErr *jsonrpc.Error
	require.True(t, errors.As(err, &rpcErr), "want a JSON-RPC error, got %v", err)
	require.Equal(t, code, rpcErr.Code, rpcErr.Message)
	require.Contains(t, rpcErr.Message, contains)
}
