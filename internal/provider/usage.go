package provider

import (
	"math"
	"unicode/utf8"
)

// charsPerToken is the conservative ratio used when a server reports no
// usage: real tokenizers average closer to 4 characters per token in
// English, so this overestimates, which is the safe side for budgets.
const charsPerToken = 3

// EstimateTokens estimates how many tokens text takes.
func EstimateTokens(text string) int64 {
	n := utf8.RuneCountInString(text)
	return int64((n + charsPerToken - 1) / charsPerToken)
}

// EstimateRequestTokens estimates the input tokens of a request: its system
// prompt, messages, tool calls and tool definitions.
func EstimateRequestTokens(req *Request) int64 {
	total := EstimateTokens(req.System)
	for _, m := range req.Messages {
		total += EstimateTokens(m.Content) + 4 // role and framing
		for _, c := range m.ToolCalls {
			total += EstimateTokens(c.Name) + EstimateTokens(string(c.Arguments))
		}
	}
	for _, t := range req.Tools {
		total += EstimateTokens(t.Name) + EstimateTokens(t.Description) + EstimateTokens(string(t.Parameters))
	}
	return total
}

// EstimateResponseTokens estimates the output tokens of a reply.
func EstimateResponseTokens(resp *Response) int64 {
	total := EstimateTokens(resp.Content)
	for _, c := range resp.ToolCalls {
		total += EstimateTokens(c.Name) + EstimateTokens(string(c.Arguments))
	}
	return total
}

// FillUsage estimates the usage of a call whose server reported none.
func FillUsage(req *Request, resp *Response) {
	if resp.Usage.InputTokens > 0 || resp.Usage.OutputTokens > 0 {
		return
	}
	resp.Usage = Usage{
		InputTokens:  EstimateRequestTokens(req),
		OutputTokens: EstimateResponseTokens(resp),
		Estimated:    true,
	}
}

// Price is what a model costs, in USD per million tokens.
type Price struct {
	InputPerMTok  float64 `yaml:"input_per_mtok" json:"input_per_mtok"`
	OutputPerMTok float64 `yaml:"output_per_mtok" json:"output_per_mtok"`
}

// Pricing maps model names to prices.
type Pricing map[string]Price

// Cost is the USD cost of usage on model; a model not in the table costs 0.
func (p Pricing) Cost(model string, u Usage) float64 {
	price, ok := p[model]
	if !ok {
		return 0
	}
	usd := (float64(u.InputTokens)*price.InputPerMTok + float64(u.OutputTokens)*price.OutputPerMTok) / 1e6
	return math.Round(usd*1e9) / 1e9
}
