package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/internal/api"
	"github.com/errandhq/errand/store"
)

// codeDiskFull is the error code of a write the store's disk had no room
// for (507): unlike a 500, the client may retry, once space is freed.
const codeDiskFull = "disk_full"

// badRequest is a malformed request: bad JSON, an unknown field, a bad
// query parameter. It is always a 400.
type badRequest struct {
	field, msg string
}

func (e *badRequest) Error() string { return e.msg }

func malformed(field, format string, args ...any) error {
	return &badRequest{field: field, msg: fmt.Sprintf(format, args...)}
}

// fail writes the response fitting err.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, context.Canceled) && r.Context().Err() != nil {
		return // the client went away; there is nobody to answer
	}
	status, detail := s.classify(err, r.Method+" "+r.URL.Path)
	switch status {
	case http.StatusNotFound:
		if detail.Message == "" {
			detail.Message = notFoundMessage(r)
		}
	case http.StatusRequestTimeout, http.StatusRequestEntityTooLarge:
		// What is left of the body is not wanted: it is not read, and
		// the connection not reused.
		w.Header().Set("Connection", "close")
	}
	s.writeJSON(w, status, api.ErrorBody{Error: detail})
}

// classify maps err to a status and error body. Anything not recognised
// is a real fault: logged with what, and answered with a 500 that shows
// no internals.
func (s *Server) classify(err error, what string) (int, api.ErrorDetail) {
	var (
		bad   *badRequest
		inv   *errand.ValidationError
		tr    *errand.TransitionError
		big   *http.MaxBytesError
		limit *errand.BudgetExceededError
		slow  *bodyTimeoutError
		full  *store.DiskFullError
	)
	d := func(code, msg, field string) api.ErrorDetail {
		return api.ErrorDetail{Code: code, Message: msg, Field: field}
	}
	switch {
	case errors.As(err, &bad):
		return http.StatusBadRequest, d(api.CodeBadRequest, bad.msg, bad.field)
	case errors.As(err, &big):
		return http.StatusRequestEntityTooLarge, d(api.CodeTooLarge, tooLargeMessage(big.Limit), "")
	case errors.As(err, &slow):
		return http.StatusRequestTimeout, d(api.CodeTimeout, slow.Error(), "")
	case errors.As(err, &inv) && inv.Unprocessable:
		return http.StatusUnprocessableEntity, d(api.CodeInvalid, invalidMessage(inv), inv.Field)
	case errors.As(err, &inv):
		return http.StatusBadRequest, d(api.CodeInvalid, invalidMessage(inv), inv.Field)
	case errors.Is(err, errand.ErrParentEnded):
		return http.StatusConflict, d(api.CodeParentEnded, err.Error(), "parent_id")
	case errors.Is(err, errDuplicate):
		return http.StatusConflict, d("duplicate", strings.TrimPrefix(err.Error(), "duplicate: "), "idempotency_key")
	case errors.As(err, &tr):
		return http.StatusConflict, d(api.CodeConflict, tr.Error(), "")
	case errors.Is(err, errand.ErrInputClosed):
		return http.StatusConflict, d(api.CodeInputClosed, err.Error(), "")
	case errors.As(err, &limit):
		return http.StatusConflict, d("budget_exceeded", err.Error(), "")
	case errors.Is(err, errand.ErrSpendNotPaused):
		return http.StatusConflict, d(api.CodeNotPaused, err.Error(), "")
	case errors.Is(err, errand.ErrNameTaken):
		return http.StatusConflict, d(api.CodeNameTaken, err.Error(), "name")
	case errors.Is(err, errand.ErrDeclared):
		return http.StatusConflict, d(api.CodeDeclared, err.Error(), "")
	case errors.Is(err, errand.ErrNotFound):
		return http.StatusNotFound, d(api.CodeNotFound, "", "")
	case errors.As(err, &full):
		// Nothing was written; the operator must free space, and the
		// message says where, since the log may not be at hand.
		s.log.Error("request failed: the store's disk is full", "request", what, "err", err)
		return http.StatusInsufficientStorage, d(codeDiskFull, full.Error()+"; nothing was written: free space on that disk and try again", "")
	case errors.Is(err, context.Canceled):
		// The server is stopping under a request whose client is still
		// there: it can try again elsewhere or later.
		return http.StatusServiceUnavailable, d(api.CodeUnavailable, "the server is stopping; try again", "")
	default:
		s.log.Error("request failed", "request", what, "err", err)
		return http.StatusInternalServerError, d(api.CodeInternal, "internal error", "")
	}
}

