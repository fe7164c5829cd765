package apiclient

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"

	"github.com/errandhq/errand/internal/api"
)

// SubmitTask is CreateTask that also reports whether the daemon returned an
// existing task for the request's idempotency key (HTTP 200) rather than a
// new one (201).
func (c *Client) SubmitTask(ctx context.Context, p *api.CreateTask) (task *api.Task, duplicate bool, err error) {
	b, err := json.Marshal(p)
	if err != nil {
		return nil, false, fmt.Errorf("encode POST /api/tasks: %w", err)
	}
	resp, err := c.send(ctx, http.MethodPost, "/api/tasks", bytes.NewReader(b), nil)
	if err != nil {
		return nil, false, err
	}
	defer resp.Body.Close()
	var out api.Task
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		if ctx.Err() != nil {
			return nil, false, ctx.Err()
		}
		return nil, false, fmt.Errorf("decode POST /api/tasks: %w", err)
	}
	// 200 is a repeated idempotency key, or a submit that collapsed into a
	// waiting debounced task, which the header tells apart.
	debounced := resp.Header.Get("Errand-Debounced") == "true"
	return &out, resp.StatusCode == http.StatusOK && !debounced, nil
}

// TaskInputs returns the input requests of one task, oldest first, of one
// status if status is set (pending, answered, expired): GET
// /api/inputs?task_id=.
func (c *Client) TaskInputs(ctx context.Context, taskID, status string) (*api.InputList, error) {
	q := url.Values{}
	q.Set("task_id", taskID)
	setIf(q, "status", status)
	var out api.InputList
	return &out, c.do(ctx, http.MethodGet, withQuery("/api/inputs", q), nil, &out)
}
