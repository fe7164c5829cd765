package server

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/internal/clock"
)

// smallBuffers shrinks a TCP connection's kernel buffers so that a reader
// that stops reading is felt after kilobytes, not megabytes.
type smallBuffers struct{ net.Listener }

func (l smallBuffers) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tcp, ok := c.(*net.TCPConn); ok {
		tcp.SetWriteBuffer(1024)
	}
	return c, err
}

// TestSlowStreamClientIsDisconnected: a client that stops reading never
// holds up anyone else; once a write to it stalls past WriteTimeout its
// stream ends (it would resume with Last-Event-ID).
func TestSlowStreamClientIsDisconnected(t *testing.T) {
	c, err := errand.Open(t.Context(), filepath.Join(t.TempDir(), "errand.db"), nil)
	require.NoError(t, err)
	defer c.Close()
	streams := make(chan bool, 10)
	srv := New(Config{
		Client: c, Token: testToken, Clock: clock.New(),
		WriteTimeout: 50 * time.Millisecond,
		OnStream:     func(open bool) { streams <- open },
	})
	hs := httptest.NewUnstartedServer(srv.Handler())
	hs.Listener = smallBuffers{hs.Listener}
	hs.Start()
	defer hs.Close()
	defer srv.CloseStreams()

	var dialer net.Dialer
	client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := dialer.DialContext(ctx, network, addr)
		if tcp, ok := conn.(*net.TCPConn); ok {
			tcp.SetReadBuffer(1024)
		}
		return conn, err
	}}}
	req, _ := http.NewRequestWithContext(t.Context(), "GET", hs.URL+"/api/events", nil)
	req.Header.Set("Authorization", "Bearer "+testToken)
	res, err := client.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	require.True(t, <-streams)

	// The client reads nothing more; submitting goes on regardless.
	big := fmt.Sprintf(`{"pad":"%0512d"}`, 0)
	for i := range 2000 {
		_, err := c.Submit(t.Context(), &errand.SubmitParams{Goal: fmt.Sprintf("task %d", i), Metadata: []byte(big)})
		require.NoError(t, err)
		select {
		case open := <-streams:
			require.False(t, open)
			return // the stalled stream was closed
		default:
		}
	}
	select {
	case open := <-streams:
		require.False(t, open)
	case <-time.After(30 * time.Second):
		t.Fatal("the stalled stream was never closed")
	}
}
