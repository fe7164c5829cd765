package mcpserver

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// stdioLines stands between a host's stdin and stdout and the SDK's
// IOTransport, which ends the session at the first line it cannot decode
// and, once its input ends, writes no more replies. stdioLines reads the
// host's lines itself and passes on only the messages the SDK accepts,
// one compact line each; every other line it answers itself, with a
// JSON-RPC error under a null id (-32700 for a line that is not JSON,
// -32600 for JSON that is not a message, or too long), and reads on. At
// the end of its input it holds the SDK's reader until every call passed
// on has been answered, so that a host which writes its requests and
// closes stdin at once still gets every answer.
//
// What the SDK would refuse by ending the session is refused here
// instead: an id already in use by a call not yet answered (the SDK
// drops such a call without a word), and a batch where the negotiated
// protocol (2025-06-18 on) has none.
type stdioLines struct {
	in  *bufio.Reader
	out io.Writer
	// max bounds one line, newline excluded.
	max int

	// buf is what is left of the line the SDK is reading.
	buf []byte
	// line is the line being read, reused.
	line []byte
	eof  bool

	writeMu sync.Mutex // one message a Write on out

	mu sync.Mutex
	// pending are the calls passed on and not yet answered.
	pending map[jsonrpc.ID]bool
	// initID is the id of an initialize call not yet answered.
	initID jsonrpc.ID
	// version is the protocol version the initialize answer agreed.
	version string
	// changed is closed and replaced when pending shrinks or the
	// transport closes.
	changed chan struct{}
	closed  bool
	broken  bool // a write to out failed: no answer will come
}

// batchesUntil is the first protocol version without JSON-RPC batches.
const batchesUntil = "2025-06-18"

// maxDepth bounds a message's nesting, below the SDK's own bound (1,000)
// so that a batch of messages within it is within it too.
const maxDepth = 500

func newStdioLines(in io.Reader, out io.Writer, maxLine int) *stdioLines {
	return &stdioLines{
		in:      bufio.NewReaderSize(in, 64<<10),
		out:     out,
		max:     maxLine,
		pending: make(map[jsonrpc.ID]bool),
		changed: make(chan struct{}),
	}
}

// Read gives the SDK the next message it accepts, as one line; at the
// end of the input, io.EOF once every call passed on is answered (or the
// transport closed).
func (s *stdioLines) Read(p []byte) (int, error) {
	for len(s.buf) == 0 {
		if s.eof {
			s.awaitAnswers()
			return 0, io.EOF
		}
		line, tooLong, err := s.readLine()
		if err != nil && !errors.Is(err, io.EOF) {
			return 0, err
		}
		s.eof = err != nil
		s.buf = s.accept(line, tooLong)
	}
	n := copy(p, s.buf)
	s.buf = s.buf[n:]
	return n, nil
}

