package telemetry

import (
	"fmt"
	"math"
	"net/url"
	"strconv"
	"strings"
)

// Protocols of Config.
const (
	ProtocolHTTP = "http"
	ProtocolGRPC = "grpc"
)

// DefaultServiceName is the service.name of errand's spans.
const DefaultServiceName = "errand"

// The standard variables Config.WithEnv reads.
const (
	EnvEndpoint    = "OTEL_EXPORTER_OTLP_ENDPOINT"
	EnvProtocol    = "OTEL_EXPORTER_OTLP_PROTOCOL"
	EnvServiceName = "OTEL_SERVICE_NAME"
	EnvSamplerArg  = "OTEL_TRACES_SAMPLER_ARG"
)

// Config says where traces go. The zero Config exports nothing.
type Config struct {
	// Endpoint is the collector's base URL (http://localhost:4318);
	// empty: no traces. With ProtocolHTTP spans go to its path
	// /v1/traces, unless the URL already ends so.
	Endpoint string
	// Protocol is ProtocolHTTP (default) or ProtocolGRPC.
	Protocol string
	// ServiceName is the service.name resource attribute; default
	// DefaultServiceName.
	ServiceName string
	// SampleRatio is the share of runs traced, 0 to 1; nil is 1. A run
	// with a parent from its submit follows the parent's decision.
	SampleRatio *float64
	// ServiceVersion is the service.version resource attribute.
	ServiceVersion string
}

// Enabled reports whether c exports anything.
func (c *Config) Enabled() bool { return c != nil && c.Endpoint != "" }

// WithEnv returns c with each empty field taken from its standard
// variable, read through lookup: OTEL_EXPORTER_OTLP_ENDPOINT,
// OTEL_EXPORTER_OTLP_PROTOCOL (http/protobuf and http are http, grpc is
// grpc), OTEL_SERVICE_NAME and OTEL_TRACES_SAMPLER_ARG. The config's
// own keys win. A bad variable is an error naming it.
func (c Config) WithEnv(lookup func(string) (string, bool)) (Config, error) {
	get := func(name string) string {
		v, _ := lookup(name)
		return strings.TrimSpace(v)
	}
	if c.Endpoint == "" {
		c.Endpoint = get(EnvEndpoint)
	}
	if c.Protocol == "" {
		switch v := get(EnvProtocol); v {
		case "":
		case "http/protobuf", ProtocolHTTP:
			c.Protocol = ProtocolHTTP
		case ProtocolGRPC:
			c.Protocol = ProtocolGRPC
		default:
			return c, fmt.Errorf("%s: %q is not http/protobuf or grpc", EnvProtocol, v)
		}
	}
	if c.ServiceName == "" {
		c.ServiceName = get(EnvServiceName)
	}
	if c.SampleRatio == nil {
		if v := get(EnvSamplerArg); v != "" {
			r, err := strconv.ParseFloat(v, 64)
			if err != nil || math.IsNaN(r) || r < 0 || r > 1 {
				return c, fmt.Errorf("%s: %q is not a ratio between 0 and 1", EnvSamplerArg, v)
			}
			c.SampleRatio = &r
		}
	}
	return c, nil
}

// check refuses a config no exporter could use.
func (c *Config) check() error {
	u, err := url.Parse(c.Endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("endpoint %q: must be an http or https URL", c.Endpoint)
	}
	switch c.Protocol {
	case "", ProtocolHTTP, ProtocolGRPC:
	default:
		return fmt.Errorf("protocol %q: must be %s or %s", c.Protocol, ProtocolHTTP, ProtocolGRPC)
	}
	if r := c.SampleRatio; r != nil && (math.IsNaN(*r) || *r < 0 || *r > 1) {
		return fmt.Errorf("sample ratio %v: must be between 0 and 1", *r)
	}
	return nil
}

// tracesURL is where OTLP/HTTP sends spans: the base endpoint's path
// /v1/traces, as for OTEL_EXPORTER_OTLP_ENDPOINT.
func tracesURL(endpoint string) string {
	if strings.HasSuffix(endpoint, "/v1/traces") {
		return endpoint
	}
	return strings.TrimSuffix(endpoint, "/") + "/v1/traces"
}
