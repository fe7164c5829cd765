package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"

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
		arg *argumentError
		inv *errand.ValidationError
		tr  *errand.TransitionError
		ae  *apiclient.Error
		ue  *apiclient.UnreachableError
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
	case errors.As(err, &ae) && ae.Status < 500:
		return errors.New(plain(ae.Message))
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
