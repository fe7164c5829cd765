package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// client speaks errand's HTTP API to one daemon, as any outside program
// would.
type client struct {
	base  string
	token string
	http  *http.Client
}

func newClient(base, token string) *client {
	return &client{base: base, token: token, http: &http.Client{Timeout: 15 * time.Second}}
}

// wireTask is the part of a task the soak reads.
type wireTask struct {
	ID     string          `json:"id"`
	Status string          `json:"status"`
	Input  json.RawMessage `json:"input"`
}

// soakKey is the submit key the soak put in the task's input.
func (t *wireTask) soakKey() string {
	var in struct {
		SoakKey string `json:"soak_key"`
	}
	_ = json.Unmarshal(t.Input, &in)
	return in.SoakKey
}

type wireStep struct {
	StepNo         int             `json:"step_no"`
	Status         string          `json:"status"`
	IdempotencyKey string          `json:"idempotency_key"`
	Output         json.RawMessage `json:"output"`
}

// httpError is an answer other than the one wanted.
type httpError struct {
	status int
	body   string
}

func (e *httpError) Error() string { return fmt.Sprintf("HTTP %d: %s", e.status, e.body) }

func (c *client) do(ctx context.Context, method, path string, body any, want int, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != want && !(want == http.StatusCreated && resp.StatusCode == http.StatusOK) {
		return &httpError{status: resp.StatusCode, body: strings.TrimSpace(string(b))}
	}
	if out != nil {
		return json.Unmarshal(b, out)
	}
	return nil
}

// submit makes the soak's task number key once: a 200 is errand answering
// a retry with the task the key made.
func (c *client) submit(ctx context.Context, key string, steps int) (*wireTask, error) {
	body := map[string]any{
		"goal":            "soak " + key,
		"agent":           "soak",
		"input":           map[string]any{"soak_key": key},
		"idempotency_key": key,
		"max_attempts":    100,
		"result_route":    "none",
	}
	var t wireTask
	if err := c.do(ctx, http.MethodPost, "/api/tasks", body, http.StatusCreated, &t); err != nil {
		return nil, err
	}
	return &t, nil
}

// retryable reports whether a submit may be sent again: the daemon was
// down, went down during the request, or was not serving yet.
func retryable(err error) bool {
	var he *httpError
	if errors.As(err, &he) {
		return he.status >= 500
	}
	return err != nil
}

func (c *client) counts(ctx context.Context) (map[string]int, error) {
	var st struct {
		Tasks map[string]int `json:"tasks"`
	}
	err := c.do(ctx, http.MethodGet, "/api/status", nil, http.StatusOK, &st)
	return st.Tasks, err
}

// tasks lists every task, following the cursor.
func (c *client) tasks(ctx context.Context) ([]*wireTask, error) {
	var all []*wireTask
	cursor := ""
	for {
		q := url.Values{"limit": {"500"}}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		var page struct {
			Tasks      []*wireTask `json:"tasks"`
			NextCursor string      `json:"next_cursor"`
		}
		if err := c.do(ctx, http.MethodGet, "/api/tasks?"+q.Encode(), nil, http.StatusOK, &page); err != nil {
			return nil, err
		}
		all = append(all, page.Tasks...)
		if page.NextCursor == "" || len(page.Tasks) == 0 {
			return all, nil
		}
		cursor = page.NextCursor
	}
}

func (c *client) steps(ctx context.Context, id string) ([]*wireStep, error) {
	var l struct {
		Steps []*wireStep `json:"steps"`
	}
	err := c.do(ctx, http.MethodGet, "/api/tasks/"+id+"/steps", nil, http.StatusOK, &l)
	return l.Steps, err
}

// terminal is the event types that end a task.
var terminal = map[string]bool{"task.completed": true, "task.failed": true, "task.cancelled": true}

// streamIDs reads the task's own event stream (SSE) from its first event
// to the one that ended it, and returns the ids it listed.
func (c *client) streamIDs(ctx context.Context, id string) ([]int64, error) {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/api/tasks/"+id+"/events", nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	resp, err := (&http.Client{}).Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return nil, &httpError{status: resp.StatusCode, body: string(b)}
	}
	var ids []int64
	var msgID, msgType string
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "id:"):
			msgID = strings.TrimSpace(strings.TrimPrefix(line, "id:"))
		case strings.HasPrefix(line, "event:"):
			msgType = strings.TrimSpace(strings.TrimPrefix(line, "event:"))
		case line == "":
			// A message ends. An id-only message names where the stream
			// starts; live output carries no id.
			if msgID != "" && msgType != "" {
				n, err := strconv.ParseInt(msgID, 10, 64)
				if err != nil {
					return nil, fmt.Errorf("stream of %s: id %q: %w", id, msgID, err)
				}
				ids = append(ids, n)
				if terminal[msgType] {
					return ids, nil
				}
			}
			msgID, msgType = "", ""
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("stream of %s: %w", id, err)
	}
	return nil, fmt.Errorf("stream of %s ended before the task's end", id)
}
