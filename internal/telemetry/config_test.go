package telemetry

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestConfigWithEnv(t *testing.T) {
	t.Parallel()
	env := map[string]string{
		EnvEndpoint: "http://collector:4318", EnvProtocol: "grpc", EnvServiceName: "from-env", EnvSamplerArg: "0.25",
	}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }

	got, err := Config{}.WithEnv(lookup)
	require.NoError(t, err)
	require.Equal(t, "http://collector:4318", got.Endpoint)
	require.Equal(t, ProtocolGRPC, got.Protocol)
	require.Equal(t, "from-env", got.ServiceName)
	require.InDelta(t, 0.25, *got.SampleRatio, 0)

	one := 1.0
	got, err = Config{Endpoint: "http://mine:4318", Protocol: ProtocolHTTP, ServiceName: "mine", SampleRatio: &one}.WithEnv(lookup)
	require.NoError(t, err)
	require.Equal(t, Config{Endpoint: "http://mine:4318", Protocol: ProtocolHTTP, ServiceName: "mine", SampleRatio: &one}, got, "the config wins")

	env[EnvProtocol] = "http/json"
	_, err = Config{}.WithEnv(lookup)
	require.ErrorContains(t, err, EnvProtocol)
	env[EnvProtocol] = "http/protobuf"
	env[EnvSamplerArg] = "2"
	_, err = Config{}.WithEnv(lookup)
	require.ErrorContains(t, err, EnvSamplerArg)

	none := func(string) (string, bool) { return "", false }
	off, err := Config{}.WithEnv(none)
	require.NoError(t, err)
	require.False(t, off.Enabled())
}

func TestNew(t *testing.T) {
	t.Parallel()
	p, err := New(context.Background(), &Config{})
	require.NoError(t, err)
	require.Nil(t, p, "off: nothing built")
	require.NoError(t, p.Shutdown(context.Background()))

	_, err = New(context.Background(), &Config{Endpoint: "collector:4318"})
	require.ErrorContains(t, err, "http or https URL")
	for _, proto := range []string{ProtocolHTTP, ProtocolGRPC} {
		p, err := New(context.Background(), &Config{Endpoint: "http://127.0.0.1:1", Protocol: proto})
		require.NoError(t, err)
		require.NoError(t, p.Shutdown(context.Background()), "nothing to send, nothing dialed")
	}
	require.Equal(t, "http://h:4318/v1/traces", tracesURL("http://h:4318"))
	require.Equal(t, "http://h:4318/otlp/v1/traces", tracesURL("http://h:4318/otlp/"))
	require.Equal(t, "http://h/v1/traces", tracesURL("http://h/v1/traces"))
}
