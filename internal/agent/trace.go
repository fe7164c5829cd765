package agent

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/errandhq/errand/internal/provider"
	"github.com/errandhq/errand/internal/taskrun"
	"github.com/errandhq/errand/internal/telemetry"
)

// GenAI semantic-convention attributes of model and tool spans.
const (
	attrOperation     = "gen_ai.operation.name"
	attrProvider      = "gen_ai.provider.name"
	attrSystem        = "gen_ai.system" // the older name of gen_ai.provider.name, which backends still read
	attrRequestModel  = "gen_ai.request.model"
	attrMaxTokens     = "gen_ai.request.max_tokens"
	attrResponseModel = "gen_ai.response.model"
	attrFinishReasons = "gen_ai.response.finish_reasons"
	attrInputTokens   = "gen_ai.usage.input_tokens"
	attrOutputTokens  = "gen_ai.usage.output_tokens"
	attrToolName      = "gen_ai.tool.name"
	attrToolCallID    = "gen_ai.tool.call.id"
	attrErrorType     = "error.type"

	opChat        = "chat"
	opExecuteTool = "execute_tool"
)

// providerName is the gen_ai.provider.name of a model provider.
func providerName(p provider.Provider) string {
	switch p.(type) {
	case *provider.OpenAI:
		return "openai"
	case *provider.Anthropic:
		return "anthropic"
	}
	return "_OTHER"
}

// startChat starts the `chat MODEL` span of the model call of the step
// begun under key, as a child of the step's span; span is nil (and ctx
// as given) when the step is not traced.
func (a *LLM) startChat(ctx context.Context, run taskrun.Run, key string, maxOut int64) (context.Context, trace.Span) {
	ctx = telemetry.StepContext(ctx, run, key)
	tracer := telemetry.Tracer(ctx)
	if tracer == nil {
		return ctx, nil
	}
	name := providerName(a.cfg.Provider)
	return tracer.Start(ctx, opChat+" "+a.cfg.Model, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
		attribute.String(attrOperation, opChat),
		attribute.String(attrProvider, name),
		attribute.String(attrSystem, name),
		attribute.String(attrRequestModel, a.cfg.Model),
		attribute.Int64(attrMaxTokens, maxOut),
	))
}

// endChat ends a model call's span with what the call used and why the
// model stopped, or with its error.
func endChat(span trace.Span, resp *provider.Response, code string, err error) {
	if span == nil {
		return
	}
	if err != nil {
		span.SetAttributes(attribute.String(attrErrorType, code))
		span.SetStatus(codes.Error, err.Error())
		span.End()
		return
	}
	attrs := []attribute.KeyValue{
		attribute.Int64(attrInputTokens, resp.Usage.InputTokens),
		attribute.Int64(attrOutputTokens, resp.Usage.OutputTokens),
	}
	if resp.Model != "" {
		attrs = append(attrs, attribute.String(attrResponseModel, resp.Model))
	}
	if resp.StopReason != "" {
		attrs = append(attrs, attribute.StringSlice(attrFinishReasons, []string{resp.StopReason}))
	}
	span.SetAttributes(attrs...)
	span.End()
}

// startTool starts the `execute_tool NAME` span of the tool call of the
// step begun under key; span is nil when the step is not traced.
func startTool(ctx context.Context, run taskrun.Run, key string, call TurnCall) (context.Context, trace.Span) {
	ctx = telemetry.StepContext(ctx, run, key)
	tracer := telemetry.Tracer(ctx)
	if tracer == nil {
		return ctx, nil
	}
	attrs := []attribute.KeyValue{
		attribute.String(attrOperation, opExecuteTool),
		attribute.String(attrToolName, call.Name),
	}
	if call.ID != "" {
		attrs = append(attrs, attribute.String(attrToolCallID, call.ID))
	}
	return tracer.Start(ctx, opExecuteTool+" "+call.Name, trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(attrs...))
}

// endTool ends a tool call's span with how the call ended.
func endTool(span trace.Span, res *taskrun.StepResult) {
	if span == nil {
		return
	}
	if res.Status != taskrun.StepDone {
		span.SetAttributes(attribute.String(attrErrorType, res.ErrorCode))
		span.SetStatus(codes.Error, res.ErrorMessage)
	}
	span.End()
}
