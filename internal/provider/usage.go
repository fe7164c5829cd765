package provider

import "math"

// Token counts are bounded from above rather than estimated, so that a
// budget reservation made from them holds whatever the model's tokenizer:
// byte-level tokenizers (BPE as in GPT and Llama, SentencePiece with byte
// fallback) never make a token of less than one byte, so text of n UTF-8
// bytes is at most n tokens. A guess of characters ÷ 3 was wrong by 3× and
// more for CJK, emoji and code, and a call reserved on it could cross the
// limit it was checked against.
//
// Servers also add tokens the request's text does not show: a chat
// template around each message, and for tools a system prompt of their own
// (Anthropic documents about 350 tokens). The framing constants cover
// those.
const (
	requestFramingTokens = 16  // reply priming, the system turn
	messageFramingTokens = 8   // role markers and separators of one turn
	toolFramingTokens    = 16  // the wrapping of one tool definition
	toolUseTokens        = 512 // a server's own tool-use instructions
)

// MaxTextTokens bounds the tokens text can take: one per UTF-8 byte.
func MaxTextTokens(text string) int64 { return int64(len(text)) }

// MaxRequestTokens bounds the input tokens of a request for any model: its
// system prompt, messages, tool calls and tool definitions, with their
// framing, a token per byte (ByteBound).
func MaxRequestTokens(req *Request) int64 { return ByteBound.Request(req) }

// MaxResponseTokens bounds the output tokens of a reply to req: its text
// and tool calls, and never more than the req.MaxTokens the server was
// told to stop at.
func MaxResponseTokens(req *Request, resp *Response) int64 {
	total := MaxTextTokens(resp.Content)
	for _, c := range resp.ToolCalls {
		total += messageFramingTokens + MaxTextTokens(c.Name) + int64(len(c.Arguments))
	}
	if req.MaxTokens > 0 {
		total = min(total, int64(req.MaxTokens))
	}
	return total
}

// FillUsage fills in the usage of a call whose server reported none, with
// the bounds above: budgets may then stop a task early, never late.
func FillUsage(req *Request, resp *Response) {
	if resp.Usage.InputTokens > 0 || resp.Usage.OutputTokens > 0 {
		return
	}
	resp.Usage = Usage{
		InputTokens:  MaxRequestTokens(req),
		OutputTokens: MaxResponseTokens(req, resp),
		Estimated:    true,
	}
}

// maxReportedTokens caps a count a server reports: far above any real call,
// and small enough that budgets add up many without overflowing.
const maxReportedTokens = 1 << 40

// reportedUsage is the usage a server reported, made safe to add to a
// budget. A negative count makes the whole report nonsense, so none is kept
// and FillUsage puts upper bounds in its place (a negative count would
// hand budget back); a huge count is capped. Input counts are added up.
func reportedUsage(out int64, in ...int64) Usage {
	if out < 0 {
		return Usage{}
	}
	u := Usage{OutputTokens: min(out, maxReportedTokens)}
	for _, n := range in {
		if n < 0 {
			return Usage{}
		}
		u.InputTokens = min(u.InputTokens+min(n, maxReportedTokens), maxReportedTokens)
	}
	return u
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
