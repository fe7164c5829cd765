package daemon

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/internal/apiclient"
	"github.com/errandhq/errand/internal/telemetry"
	"github.com/errandhq/errand/internal/telemetry/telemetrytest"
)

// With OTEL_EXPORTER_OTLP_ENDPOINT set, errand serve exports the traces
// of its runs, the run of a POST /api/tasks that carried a traceparent
// under the caller's span, and sends the last ones as it stops.
func TestServeExportsTraces(t *testing.T) {
	home := t.TempDir()
	rcv := telemetrytest.NewReceiver(t)
	script := "#!/bin/sh\ncat >/dev/null\nprintf '{\"status\":\"finish\",\"output\":\"ok\"}\\n'\n"
	require.NoError(t, os.WriteFile(filepath.Join(home, "step.sh"), []byte(script), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(home, "errand.yaml"),
		[]byte("agents:\n  default: {kind: exec, command: ["+strconv.Quote(filepath.Join(home, "step.sh"))+"]}\ntelemetry:\n  service_name: errand-serve-test\n"), 0o600))

	url, token, stop := serveForTraces(t, home, map[string]string{telemetry.EnvEndpoint: rcv.URL(), telemetry.EnvServiceName: "loses-to-the-config"})

	const caller = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	req, err := http.NewRequestWithContext(t.Context(), "POST", url+"/api/tasks", strings.NewReader(`{"goal":"traced"}`))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Traceparent", caller)
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	var task struct {
		ID string `json:"id"`
	}
	require.NoError(t, json.NewDecoder(res.Body).Decode(&task))
	res.Body.Close()
	require.Equal(t, http.StatusCreated, res.StatusCode)
	waitEvent(t, apiclient.New(url, token, nil), task.ID, "task.completed")
	require.NoError(t, stop())

	spans := rcv.Spans()
	var attempt *telemetrytest.Span
	for i, s := range spans {
		require.Equal(t, "4bf92f3577b34da6a3ce929d0e0e4736", s.TraceID, s.Name)
		require.Equal(t, "errand-serve-test", s.Service, "the config's service_name wins")
		if s.Name == telemetry.SpanAttempt {
			attempt = &spans[i]
		}
	}
	require.NotNil(t, attempt, "sent as the daemon stopped")
	require.Equal(t, "00f067aa0ba902b7", attempt.ParentSpanID)
	require.Equal(t, task.ID, attempt.Attrs[telemetry.AttrTaskID])
	require.Equal(t, "completed", attempt.Attrs[telemetry.AttrOutcome])
}

// errand serve with traces on wires them through its faces: a webhook
// delivery carries the traceparent of the run whose event it delivers,
// and an A2A message's traceparent parents the run it submits, as on
// POST /api/tasks.
func TestServeCarriesTracesThroughItsFaces(t *testing.T) {
	home := t.TempDir()
	rcv := telemetrytest.NewReceiver(t)
	delivered := make(chan string, 16)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		delivered <- r.Header.Get("Traceparent")
	}))
	defer hook.Close()
	script := "#!/bin/sh\ncat >/dev/null\nprintf '{\"status\":\"finish\",\"output\":\"ok\"}\\n'\n"
	require.NoError(t, os.WriteFile(filepath.Join(home, "step.sh"), []byte(script), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(home, "errand.yaml"), []byte(
		"agents:\n  default: {kind: exec, command: ["+strconv.Quote(filepath.Join(home, "step.sh"))+"]}\n"+
			"webhooks:\n  - {url: "+strconv.Quote(hook.URL)+", secret: s3cret, events: [task.completed], allow_private: true}\n"), 0o600))

	url, token, stop := serveForTraces(t, home, map[string]string{telemetry.EnvEndpoint: rcv.URL()})

	const (
		callerTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
		callerSpan  = "00f067aa0ba902b7"
	)
	body := `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m-1","role":"ROLE_USER","parts":[{"text":"traced over A2A"}]}}}`
	req, err := http.NewRequestWithContext(t.Context(), "POST", url+"/a2a", strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Traceparent", "00-"+callerTrace+"-"+callerSpan+"-01")
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	reply, _ := io.ReadAll(res.Body)
	res.Body.Close()
	require.Equal(t, http.StatusOK, res.StatusCode, string(reply))
	require.NotContains(t, string(reply), `"error"`)

	var got string
	select {
	case got = <-delivered:
	case <-t.Context().Done():
		t.Fatal("no webhook delivery")
	}
	parts := strings.Split(got, "-")
	require.Len(t, parts, 4, "the delivery's traceparent %q", got)
	require.Equal(t, callerTrace, parts[1], "the delivery is in the run's trace, which is the caller's")
	require.NoError(t, stop())

	var attempt *telemetrytest.Span
	for i, s := range rcv.Spans() {
		if s.Name == telemetry.SpanAttempt {
			attempt = &rcv.Spans()[i]
		}
	}
	require.NotNil(t, attempt)
	require.Equal(t, callerTrace, attempt.TraceID, "the A2A caller's trace")
	require.Equal(t, callerSpan, attempt.ParentSpanID, "under the A2A caller's span")
}

// serveForTraces runs errand serve on home with the variables vars adds
// to ERRAND_HOME, and returns its URL, its API token and a stop that
// waits for it to end.
func serveForTraces(t *testing.T, home string, vars map[string]string) (url, token string, stop func() error) {
	t.Helper()
	vars["ERRAND_HOME"] = home
	ready := make(chan net.Addr, 1)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, &Options{Listen: "127.0.0.1:0", Lookup: env(vars), Stderr: io.Discard, Ready: func(a net.Addr) { ready <- a }})
	}()
	select {
	case a := <-ready:
		url = "http://" + a.String()
	case err := <-done:
		t.Fatalf("daemon did not start: %v", err)
	}
	b, err := os.ReadFile(filepath.Join(home, TokenFile))
	require.NoError(t, err)
	return url, strings.TrimSpace(string(b)), func() error { cancel(); return <-done }
}
