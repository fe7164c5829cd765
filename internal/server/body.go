package server

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sync"
	"time"
)

// refuse answers an error without reading the request's body, and closes
// the connection after the answer. net/http reads up to 256 KiB of a body
// the handler left unread before it writes the answer (to keep the
// connection for the next request); a client that announces a body and
// sends it a byte at a time would hold the connection, unanswered, for as
// long as it likes. Connection: close skips that read, and an expired read
// deadline ends the one made when the body is closed.
func (s *Server) refuse(w http.ResponseWriter, r *http.Request, status int, code, msg, field string) {
	if r.ContentLength != 0 {
		w.Header().Set("Connection", "close")
		_ = http.NewResponseController(w).SetReadDeadline(time.Now())
	}
	s.writeError(w, status, code, msg, field)
}

func tooLargeMessage(limit int64) string {
	return fmt.Sprintf("the request body is larger than %d bytes", limit)
}

// bodyDeadline gives r's body BodyTimeout to arrive: the connection's
// read deadline is set now and cleared when the body has been read to its
// end, so that what the handler does next (a stream) is not cut off. A
// request without a body keeps its connection's deadlines as they are.
func (s *Server) bodyDeadline(w http.ResponseWriter, r *http.Request) *http.Request {
	if s.cfg.BodyTimeout < 0 || r.ContentLength == 0 || r.Body == nil || r.Body == http.NoBody {
		return r
	}
	rc := http.NewResponseController(w)
	if rc.SetReadDeadline(time.Now().Add(s.cfg.BodyTimeout)) != nil {
		return r // not over a connection (a test's recorder)
	}
	// A copy, as a handler must not change the request it was given
	// (net/http looks at the original's body after the handler).
	r = r.WithContext(r.Context())
	r.Body = &timedBody{ReadCloser: r.Body, timeout: s.cfg.BodyTimeout, setDeadline: rc.SetReadDeadline}
	return r
}

// timedBody is a request body under a read deadline: reading it to the end
// clears the deadline, and a read the deadline cut off is a
// *bodyTimeoutError.
type timedBody struct {
	io.ReadCloser
	timeout     time.Duration
	setDeadline func(time.Time) error
	once        sync.Once
}

func (b *timedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	switch {
	case err == io.EOF:
		b.once.Do(func() { _ = b.setDeadline(time.Time{}) })
	case isTimeout(err):
		err = &bodyTimeoutError{timeout: b.timeout}
	}
	return n, err
}

func isTimeout(err error) bool {
	var ne net.Error
	return err != nil && (errors.Is(err, os.ErrDeadlineExceeded) || errors.As(err, &ne) && ne.Timeout())
}

// bodyTimeoutError is a request body that did not arrive in time.
type bodyTimeoutError struct{ timeout time.Duration }

func (e *bodyTimeoutError) Error() string {
	return fmt.Sprintf("the request body did not arrive within %s", e.timeout)
}

func (e *bodyTimeoutError) Timeout() bool { return true }
