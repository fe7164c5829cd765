// Package telemetry exports errand's OpenTelemetry traces: the tracer
// provider built from the telemetry: config or the standard OTEL_*
// variables, the trace of a run, and the W3C traceparent a submit carries.
//
// One trace per run. A run's trace id is derived from its run id (the
// first 16 bytes of SHA-256 of it), so every attempt of a task and of its
// subtasks, the one after a crash included, lands in the same trace with
// nothing stored. A submit that carried a traceparent keeps it in the
// task's metadata under MetadataKey; the run's spans are then children of
// the caller's span, in the caller's trace.
//
// Off, nothing here runs: no provider is built, the engine holds a nil
// tracer provider and starts no span.
package telemetry
