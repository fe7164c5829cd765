package telemetry

import (
	"context"
	"net"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"

	"github.com/errandhq/errand/internal/telemetry/telemetrytest"
)

// grpcReceiver keeps the spans exported to it over OTLP/gRPC.
type grpcReceiver struct {
	coltracepb.UnimplementedTraceServiceServer
	mu    sync.Mutex
	names []string
}

func (r *grpcReceiver) Export(_ context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rs := range req.GetResourceSpans() {
		for _, ss := range rs.GetScopeSpans() {
			for _, sp := range ss.GetSpans() {
				r.names = append(r.names, sp.GetName())
			}
		}
	}
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

// Spans reach a collector over either protocol, through the real
// exporters.
func TestExportOverBothProtocols(t *testing.T) {
	t.Parallel()
	send := func(t *testing.T, cfg *Config) {
		t.Helper()
		p, err := New(context.Background(), cfg)
		require.NoError(t, err)
		_, sp := p.TracerProvider().Tracer(ScopeName).Start(AttemptContext(context.Background(), "run_1", "", "", nil), SpanAttempt)
		sp.End()
		require.NoError(t, p.ForceFlush(context.Background()))
		require.NoError(t, p.Shutdown(context.Background()))
	}
	t.Run("http", func(t *testing.T) {
		t.Parallel()
		rcv := telemetrytest.NewReceiver(t)
		send(t, &Config{Endpoint: rcv.URL(), ServiceName: "svc"})
		spans := rcv.Spans()
		require.Len(t, spans, 1)
		require.Equal(t, SpanAttempt, spans[0].Name)
		require.Equal(t, "svc", spans[0].Service)
		require.Equal(t, RunTraceID("run_1").String(), spans[0].TraceID)
	})
	t.Run("grpc", func(t *testing.T) {
		t.Parallel()
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		srv := grpc.NewServer()
		rcv := &grpcReceiver{}
		coltracepb.RegisterTraceServiceServer(srv, rcv)
		served := make(chan error, 1)
		go func() { served <- srv.Serve(lis) }()
		t.Cleanup(func() {
			srv.Stop()
			require.NoError(t, <-served)
		})
		send(t, &Config{Endpoint: "http://" + lis.Addr().String(), Protocol: ProtocolGRPC})
		rcv.mu.Lock()
		defer rcv.mu.Unlock()
		require.Equal(t, []string{SpanAttempt}, rcv.names)
	})
}
