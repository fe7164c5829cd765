package telemetry

import (
	"context"
	"fmt"
	"math/rand/v2"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// Provider is errand's tracer provider: an OTLP exporter behind a batch
// processor, sampling runs by ratio (parent-based), with trace ids taken
// from the run (see WithRunTrace).
type Provider struct {
	tp *sdktrace.TracerProvider
}

// New builds the provider cfg describes, or returns nil, nil when cfg
// exports nothing: then nothing is started. Nothing is dialed until the
// first spans are sent.
func New(ctx context.Context, cfg *Config) (*Provider, error) {
	if !cfg.Enabled() {
		return nil, nil
	}
	if err := cfg.check(); err != nil {
		return nil, fmt.Errorf("telemetry: %w", err)
	}
	var (
		exp sdktrace.SpanExporter
		err error
	)
	if cfg.Protocol == ProtocolGRPC {
		exp, err = otlptracegrpc.New(ctx, otlptracegrpc.WithEndpointURL(cfg.Endpoint))
	} else {
		exp, err = otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(tracesURL(cfg.Endpoint)))
	}
	if err != nil {
		return nil, fmt.Errorf("telemetry: exporter: %w", err)
	}
	return NewWithExporter(cfg, exp), nil
}

// NewWithExporter is New with the exporter given (tests keep spans in
// memory with it).
func NewWithExporter(cfg *Config, exp sdktrace.SpanExporter) *Provider {
	ratio := 1.0
	if cfg.SampleRatio != nil {
		ratio = *cfg.SampleRatio
	}
	name := cfg.ServiceName
	if name == "" {
		name = DefaultServiceName
	}
	attrs := []attribute.KeyValue{attribute.String("service.name", name)}
	if cfg.ServiceVersion != "" {
		attrs = append(attrs, attribute.String("service.version", cfg.ServiceVersion))
	}
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp),
		sdktrace.WithSampler(newRunSampler(ratio)),
		sdktrace.WithIDGenerator(runIDs{}),
		sdktrace.WithResource(resource.NewSchemaless(attrs...)),
	)
	return &Provider{tp: tp}
}

// TracerProvider is what the engine and agents start spans from.
func (p *Provider) TracerProvider() trace.TracerProvider { return p.tp }

// ForceFlush sends every span ended so far.
func (p *Provider) ForceFlush(ctx context.Context) error { return p.tp.ForceFlush(ctx) }

// Shutdown sends what is left and stops the exporter; spans started
// afterwards are dropped. Nil is fine.
func (p *Provider) Shutdown(ctx context.Context) error {
	if p == nil {
		return nil
	}
	return p.tp.Shutdown(ctx)
}

// runIDs makes a root span's trace id the one WithRunTrace put in its
// context, else a random one; span ids are random.
type runIDs struct{}

var _ sdktrace.IDGenerator = runIDs{}

func (runIDs) NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID) {
	tid, ok := ctx.Value(traceIDKey{}).(trace.TraceID)
	for !ok || !tid.IsValid() {
		putUint64(tid[:8], rand.Uint64())
		putUint64(tid[8:], rand.Uint64())
		ok = true
	}
	// A root span errand derives (a run's attempt) keeps its derived id,
	// so the attempt after a crash can rebuild the lost one's span.
	if sid, ok := ctx.Value(spanIDKey{}).(trace.SpanID); ok && sid.IsValid() {
		return tid, sid
	}
	return tid, newSpanID()
}

func (runIDs) NewSpanID(ctx context.Context, _ trace.TraceID) trace.SpanID {
	if sid, ok := ctx.Value(spanIDKey{}).(trace.SpanID); ok && sid.IsValid() {
		return sid
	}
	return newSpanID()
}

// runSampler samples by ratio of the trace id, following a parent's
// decision, except for the parent errand derives from a run (marked by its
// trace state), which is decided by the run's trace id as its root was:
// a run is traced whole or not at all.
type runSampler struct {
	ratio, parentBased sdktrace.Sampler
}

func newRunSampler(ratio float64) runSampler {
	r := sdktrace.TraceIDRatioBased(ratio)
	return runSampler{ratio: r, parentBased: sdktrace.ParentBased(r)}
}

func (s runSampler) ShouldSample(p sdktrace.SamplingParameters) sdktrace.SamplingResult {
	psc := trace.SpanContextFromContext(p.ParentContext)
	if !psc.IsRemote() || psc.TraceState().Get(stateKey) != stateRun {
		return s.parentBased.ShouldSample(p)
	}
	res := s.ratio.ShouldSample(p)
	res.Tracestate = psc.TraceState().Delete(stateKey)
	return res
}

func (s runSampler) Description() string { return "errand run: " + s.parentBased.Description() }

func newSpanID() trace.SpanID {
	var sid trace.SpanID
	for !sid.IsValid() {
		putUint64(sid[:], rand.Uint64())
	}
	return sid
}

func putUint64(b []byte, v uint64) {
	for i := range 8 {
		b[i] = byte(v >> (56 - 8*i))
	}
}
