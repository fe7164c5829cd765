package provider

import (
	"strings"
	"sync"

	"github.com/tiktoken-go/tokenizer/codec"
)

// OpenAI's models count tokens with tiktoken's BPE encodings, which
// github.com/tiktoken-go/tokenizer carries in its source: nothing is
// downloaded, and an encoding's vocabulary is built in memory the first
// time it is used (o200k_base: about 0.1 s and a few MB). Only the two
// encodings of the chat models are linked in (through package codec, not
// tokenizer.Get, which would link all of them).
//
// The count of a request's text with its model's encoding is exact for
// that text; what the server adds (chat markup, the tool definitions
// rendered in its own syntax, the system turn a reasoning model gets) is
// covered by framing constants. OpenAI's documented accounting is 3 tokens
// a message and 3 to prime the reply; a tool's schema is rendered as a
// TypeScript-like declaration, which costs fewer tokens than its JSON
// except for a few per string (a " | " between enum values, "?: " after a
// key), which SchemaStringTokens covers.
const (
	openAIRequestFraming     = 64 // reply priming, system turn, a reasoning model's own system turn
	openAIMessageFraming     = 8  // 3 to 4 in OpenAI's accounting
	openAIToolFraming        = 16 // "// description\ntype name = (_: {\n…}) => any;"
	openAIToolUse            = 64 // "# Tools\n\n## functions\n\nnamespace functions {…}" and its turn
	openAISchemaStringTokens = 2
)

// openAIEncodings are the encodings of OpenAI's chat models, each built on
// first use and shared: a codec is safe for concurrent use.
var openAIEncodings = map[string]func() *codec.Codec{
	"o200k_base":  sync.OnceValue(codec.NewO200kBase),
	"cl100k_base": sync.OnceValue(codec.NewCl100kBase),
}

// OpenAIEncoding names the tiktoken encoding of an OpenAI model family, or
// returns "" for a model it does not know: gpt-4o*, gpt-4.1*, gpt-4.5*,
// gpt-5*, chatgpt-4o*, o1*, o3* and o4* count with o200k_base; gpt-4,
// gpt-4-* and gpt-3.5-turbo* with cl100k_base. A fine-tuned or deployed
// model under another name is not known: guessing its encoding could
// undercount.
func OpenAIEncoding(model string) string {
	family := func(prefixes ...string) bool {
		for _, p := range prefixes {
			if model == p || strings.HasPrefix(model, p+"-") || strings.HasPrefix(model, p+".") {
				return true
			}
		}
		return false
	}
	switch {
	case family("gpt-4o", "chatgpt-4o", "gpt-4.1", "gpt-4.5", "gpt-5", "o1", "o3", "o4"):
		return "o200k_base"
	case model == "gpt-4" || strings.HasPrefix(model, "gpt-4-") || family("gpt-3.5-turbo", "gpt-35-turbo"):
		return "cl100k_base"
	}
	return ""
}

// OpenAIBound is the Bound of an OpenAI model counted with its own
// tokenizer, or nil for a model OpenAIEncoding does not know.
func OpenAIBound(model string) *Bound {
	enc := openAIEncodings[OpenAIEncoding(model)]
	if enc == nil {
		return nil
	}
	return &Bound{
		TextFunc: func(text string) int64 {
			if text == "" {
				return 0
			}
			n, err := enc().Count(text)
			if err != nil {
				// Only a broken regular expression fails; a byte is at
				// least a token, so bytes still bound it.
				return MaxTextTokens(text)
			}
			return int64(n)
		},
		RequestFraming:     openAIRequestFraming,
		MessageFraming:     openAIMessageFraming,
		ToolFraming:        openAIToolFraming,
		ToolUse:            openAIToolUse,
		SchemaStringTokens: openAISchemaStringTokens,
	}
}

// TokenBound implements TokenBounder: OpenAI's models are counted with
// their own tokenizer, whatever the BaseURL (Azure, a proxy); a model of
// another name served by a compatible server (Ollama, vLLM) has none.
func (o *OpenAI) TokenBound(model string) *Bound { return OpenAIBound(model) }

var _ TokenBounder = (*OpenAI)(nil)
