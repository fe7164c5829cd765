package a2a

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/errandhq/errand/internal/telemetry"
)

// JSON-RPC and A2A error codes.
const (
	CodeParseError                   = -32700
	CodeInvalidRequest               = -32600
	CodeMethodNotFound               = -32601
	CodeInvalidParams                = -32602
	CodeInternalError                = -32603
	CodeTaskNotFound                 = -32001
	CodeTaskNotCancelable            = -32002
	CodePushNotificationNotSupported = -32003
	CodeUnsupportedOperation         = -32004
	CodeContentTypeNotSupported      = -32005
	CodeVersionNotSupported          = -32009
)

// rpcError is a JSON-RPC error; data, when set, names the field at fault.
type rpcError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

func (e *rpcError) Error() string { return fmt.Sprintf("%s (code %d)", e.Message, e.Code) }

func rpcErr(code int, format string, args ...any) *rpcError {
	return &rpcError{Code: code, Message: fmt.Sprintf(format, args...)}
}

// invalidParams is a -32602 naming the field at fault.
func invalidParams(field, format string, args ...any) *rpcError {
	e := rpcErr(CodeInvalidParams, "%s: %s", field, fmt.Sprintf(format, args...))
	e.Data, _ = json.Marshal(map[string]string{"field": field})
	return e
}

// dialect is the version of A2A a method belongs to: its wire shapes.
type dialect int

const (
	dialectV1 dialect = iota + 1
	dialectV03
)

// Protocol versions, as cards and the A2A-Version header write them.
const (
	VersionV1  = "1.0"
	VersionV03 = "0.3"
)

func (d dialect) version() string {
	if d == dialectV03 {
		return VersionV03
	}
	return VersionV1
}

// op is what a method does, whichever version names it.
type op int

const (
	opSend op = iota + 1
	opStream
	opGet
	opList
	opCancel
	opSubscribe
	opPushSet
	opPushGet
	opPushList
	opPushDelete
	opExtendedCard
)

type method struct {
	dialect dialect
	op      op
}

// methods are the v1.0 names and their v0.3 aliases.
var methods = map[string]method{
	"SendMessage":                      {dialectV1, opSend},
	"SendStreamingMessage":             {dialectV1, opStream},
	"GetTask":                          {dialectV1, opGet},
	"ListTasks":                        {dialectV1, opList},
	"CancelTask":                       {dialectV1, opCancel},
	"SubscribeToTask":                  {dialectV1, opSubscribe},
	"CreateTaskPushNotificationConfig": {dialectV1, opPushSet},
	"GetTaskPushNotificationConfig":    {dialectV1, opPushGet},
	"ListTaskPushNotificationConfigs":  {dialectV1, opPushList},
	// The singular is how earlier drafts of v1.0 and some SDKs spell it.
	"ListTaskPushNotificationConfig":   {dialectV1, opPushList},
	"DeleteTaskPushNotificationConfig": {dialectV1, opPushDelete},
	"GetExtendedAgentCard":             {dialectV1, opExtendedCard},

	"message/send":                        {dialectV03, opSend},
	"message/stream":                      {dialectV03, opStream},
	"tasks/get":                           {dialectV03, opGet},
	"tasks/cancel":                        {dialectV03, opCancel},
	"tasks/resubscribe":                   {dialectV03, opSubscribe},
	"tasks/pushNotificationConfig/set":    {dialectV03, opPushSet},
	"tasks/pushNotificationConfig/get":    {dialectV03, opPushGet},
	"tasks/pushNotificationConfig/list":   {dialectV03, opPushList},
	"tasks/pushNotificationConfig/delete": {dialectV03, opPushDelete},
	"agent/getAuthenticatedExtendedCard":  {dialectV03, opExtendedCard},
}

// maxIDBytes bounds a request id: it is sent back with every answer.
const maxIDBytes = 256

