package config

import "math"

// validate checks the telemetry keys that are set; the OTEL_* variables
// that fill the others are checked where they are read.
func (t *Telemetry) validate(p *problems) {
	if t.OTLPEndpoint != "" {
		p.check("telemetry.otlp_endpoint", checkHTTPURL(t.OTLPEndpoint))
	}
	switch t.Protocol {
	case "", TelemetryHTTP, TelemetryGRPC:
	default:
		p.add("telemetry.protocol", "%q is not %s or %s", t.Protocol, TelemetryHTTP, TelemetryGRPC)
	}
	if r := t.SampleRatio; r != nil && (math.IsNaN(*r) || *r < 0 || *r > 1) {
		p.add("telemetry.sample_ratio", "%v is not between 0 and 1", *r)
	}
}