// invalidMessage is a validation error's message: "errand: invalid goal:
// …" names its field, and one with no single field at fault reads
// "errand: invalid request: …", not "errand: invalid : …".
func invalidMessage(inv *errand.ValidationError) string {
	if inv.Field == "" {
		return "errand: invalid request: " + inv.Message
	}
	return inv.Error()
}

func (s *Server) writeError(w http.ResponseWriter, status int, code, msg, field string) {
	s.writeJSON(w, status, api.ErrorBody{Error: api.ErrorDetail{Code: code, Message: msg, Field: field}})
}

// writeJSON answers with v. A value that cannot be written as JSON is a
// fault of ours: logged, and answered with a 500 that holds no part of it.
func (s *Server) writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		s.log.Error("encode response", "type", fmt.Sprintf("%T", v), "err", err)
		status = http.StatusInternalServerError
		b = []byte(`{"error":{"code":"internal","message":"internal error"}}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

// decode reads one JSON value of the body into v, strictly: unknown
// fields and trailing bytes are errors. An empty body is allowed when
// optional is true (v keeps its zero value).
func (s *Server) decode(w http.ResponseWriter, r *http.Request, v any, optional bool) error {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes))
	if err != nil {
		return err
	}
	return decodeStrict(body, v, optional)
}

func decodeStrict(body []byte, v any, optional bool) error {
	if len(bytes.TrimSpace(body)) == 0 {
		if optional {
			return nil
		}
		return malformed("", "a JSON request body is required")
	}
	if json.Valid(body) {
		// Keys and text first: their errors name the field, at any depth.
		if err := checkKeys(body, reflect.TypeOf(v), ""); err != nil {
			return err
		}
		if err := checkUTF8(body); err != nil {
			return err
		}
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return describeJSONError(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return malformed("", "unexpected data after the JSON body")
	}
	return nil
}

func describeJSONError(err error) error {
	var (
		syn *json.SyntaxError
		typ *json.UnmarshalTypeError
	)
	switch {
	case errors.As(err, &syn):
		return malformed("", "malformed JSON at byte %d: %v", syn.Offset, syn)
	case errors.As(err, &typ):
		field := typ.Field
		if field == "" {
			return malformed("", "the body must be a JSON object")
		}
		return malformed(field, "%s must be %s, not %s", field, describeType(typ.Type.String()), typ.Value)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return malformed("", "the JSON body ends too early")
	default:
		// Unknown fields ("json: unknown field \"x\"") and custom
		// unmarshallers' errors (durations, times).
		return malformed("", "%s", err.Error())
	}
}

func describeType(t string) string {
	switch t {
	case "string":
		return "a string"
	case "int", "int64":
		return "an integer"
	case "float64":
		return "a number"
	case "bool":
		return "true or false"
	case "[]string":
		return "a list of strings"
	default:
		return "a " + t
	}
}

func notFoundMessage(r *http.Request) string {
	if id := r.PathValue("id"); id != "" {
		if strings.HasPrefix(r.URL.Path, "/api/schedules/") {
			return "no schedule " + id
		}
		if strings.HasPrefix(r.URL.Path, "/api/memories/") {
			return "no memory " + id
		}
		return "no task " + id
	}
	return "not found"
}