// request is one JSON-RPC request, checked.
type request struct {
	id     json.RawMessage // a string or a number
	name   string
	method method
	params json.RawMessage // an object, or empty
	// traceparent is the request's W3C traceparent header when traces
	// are on: a task the request submits keeps it (Config.Traces).
	traceparent string
}

// readRequest reads and checks a JSON-RPC request. The error, with the id
// when one was read, is the answer to send.
func (s *Server) readRequest(w http.ResponseWriter, r *http.Request) (*request, json.RawMessage, *rpcError, int) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		return nil, nil, rpcErr(CodeInvalidRequest, "A2A's JSON-RPC binding takes POST requests, not %s", r.Method), http.StatusMethodNotAllowed
	}
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || (mt != "application/json" && mt != "application/a2a+json") {
			return nil, nil, rpcErr(CodeInvalidRequest, "Content-Type %q is not application/json", ct), http.StatusUnsupportedMediaType
		}
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes))
	if err != nil {
		if mbe := (*http.MaxBytesError)(nil); errors.As(err, &mbe) {
			return nil, nil, rpcErr(CodeInvalidRequest, "the request body is larger than %d bytes", s.cfg.MaxBodyBytes), http.StatusRequestEntityTooLarge
		}
		return nil, nil, rpcErr(CodeParseError, "read the request body: %v", err), http.StatusBadRequest
	}
	if !utf8.Valid(body) {
		return nil, nil, rpcErr(CodeParseError, "the request body is not valid UTF-8"), http.StatusOK
	}
	body = bytes.TrimSpace(body)
	if len(body) > 0 && body[0] == '[' {
		if !json.Valid(body) {
			return nil, nil, rpcErr(CodeParseError, "the request body is not valid JSON"), http.StatusOK
		}
		return nil, nil, rpcErr(CodeInvalidRequest, "batch requests are not supported: send one JSON-RPC request per HTTP request"), http.StatusOK
	}
	var env struct {
		JSONRPC *string         `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Method  *string         `json:"method"`
		Params  json.RawMessage `json:"params"`
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&env); err != nil {
		if len(body) > 0 && body[0] == '{' && json.Valid(body) {
			return nil, nil, rpcErr(CodeInvalidRequest, "the request is not a JSON-RPC request: %v", jsonProblem(err)), http.StatusOK
		}
		if len(body) > 0 && json.Valid(body) {
			return nil, nil, rpcErr(CodeInvalidRequest, "the request must be a JSON object"), http.StatusOK
		}
		return nil, nil, rpcErr(CodeParseError, "the request body is not valid JSON: %v", jsonProblem(err)), http.StatusOK
	}
	if dec.More() {
		return nil, nil, rpcErr(CodeParseError, "the request body holds more than one JSON value"), http.StatusOK
	}
	id, idErr := checkID(env.ID)
	if idErr != nil {
		return nil, nil, idErr, http.StatusOK
	}
	switch {
	case env.JSONRPC == nil || *env.JSONRPC != "2.0":
		return nil, id, rpcErr(CodeInvalidRequest, `"jsonrpc" must be "2.0"`), http.StatusOK
	case env.Method == nil || *env.Method == "":
		return nil, id, rpcErr(CodeInvalidRequest, `"method" is required`), http.StatusOK
	case id == nil:
		return nil, nil, rpcErr(CodeInvalidRequest, `"id" is required: every A2A method answers, and a request without an id is a notification, which gets none`), http.StatusOK
	}
	m, ok := methods[*env.Method]
	if !ok {
		return nil, id, rpcErr(CodeMethodNotFound, "method %q not found: A2A v1.0 methods (SendMessage, SendStreamingMessage, GetTask, ListTasks, CancelTask, SubscribeToTask, "+
			"CreateTaskPushNotificationConfig, GetTaskPushNotificationConfig, ListTaskPushNotificationConfigs, DeleteTaskPushNotificationConfig) "+
			"and their v0.3 names (message/send, tasks/get, …) are served", clip(*env.Method, 100)), http.StatusOK
	}
	params := bytes.TrimSpace(env.Params)
	if len(params) > 0 && !bytes.Equal(params, []byte("null")) && params[0] != '{' {
		return nil, id, invalidParams("params", "must be a JSON object"), http.StatusOK
	}
	if bytes.Equal(params, []byte("null")) {
		params = nil
	}
	if v := requestedVersion(r); v != "" && v != VersionV1 && v != VersionV03 {
		return nil, id, rpcErr(CodeVersionNotSupported, "A2A version %q is not supported: this agent speaks %s and %s", clip(v, 32), VersionV1, VersionV03), http.StatusOK
	}
	req := &request{id: id, name: *env.Method, method: m, params: params}
	if s.cfg.Traces {
		req.traceparent = telemetry.IncomingHeader(r.Header)
	}
	return req, id, nil, 0
}

// checkID accepts a string or number id (nil when absent or null).
func checkID(raw json.RawMessage) (json.RawMessage, *rpcError) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil, nil
	}
	if len(raw) > maxIDBytes {
		return nil, rpcErr(CodeInvalidRequest, `"id" is longer than %d bytes`, maxIDBytes)
	}
	switch raw[0] {
	case '"':
		return raw, nil
	case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		return raw, nil
	}
	return nil, rpcErr(CodeInvalidRequest, `"id" must be a string or a number`)
}

// requestedVersion is the A2A version the client asks for, major.minor;
// empty when it names none (A2A then means 0.3).
func requestedVersion(r *http.Request) string {
	v := strings.TrimSpace(r.Header.Get("A2A-Version"))
	if v == "" {
		v = strings.TrimSpace(r.Header.Get("X-A2A-Protocol-Version"))
	}
	if v == "" {
		return ""
	}
	major, rest, _ := strings.Cut(v, ".")
	minor, _, _ := strings.Cut(rest, ".")
	if minor == "" {
		minor = "0"
	}
	a, errA := strconv.Atoi(major)
	b, errB := strconv.Atoi(minor)
	if errA != nil || errB != nil || a < 0 || b < 0 {
		return v
	}
	return strconv.Itoa(a) + "." + strconv.Itoa(b)
}

func jsonKind(goKind string) string {
	switch goKind {
	case "string":
		return "string"
	case "bool":
		return "boolean"
	case "slice", "array":
		return "array"
	case "struct", "map", "ptr":
		return "object"
	}
	return "number"
}

// jsonProblem is err without the package's prefix.
func jsonProblem(err error) string {
	return strings.TrimPrefix(err.Error(), "json: ")
}

// clip shortens s for an error message.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// response is one JSON-RPC answer.
type response struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  any             `json:"result,omitempty"`
	Error   *rpcError       `json:"error,omitempty"`
}

// resultOrNull marks a result that is JSON null (v0.3's delete).
type resultOrNull struct{}

func (resultOrNull) MarshalJSON() ([]byte, error) { return []byte("null"), nil }

func encodeResponse(id json.RawMessage, result any, rerr *rpcError) []byte {
	if id == nil {
		id = json.RawMessage("null")
	}
	resp := response{JSONRPC: "2.0", ID: id, Error: rerr}
	if rerr == nil {
		resp.Result = result
		if result == nil {
			resp.Result = resultOrNull{}
		}
	}
	b, err := json.Marshal(resp)
	if err != nil {
		b, _ = json.Marshal(response{JSONRPC: "2.0", ID: id, Error: rpcErr(CodeInternalError, "encode the answer: %v", err)})
	}
	return b
}

func writeResponse(w http.ResponseWriter, status int, id json.RawMessage, result any, rerr *rpcError) {
	w.Header().Set("Content-Type", "application/json")
	if status == 0 {
		status = http.StatusOK
	}
	w.WriteHeader(status)
	_, _ = w.Write(encodeResponse(id, result, rerr))
}
