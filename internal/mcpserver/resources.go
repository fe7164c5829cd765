package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/internal/api"
	"github.com/errandhq/errand/internal/apiclient"
	"github.com/errandhq/errand/internal/id"
)

// Output resources.
const (
	outputURIPrefix = "errand://tasks/"
	outputURISuffix = "/output"
	// OutputURITemplate names the output of any task.
	OutputURITemplate = outputURIPrefix + "{id}" + outputURISuffix

	mimeMarkdown = "text/markdown"
	mimeJSON     = "application/json"
)

// OutputURI is the resource holding a task's output.
func OutputURI(taskID string) string { return outputURIPrefix + taskID + outputURISuffix }

func (s *server) addResources(srv *mcp.Server) {
	srv.AddResourceTemplate(&mcp.ResourceTemplate{
		Name:        "task-output",
		Title:       "Task output",
		URITemplate: OutputURITemplate,
		Description: "The output of a completed task: text/markdown when its agent answered in text, application/json when in data.",
	}, s.readOutput)
	// The SDK lists only resources registered one by one; outputs come
	// and go with tasks, so resources/list is answered here.
	srv.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if lr, ok := req.(*mcp.ListResourcesRequest); ok && method == "resources/list" {
				return s.listOutputs(ctx, lr)
			}
			return next(ctx, method, req)
		}
	})
}

// listOutputs lists the outputs of the newest completed tasks: one
// bounded page, since older ones are a list_tasks away.
func (s *server) listOutputs(ctx context.Context, req *mcp.ListResourcesRequest) (*mcp.ListResourcesResult, error) {
	if req.Params != nil && req.Params.Cursor != "" {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "invalid cursor: this server lists one page of recent outputs and gives no cursors"}
	}
	list, err := s.backend.List(ctx, &ListParams{Statuses: []errand.Status{errand.StatusCompleted}, Limit: s.cfg.RecentOutputs})
	if err != nil {
		return nil, s.resourceError(ctx, "resources/list", err)
	}
	res := &mcp.ListResourcesResult{Resources: []*mcp.Resource{}, Cacheable: mcp.Cacheable{CacheScope: "private"}}
	for _, t := range list.Tasks {
		mime, text := outputOf(t)
		res.Resources = append(res.Resources, &mcp.Resource{
			URI:         OutputURI(t.ID),
			Name:        t.ID,
			Title:       t.Title,
			MIMEType:    mime,
			Size:        int64(len(text)),
			Description: "The output of task " + t.ID + ", " + quote(clip(t.Title, 200)) + ".",
		})
	}
	return res, nil
}

func (s *server) readOutput(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	uri := req.Params.URI
	taskID, ok := strings.CutPrefix(uri, outputURIPrefix)
	if ok {
		taskID, ok = strings.CutSuffix(taskID, outputURISuffix)
	}
	if !ok || !id.Valid(id.Task, taskID) {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams,
			Message: fmt.Sprintf("invalid uri: %q is not %s with a task id (tsk_…)", truncate(uri), OutputURITemplate)}
	}
	t, err := s.backend.Get(ctx, taskID)
	if err != nil {
		var ae *apiclient.Error
		if errors.Is(err, errand.ErrNotFound) || errors.As(err, &ae) && ae.Status == 404 {
			return nil, mcp.ResourceNotFoundError(uri)
		}
		return nil, s.resourceError(ctx, "resources/read", err)
	}
	if t.Status != errand.StatusCompleted && !hasResult(t) {
		return nil, &jsonrpc.Error{Code: mcp.CodeResourceNotFound,
			Message: "task " + t.ID + " is " + taskState(t) + " and has no output yet" + waitHint(t)}
	}
	mime, text := outputOf(t)
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri, MIMEType: mime, Text: text}}}, nil
}

func waitHint(t *api.Task) string {
	if settled(t.Status) {
		return ""
	}
	return "; wait_for_task returns when it ends"
}

// hasResult reports whether t has a result; one read from the HTTP API
// holds null for none.
func hasResult(t *api.Task) bool { return len(t.Result) > 0 && string(t.Result) != "null" }

// outputOf is a task's output as a resource: a text output as Markdown,
// anything else as JSON.
func outputOf(t *api.Task) (mime, text string) {
	var r struct {
		Output json.RawMessage `json:"output"`
	}
	if json.Unmarshal(t.Result, &r) != nil || len(r.Output) == 0 {
		r.Output = t.Result
	}
	if len(r.Output) == 0 || string(r.Output) == "null" {
		return mimeMarkdown, ""
	}
	var str string
	if json.Unmarshal(r.Output, &str) == nil {
		return mimeMarkdown, str
	}
	var buf bytes.Buffer
	if json.Indent(&buf, r.Output, "", "  ") != nil {
		return mimeJSON, string(r.Output)
	}
	return mimeJSON, buf.String()
}

// resourceError is toolError for a resource method: a JSON-RPC error.
func (s *server) resourceError(ctx context.Context, method string, err error) error {
	return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: s.toolError(ctx, method, err).Error()}
}
