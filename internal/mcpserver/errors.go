package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/errandhq/errand/store"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/internal/api"
	"github.com/errandhq/errand/internal/apiclient"
)

// argumentError is a tool argument that is wrong (field names it), or a
// request the task's state refuses (field is empty): either way the
// client's to fix, and its text is shown as it is.
type argumentError struct{ field, msg string }

func (e *argumentError) Error() string {
	if e.field == "" {
		return e.msg
	}
	return "invalid " + e.field + ": " + e.msg
}

func argError(field, format string, args ...any) error {
	return &argumentError{field: field, msg: fmt.Sprintf(format, args...)}
}

// toolError turns err into the error a client sees (as a tool error):
// what it did wrong, or what stands in its way. A fault of ours is logged
// and shown without internals.
func (s *server) toolError(ctx context.Context, tool string, err error) error {
	var (
		arg  *argumentError
		inv  *errand.ValidationError
		tr   *errand.TransitionError
		ae   *apiclient.Error
		ue   *apiclient.UnreachableError
		full *store.DiskFullError
	)
	switch {
	case errors.As(err, &arg):
		return arg
	case errors.As(err, &inv):
		return errors.New(plain(inv.Error()))
	case errors.As(err, &tr):
		return fmt.Errorf("task %s is %s and cannot become %s", tr.TaskID, tr.From, tr.To)
	case errors.Is(err, errIdempotencyConflict), errors.Is(err, errand.ErrInputClosed), errors.Is(err, errand.ErrParentEnded):
		return errors.New(plain(err.Error()))
	case errors.Is(err, errand.ErrNotFound):
		return errors.New("no such task")
	case errors.As(err, &ue):
		return fmt.Errorf("cannot reach the errand daemon at %s: is `errand serve` running? (%v)", ue.URL, ue.Err)
	case errors.As(err, &ae) && ae.Status == http.StatusUnauthorized:
		return errors.New("the errand daemon refused the token (HTTP 401): pass --token, set ERRAND_TOKEN, or check $ERRAND_HOME/token")
	case errors.As(err, &ae) && (ae.Status < 500 || ae.Status == http.StatusInsufficientStorage):
		// A 507 is the daemon's disk full: its message says which and what to do.
		return errors.New(plain(ae.Message))
	case errors.As(err, &full):
		// As the HTTP API says it (a 507): the client may retry once space is freed.
		s.log.ErrorContext(ctx, "mcp tool failed: the store's disk is full", slog.String("tool", tool), slog.Any("err", err))
		return errors.New(full.Error() + "; nothing was written: free space on that disk and try again")
	case ctx.Err() != nil:
		return fmt.Errorf("%s stopped: %w", tool, context.Cause(ctx))
	}
	s.log.ErrorContext(ctx, "mcp tool failed", slog.String("tool", tool), slog.Any("err", err))
	if errors.As(err, &ae) {
		return fmt.Errorf("the errand daemon failed (HTTP %d); its log says why", ae.Status)
	}
	return errors.New("internal error; errand's log says why")
}

// taskError names the task an unknown-task error is about.
func taskError(err error, taskID string) error {
	if errors.Is(err, errand.ErrNotFound) {
		return argError("task_id", "no task %s", taskID)
	}
	return err
}

// isCode reports whether err is the error either backend gives for the
// API error code: conflict (an illegal transition) or input_closed.
func isCode(err error, code string) bool {
	if err == nil {
		return false
	}
	var ae *apiclient.Error
	if errors.As(err, &ae) {
		return ae.Code == code
	}
	switch code {
	case api.CodeConflict:
		return errors.Is(err, errand.ErrIllegalTransition)
	case api.CodeInputClosed:
		return errors.Is(err, errand.ErrInputClosed)
	}
	return false
}

// plain drops the package prefix of errand's errors.
func plain(msg string) string { return strings.TrimPrefix(msg, "errand: ") }

