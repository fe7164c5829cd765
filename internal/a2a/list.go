package a2a

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/errandhq/errand"
)

// Page sizes of ListTasks.
const (
	DefaultPageSize = 50
	MaxPageSize     = 100
)

// listTasks runs ListTasks (v1.0 only): errand's task list, newest first,
// paged by errand's cursors, filtered by context (session) and state.
func (s *Server) listTasks(ctx context.Context, req *request) (any, *rpcError) {
	var p v1ListParams
	if e := decodeParams(req, &p); e != nil {
		return nil, e
	}
	lp := &errand.ListParams{SessionID: p.ContextID, Cursor: p.PageToken, Limit: DefaultPageSize}
	if p.PageSize != nil {
		switch n := int(*p.PageSize); {
		case n < 1:
			return nil, invalidParams("pageSize", "%d is below 1", n)
		case n > MaxPageSize:
			lp.Limit = MaxPageSize
		default:
			lp.Limit = n
		}
	}
	if len(p.ContextID) > maxContextIDBytes {
		return nil, invalidParams("contextId", "is %d bytes; no context has so long an id", len(p.ContextID))
	}
	st, e := parseStateFilter(p.Status)
	if e != nil {
		return nil, e
	}
	out := v1ListResult{Tasks: []v1Task{}, PageSize: lp.Limit}
	if st != 0 {
		if lp.Statuses = statusesOf(st); len(lp.Statuses) == 0 {
			return out, nil // rejected, auth-required: errand has none
		}
	}
	var since time.Time
	if p.StatusTimestampAfter != "" {
		var err error
		if since, err = time.Parse(time.RFC3339Nano, p.StatusTimestampAfter); err != nil {
			return nil, invalidParams("statusTimestampAfter", "%q is not an RFC 3339 time such as 2026-01-02T03:04:05Z", clip(p.StatusTimestampAfter, 64))
		}
	}
	hl, e := historyOption(p.HistoryLength)
	if e != nil {
		return nil, e
	}
	res, err := s.client.List(ctx, lp)
	if err != nil {
		var ve *errand.ValidationError
		if errors.As(err, &ve) {
			field := ve.Field
			if field == "cursor" {
				field = "pageToken"
			}
			return nil, invalidParams(field, "%s", ve.Message)
		}
		return nil, s.internal(req, err)
	}
	opts := viewOptions{history: hl != 0, historyLength: hl, artifacts: p.IncludeArtifacts}
	for _, t := range res.Tasks {
		// The filter sees a page at a time: a page may come back short,
		// even empty, with a token for the next.
		if !since.IsZero() && t.UpdatedAt.Before(since) {
			continue
		}
		v, err := s.view(ctx, t, opts)
		if err != nil {
			return nil, s.internal(req, err)
		}
		out.Tasks = append(out.Tasks, *v1TaskOf(v))
	}
	out.NextPageToken = res.NextCursor
	return out, nil
}

// parseStateFilter reads ListTasks' status: a TaskState by name or number;
// 0 when it names none.
func parseStateFilter(raw json.RawMessage) (state, *rpcError) {
	if len(raw) == 0 || string(raw) == "null" {
		return 0, nil
	}
	var name string
	if json.Unmarshal(raw, &name) == nil {
		// The JS SDK sends UNRECOGNIZED for a status left unset.
		if name == "TASK_STATE_UNSPECIFIED" || name == "UNRECOGNIZED" {
			return 0, nil
		}
		for st, n := range v1States {
			if n == name {
				return st, nil
			}
		}
		switch name {
		case "TASK_STATE_REJECTED", "TASK_STATE_AUTH_REQUIRED":
			return -1, nil
		}
		return 0, invalidParams("status", "%q is not a TaskState (TASK_STATE_SUBMITTED, TASK_STATE_WORKING, …)", clip(name, 40))
	}
	var num int
	if json.Unmarshal(raw, &num) == nil {
		// The enum's numbers, in a2a.proto's order.
		byNumber := map[int]state{-1: 0, 0: 0, 1: stateSubmitted, 2: stateWorking, 3: stateCompleted, 4: stateFailed, 5: stateCanceled, 6: stateInputRequired, 7: -1, 8: -1}
		if st, ok := byNumber[num]; ok {
			return st, nil
		}
		return 0, invalidParams("status", "%d is not a TaskState number (0–8)", num)
	}
	return 0, invalidParams("status", "must be a TaskState name such as TASK_STATE_WORKING")
}