// readLine reads one line, without its line ending. A line longer than
// s.max is read to its end and dropped: tooLong says so.
func (s *stdioLines) readLine() (line []byte, tooLong bool, err error) {
	s.line = s.line[:0]
	for {
		chunk, err := s.in.ReadSlice('\n')
		if !tooLong {
			if len(s.line)+len(chunk) > s.max+2 { // \r\n is not the message
				tooLong = true
				s.line = s.line[:0]
			} else {
				s.line = append(s.line, chunk...)
			}
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		line := bytes.TrimSuffix(bytes.TrimSuffix(s.line, []byte("\n")), []byte("\r"))
		if !tooLong && len(line) > s.max {
			tooLong, line = true, nil
		}
		return line, tooLong, err
	}
}

// accept returns the line for the SDK (compact, one line, with its
// newline), or nil when it is blank or was answered here.
func (s *stdioLines) accept(line []byte, tooLong bool) []byte {
	if tooLong {
		s.refuse(jsonrpc.ID{}, jsonrpc.CodeInvalidRequest, fmt.Sprintf("invalid request: a message is at most %d bytes", s.max))
		return nil
	}
	line = bytes.TrimSpace(line)
	if len(line) == 0 {
		return nil // as the SDK, which skips white space between messages
	}
	if !json.Valid(line) {
		s.refuse(jsonrpc.ID{}, jsonrpc.CodeParseError, "parse error: "+parseError(line))
		return nil
	}
	if depth(line) > maxDepth {
		s.refuse(jsonrpc.ID{}, jsonrpc.CodeInvalidRequest, fmt.Sprintf("invalid request: nested deeper than %d", maxDepth))
		return nil
	}
	var compact bytes.Buffer
	compact.Grow(len(line) + 1)
	if err := json.Compact(&compact, line); err != nil {
		s.refuse(jsonrpc.ID{}, jsonrpc.CodeParseError, "parse error: "+err.Error())
		return nil
	}
	line = compact.Bytes()
	if line[0] == '[' {
		return s.acceptBatch(line)
	} else {
		msg, err := jsonrpc.DecodeMessage(line)
		if err != nil {
			s.refuse(s.idOf(line), jsonrpc.CodeInvalidRequest, "invalid request: "+plainDecodeError(err))
			return nil
		}
		if !s.track([]jsonrpc.Message{msg}) {
			return nil
		}
	}
	return append(line, '\n')
}

// acceptBatch checks a batch as the SDK reads it, tracks its calls and
// returns the lines for the SDK, or nil. The SDK waits for an answer to
// each message of a batch before it answers the batch, notifications
// included, which have none: a batch's notifications and responses go to
// it as lines of their own, before the batch of its calls (the order
// within a batch is free).
func (s *stdioLines) acceptBatch(line []byte) []byte {
	var raws []json.RawMessage
	if err := json.Unmarshal(line, &raws); err != nil {
		s.refuse(jsonrpc.ID{}, jsonrpc.CodeParseError, "parse error: "+err.Error())
		return nil
	}
	s.mu.Lock()
	version, initializing := s.version, s.initID.IsValid()
	s.mu.Unlock()
	switch {
	case len(raws) == 0:
		s.refuse(jsonrpc.ID{}, jsonrpc.CodeInvalidRequest, "invalid request: an empty batch")
		return nil
	case version >= batchesUntil:
		s.refuse(jsonrpc.ID{}, jsonrpc.CodeInvalidRequest, "invalid request: protocol version "+version+" has no batches")
		return nil
	case initializing:
		s.refuse(jsonrpc.ID{}, jsonrpc.CodeInvalidRequest, "invalid request: a batch before initialize is answered")
		return nil
	}
	msgs := make([]jsonrpc.Message, 0, len(raws))
	var out, calls []byte
	for i, raw := range raws {
		msg, err := jsonrpc.DecodeMessage(raw)
		if err != nil {
			s.refuse(jsonrpc.ID{}, jsonrpc.CodeInvalidRequest, fmt.Sprintf("invalid request: batch item %d: %s", i, plainDecodeError(err)))
			return nil
		}
		req, ok := msg.(*jsonrpc.Request)
		if ok && req.Method == "initialize" {
			s.refuse(jsonrpc.ID{}, jsonrpc.CodeInvalidRequest, "invalid request: initialize in a batch")
			return nil
		}
		msgs = append(msgs, msg)
		if ok && req.IsCall() {
			calls = append(append(calls, ','), raw...)
		} else {
			out = append(append(out, raw...), '\n')
		}
	}
	if !s.track(msgs) {
		return nil
	}
	if len(calls) > 0 {
		calls[0] = '['
		out = append(append(out, calls...), ']', '\n')
	}
	return out
}

// track records the calls among msgs as pending, or refuses them all if
// one's id is in use.
func (s *stdioLines) track(msgs []jsonrpc.Message) bool {
	s.mu.Lock()
	var calls []*jsonrpc.Request
	seen := map[jsonrpc.ID]bool{}
	var dup jsonrpc.ID
	for _, m := range msgs {
		req, ok := m.(*jsonrpc.Request)
		if !ok || !req.IsCall() {
			continue
		}
		if s.pending[req.ID] || seen[req.ID] {
			dup = req.ID
			break
		}
		seen[req.ID] = true
		calls = append(calls, req)
	}
	if dup.IsValid() {
		s.mu.Unlock()
		s.refuse(jsonrpc.ID{}, jsonrpc.CodeInvalidRequest, fmt.Sprintf("invalid request: id %s is in use by a call not yet answered", idText(dup)))
		return false
	}
	for _, req := range calls {
		// A subscriptions/listen call lasts as long as the session:
		// nobody is listening once the input ends.
		if req.Method != "subscriptions/listen" {
			s.pending[req.ID] = true
		}
		if req.Method == "initialize" {
			s.initID = req.ID
		}
	}
	s.mu.Unlock()
	return true
}

// idOf is the id of a message that is wrong otherwise, if it has one
// that is usable and not in use; else the null id.
func (s *stdioLines) idOf(line []byte) jsonrpc.ID {
	var probe struct {
		ID any `json:"id"`
	}
	if json.Unmarshal(line, &probe) != nil {
		return jsonrpc.ID{}
	}
	if f, ok := probe.ID.(float64); ok && f != float64(int64(f)) {
		return jsonrpc.ID{}
	}
	id, err := jsonrpc.MakeID(probe.ID)
	if err != nil {
		return jsonrpc.ID{}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pending[id] {
		return jsonrpc.ID{}
	}
	return id
}

// refuse answers a line here, under id (null if not valid).
func (s *stdioLines) refuse(id jsonrpc.ID, code int64, msg string) {
	data, err := json.Marshal(struct {
		JSONRPC string         `json:"jsonrpc"`
		ID      any            `json:"id"`
		Error   *jsonrpc.Error `json:"error"`
	}{"2.0", id.Raw(), &jsonrpc.Error{Code: code, Message: msg}})
	if err != nil {
		panic(err) // strings and numbers only
	}
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	if _, err := s.out.Write(append(data, '\n')); err != nil {
		s.setBroken()
	}
}

// Write writes one of the SDK's messages (a line) and marks the answers
// in it.
func (s *stdioLines) Write(p []byte) (int, error) {
	s.writeMu.Lock()
	n, err := s.out.Write(p)
	s.writeMu.Unlock()
	if err != nil {
		s.setBroken()
		return n, err
	}
	s.answered(bytes.TrimSpace(p))
	return n, nil
}

// answered notes the responses in an outgoing line.
func (s *stdioLines) answered(line []byte) {
	s.mu.Lock()
	idle := len(s.pending) == 0
	s.mu.Unlock()
	if idle || len(line) == 0 {
		return
	}
	var raws []json.RawMessage
	if line[0] == '[' {
		if json.Unmarshal(line, &raws) != nil {
			return
		}
	} else {
		raws = []json.RawMessage{line}
	}
	for _, raw := range raws {
		msg, err := jsonrpc.DecodeMessage(raw)
		if err != nil {
			continue
		}
		resp, ok := msg.(*jsonrpc.Response)
		if !ok {
			continue
		}
		s.mu.Lock()
		if s.initID.IsValid() && resp.ID == s.initID {
			var r struct {
				ProtocolVersion string `json:"protocolVersion"`
			}
			if resp.Error == nil && json.Unmarshal(resp.Result, &r) == nil {
				s.version = r.ProtocolVersion
			}
			s.initID = jsonrpc.ID{}
		}
		if s.pending[resp.ID] {
			delete(s.pending, resp.ID)
			s.signalLocked()
		}
		s.mu.Unlock()
	}
}

// awaitAnswers returns once no call passed on is unanswered, or no
// answer can come.
func (s *stdioLines) awaitAnswers() {
	for {
		s.mu.Lock()
		if len(s.pending) == 0 || s.closed || s.broken {
			s.mu.Unlock()
			return
		}
		ch := s.changed
		s.mu.Unlock()
		<-ch
	}
}

func (s *stdioLines) setBroken() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.broken = true
	s.signalLocked()
}

func (s *stdioLines) signalLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// Close ends a wait for answers; the input itself is the host's to close.
func (s *stdioLines) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		s.closed = true
		s.signalLocked()
	}
	return nil
}

