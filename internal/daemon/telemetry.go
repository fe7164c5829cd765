package daemon

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/errandhq/errand/internal/config"
	"github.com/errandhq/errand/internal/telemetry"
	"github.com/errandhq/errand/internal/version"
)

// telemetryConfig is the config's telemetry: section, each key left out
// taken from its standard OTEL_* variable.
func telemetryConfig(cfg *config.Config, lookup func(string) (string, bool)) (telemetry.Config, error) {
	t := cfg.Telemetry
	tc, err := telemetry.Config{
		Endpoint: t.OTLPEndpoint, Protocol: t.Protocol, ServiceName: t.ServiceName, SampleRatio: t.SampleRatio,
		ServiceVersion: version.String(),
	}.WithEnv(lookup)
	if err != nil {
		return tc, fmt.Errorf("telemetry: %w", err)
	}
	return tc, nil
}

// startTelemetry builds the trace exporter the config asks for, or
// returns nil when it asks for none: then nothing runs.
func startTelemetry(ctx context.Context, cfg *config.Config, lookup func(string) (string, bool), log *slog.Logger) (*telemetry.Provider, error) {
	tc, err := telemetryConfig(cfg, lookup)
	if err != nil {
		return nil, err
	}
	p, err := telemetry.New(ctx, &tc)
	if err != nil || p == nil {
		return nil, err
	}
	ratio := 1.0
	if tc.SampleRatio != nil {
		ratio = *tc.SampleRatio
	}
	log.Info("exporting traces", "endpoint", tc.Endpoint, "protocol", cmp.Or(tc.Protocol, telemetry.ProtocolHTTP), "sample_ratio", ratio)
	return p, nil
}

// tracerProvider is what errand's spans, and the traceparent of its
// outgoing calls, come from: nil with traces off.
func (d *daemon) tracerProvider() trace.TracerProvider {
	if d.traces == nil {
		return nil
	}
	return d.traces.TracerProvider()
}

// stopTraces sends the spans not sent yet (the last attempts', ended as
// the workers stopped) within ctx and at most 5 seconds, and stops the
// exporter. A second call, or one without traces, does nothing.
func (d *daemon) stopTraces(ctx context.Context) {
	if d.traces == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := d.traces.Shutdown(ctx); err != nil {
		d.log.Warn("send the last traces", "err", err)
	}
	d.traces = nil
}
