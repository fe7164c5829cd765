package config

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestTelemetry(t *testing.T) {
	t.Parallel()
	cfg, err := Parse([]byte("telemetry:\n  otlp_endpoint: http://localhost:4318\n  protocol: grpc\n  service_name: svc\n  sample_ratio: 0.5\n"))
	require.NoError(t, err)
	half := 0.5
	require.Equal(t, Telemetry{OTLPEndpoint: "http://localhost:4318", Protocol: TelemetryGRPC, ServiceName: "svc", SampleRatio: &half}, cfg.Telemetry)

	cfg, err = Parse([]byte("listen: 127.0.0.1:7780\n"))
	require.NoError(t, err)
	require.Equal(t, Telemetry{}, cfg.Telemetry, "off by default")

	for _, tt := range []struct{ yaml, field string }{
		{"telemetry: {otlp_endpoint: localhost:4318}", "telemetry.otlp_endpoint"},
		{"telemetry: {protocol: http/json}", "telemetry.protocol"},
		{"telemetry: {sample_ratio: 1.5}", "telemetry.sample_ratio"},
		{"telemetry: {sample_ratio: -0.1}", "telemetry.sample_ratio"},
		{"telemetry: {exporter: jaeger}", "telemetry.exporter"},
	} {
		_, err := Parse([]byte(tt.yaml))
		require.ErrorContains(t, err, tt.field, tt.yaml)
	}
}