// reader and writer are the two ends the SDK's IOTransport takes.
func (s *stdioLines) reader() io.ReadCloser { return stdioReader{s} }
func (s *stdioLines) writer() io.WriteCloser {
	return stdioWriter{s}
}

type stdioReader struct{ s *stdioLines }

func (r stdioReader) Read(p []byte) (int, error) { return r.s.Read(p) }
func (r stdioReader) Close() error               { return r.s.Close() }

type stdioWriter struct{ s *stdioLines }

func (w stdioWriter) Write(p []byte) (int, error) { return w.s.Write(p) }
func (stdioWriter) Close() error                  { return nil }

// parseError says where a line stops being JSON.
func parseError(line []byte) string {
	var v any
	dec := json.NewDecoder(bytes.NewReader(line))
	if err := dec.Decode(&v); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return "the line ends inside a JSON value"
		}
		return err.Error()
	}
	if dec.More() {
		return "more than one JSON value on a line"
	}
	return "not valid JSON"
}

// plainDecodeError is the SDK's decoding error without its prefix, and
// short: the SDK repeats a bad version tag whole.
func plainDecodeError(err error) string {
	msg := strings.TrimPrefix(err.Error(), "unmarshaling jsonrpc message: ")
	return clip(strings.ToValidUTF8(msg, "\uFFFD"), 4*maxEcho)
}

func idText(id jsonrpc.ID) string {
	data, err := json.Marshal(id.Raw())
	if err != nil {
		return "?"
	}
	return truncate(string(data))
}

// depth is the deepest nesting of arrays and objects in valid JSON.
func depth(data []byte) int {
	var d, most int
	inString, escaped := false, false
	for _, b := range data {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case b == '\\':
				escaped = true
			case b == '"':
				inString = false
			}
		case b == '"':
			inString = true
		case b == '{' || b == '[':
			d++
			most = max(most, d)
		case b == '}' || b == ']':
			d--
		}
	}
	return most
}