// maxEcho bounds how much of one thing a client sent an error repeats;
// maxErrorBytes bounds an error's whole text.
const (
	maxEcho       = 64
	maxErrorBytes = 1000
)

// truncate cuts s, which a client sent, to at most maxEcho bytes and
// "…", on a rune boundary, with invalid UTF-8 replaced: an error that
// repeats a client's input repeats only the start of it.
func truncate(s string) string {
	return clip(strings.ToValidUTF8(s, "\uFFFD"), maxEcho)
}

// capEchoes shortens, in the errors of tools/call and resources/read,
// every string the client sent that is longer than maxEcho to its start
// and "…", and each error to maxErrorBytes. The SDK's own errors (schema
// validation, unknown tool) repeat a value whole; so does an error the
// daemon's API returns. errand's own tool errors truncate as they write.
func capEchoes(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		r, _ := res.(*mcp.CallToolResult)
		if err == nil && (r == nil || !r.IsError) {
			return res, err
		}
		long := longInputs(req)
		if r != nil && r.IsError {
			for _, c := range r.Content {
				if tc, ok := c.(*mcp.TextContent); ok {
					tc.Text = shorten(tc.Text, long)
				}
			}
		}
		if err != nil {
			msg := shorten(err.Error(), long)
			var we *jsonrpc.Error
			if errors.As(err, &we) {
				return res, &jsonrpc.Error{Code: we.Code, Message: msg, Data: we.Data}
			}
			return res, errors.New(msg)
		}
		return res, nil
	}
}

// longInputs are the strings of a request longer than maxEcho: a tool's
// name, its arguments' keys and values, a resource's URI.
func longInputs(req mcp.Request) []string {
	var long []string
	add := func(s string) {
		if len(s) > maxEcho {
			long = append(long, s)
		}
	}
	switch p := req.GetParams().(type) {
	case *mcp.CallToolParamsRaw:
		add(p.Name)
		var args any
		if json.Unmarshal(p.Arguments, &args) == nil {
			walkStrings(args, add)
		}
	case *mcp.ReadResourceParams:
		add(p.URI)
	}
	return long
}

func walkStrings(v any, f func(string)) {
	switch v := v.(type) {
	case string:
		f(v)
	case []any:
		for _, e := range v {
			walkStrings(e, f)
		}
	case map[string]any:
		for k, e := range v {
			f(k)
			walkStrings(e, f)
		}
	}
}

// shorten replaces in msg each run that repeats the start of one of long
// (as it is, quoted as Go quotes or as JSON escapes) with that start and
// "…", then bounds msg to maxErrorBytes of valid UTF-8.
func shorten(msg string, long []string) string {
	for _, s := range long {
		quoted := strconv.Quote(s)
		js, _ := json.Marshal(s)
		forms := []string{s, quoted[1 : len(quoted)-1], string(js[1 : len(js)-1])}
		slices.Sort(forms)
		for _, form := range slices.Compact(forms) {
			msg = shortenRuns(msg, form)
		}
	}
	return clip(strings.ToValidUTF8(msg, "\uFFFD"), maxErrorBytes)
}

// shortenRuns replaces each run of msg that begins with s's first maxEcho
// bytes, and goes on as far as it matches s, with truncate(s).
func shortenRuns(msg, s string) string {
	if len(s) <= maxEcho {
		return msg
	}
	head := s[:maxEcho]
	var b strings.Builder
	for {
		i := strings.Index(msg, head)
		if i < 0 {
			break
		}
		n := maxEcho
		for i+n < len(msg) && n < len(s) && msg[i+n] == s[n] {
			n++
		}
		if n == maxEcho && strings.HasPrefix(msg[i+n:], "…") {
			b.WriteString(msg[:i+n]) // shortened already, in another form
		} else {
			b.WriteString(msg[:i])
			b.WriteString(truncate(s))
		}
		msg = msg[i+n:]
	}
	if b.Len() == 0 {
		return msg
	}
	b.WriteString(msg)
	return b.String()
}
