package provider

import "strings"

// Bound bounds from above the input tokens of a request, part by part, for
// one way of counting text: a token per byte (ByteBound, for any model), or
// a tokenizer that is the model's own (TokenBounder). A budget reserves a
// call on such a bound, so it must never be below what the server counts:
// each part is the count of its text plus framing constants that cover what
// the server adds around it (a chat template's role markers, a tool's
// wrapping, the server's own tool-use instructions).
//
// The parts add up: a request is its fixed part (framing, system prompt,
// tools), which every call of one agent in one phase shares, plus its
// messages, each bounded on its own. That is what lets a caller bound a
// prompt by what the server reported for an earlier one plus the messages
// added since, or by a learned figure for the fixed part plus the messages.
type Bound struct {
	// TextFunc bounds the tokens text takes.
	TextFunc func(text string) int64
	// RequestFraming covers the reply priming and the system turn's
	// framing (and a system turn the server adds of its own).
	RequestFraming int64
	// MessageFraming covers the role markers and separators of one turn,
	// or of one tool call in a turn.
	MessageFraming int64
	// ToolFraming covers the wrapping of one tool definition.
	ToolFraming int64
	// ToolUse covers the instructions a server adds when tools are offered.
	ToolUse int64
	// SchemaStringTokens is added for each string (key or value) of a
	// tool's parameters schema: a server that renders the schema in
	// another syntax may spend that many more tokens on each than its
	// JSON form does (quotes, separators, "?: " after a key, " | "
	// between enum values).
	SchemaStringTokens int64
}

// ByteBound is the bound of any byte-level tokenizer: byte-level BPE (as in
// GPT and Llama) and SentencePiece with byte fallback never make a token of
// less than one byte, so text of n UTF-8 bytes is at most n tokens. The
// framing constants cover chat templates and, for tools, a system prompt
// of the server's own (Anthropic documents about 350 tokens). It is loose
// (a token is 3 to 4 bytes of English) but holds for every model.
var ByteBound = &Bound{
	TextFunc:       MaxTextTokens,
	RequestFraming: requestFramingTokens,
	MessageFraming: messageFramingTokens,
	ToolFraming:    toolFramingTokens,
	ToolUse:        toolUseTokens,
}

// TokenBounder is implemented by a Provider whose server counts tokens with
// a tokenizer errand has: TokenBound returns the Bound for model, or nil
// when there is none for it.
type TokenBounder interface {
	TokenBound(model string) *Bound
}

// Request bounds the input tokens of req.
func (b *Bound) Request(req *Request) int64 {
	return b.Fixed(req) + b.Messages(req.Messages, 0)
}

// Fixed bounds the part of req that is not its messages: the request's
// framing, the system prompt and the tool definitions.
func (b *Bound) Fixed(req *Request) int64 {
	total := b.RequestFraming + b.TextFunc(req.System)
	if len(req.Tools) > 0 {
		total += b.ToolUse
	}
	for _, t := range req.Tools {
		total += b.Tool(t)
	}
	return total
}

// System bounds a system prompt that replaces another: its text and the
// framing of a turn.
func (b *Bound) System(system string) int64 {
	return b.MessageFraming + b.TextFunc(system)
}

// Tool bounds one tool definition.
func (b *Bound) Tool(t Tool) int64 {
	total := b.ToolFraming + b.TextFunc(t.Name) + b.TextFunc(t.Description) + b.TextFunc(string(t.Parameters))
	if b.SchemaStringTokens > 0 {
		// Every string of valid JSON opens and closes with a quote;
		// escaped quotes inside strings only make this count larger.
		total += b.SchemaStringTokens * int64(strings.Count(string(t.Parameters), `"`)/2)
	}
	return total
}

// Messages bounds msgs[from:]. A tool turn is bounded with the name of the
// call it answers too, which a chat template may show beside the result;
// the call is looked for in all of msgs (if two calls share the id, the
// larger name counts).
func (b *Bound) Messages(msgs []Message, from int) int64 {
	var names map[string]int64
	var total int64
	for i := from; i < len(msgs); i++ {
		m := &msgs[i]
		total += b.MessageFraming + b.TextFunc(m.Content) + b.TextFunc(m.ToolCallID)
		if m.ToolCallID != "" {
			if names == nil {
				names = b.callNames(msgs)
			}
			total += names[m.ToolCallID]
		}
		for _, c := range m.ToolCalls {
			total += b.MessageFraming + b.TextFunc(c.ID) + b.TextFunc(c.Name) + b.TextFunc(string(c.Arguments))
		}
	}
	return total
}

// callNames maps the id of every tool call in msgs to the bound of its
// name.
func (b *Bound) callNames(msgs []Message) map[string]int64 {
	names := map[string]int64{}
	for _, m := range msgs {
		for _, c := range m.ToolCalls {
			names[c.ID] = max(names[c.ID], b.TextFunc(c.Name))
		}
	}
	return names
}
