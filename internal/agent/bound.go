package agent

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"

	"github.com/errandhq/errand/internal/provider"
	"github.com/errandhq/errand/internal/taskrun"
)

// A model call reserves its worst case before it is made (see
// reserveModelCall): the reply is capped by max_tokens, and the prompt by
// promptBound, the least of several bounds that each hold on their own, so
// their minimum holds too:
//
//   - Bytes. A token is at least one byte (provider.ByteBound). It holds
//     for every model and is loose: about 3,100 tokens for the first
//     prompt of an agent with errand's built-in tools, which servers count
//     at some 800, so a small budget could not make a single call.
//   - The last count. After a call the server reported usage for, the next
//     prompt repeats that prompt and adds the reply and what followed it:
//     tool results, answers, nudges. It is bounded by the input tokens
//     reported, plus the reply's reported output tokens with the framing
//     of a turn and of each call (the model's own tokens, sent back; the
//     call ids errand or the server chose, and the bytes JSON escaping may
//     add to arguments, are counted apart), plus the bound of each later
//     turn. If the system prompt or the tools changed, the new ones are
//     added whole, the old ones never taken off. The count rides on the
//     last turn of the prompt it was made for (Turn.Usage), so it is in
//     the checkpoint, and a replayed call's record carries it too: a
//     resumed task keeps it.
//   - The model's tokenizer, where errand has it (provider.TokenBounder:
//     OpenAI's models): the text's exact count plus framing allowances.
//   - What the agent learned (taskrun.PromptOverheads), for the first
//     prompt of a conversation: the input tokens a server counted for a
//     call whose fixed part (agent, provider, model, system prompt, tools)
//     was the same bound that fixed part, since the call's messages took
//     at least none; the new messages are bounded on their own, plus a
//     little slack for templates that vary (a date).
//
// The last two trust the server's count to be of the whole prompt. Servers
// that cache a prompt's prefix may report only the tokens they processed
// (some Ollama and llama.cpp versions did), and such a count bounds
// nothing. So a count is taken only if it is plausible: at least one token
// for every maxBytesPerToken bytes of the prompt's text (a cached tools
// prefix leaves far fewer), not more than the bound the call reserved, and
// not less than an earlier count of a prompt it extends. Once one fails,
// the attempt trusts no count and bounds by bytes and the tokenizer.
//
// A server that reports no usage gets bytes (and the tokenizer) only: the
// usage FillUsage estimates is not a count, so it is not carried on.

// PromptUsage is what a server counted for one model call: its prompt's
// input tokens and its reply's output tokens. Fixed is the digest of the
// prompt's fixed part (fixedDigest): when the next prompt's differs, its
// system prompt and tools are bounded anew.
type PromptUsage struct {
	InputTokens  int64  `json:"input_tokens"`
	OutputTokens int64  `json:"output_tokens"`
	Fixed        string `json:"fixed,omitempty"`
}

// maxBytesPerToken bounds the bytes of text a whole prompt's tokens hold on
// average in a count errand believes. Tokenizers average 2 to 5 (English,
// code, JSON); only long runs of one character pack more, and a prompt
// whose count is refused for that is bounded by bytes instead, which is
// safe.
const maxBytesPerToken = 10

// escapedRunes are the characters encoding/json writes as a six-byte
// \uXXXX escape (HTML-safe output): a tool call's arguments may come back
// in the prompt longer than the model wrote them.
const escapedRunes = "<>&\u2028\u2029"

// learnedSlack covers what a chat template adds that may vary between two
// prompts of one fixed part, such as today's date.
const learnedSlack = 16

// rawArgumentsPrefix starts the arguments a provider kept as text because
// they were not a JSON object: escaped and wrapped, they are not the
// model's tokens.
const rawArgumentsPrefix = `{"_raw":`

// fixedPart is the part of a prompt that is not its messages.
type fixedPart struct {
	system string
	tools  []provider.Tool
	digest string
}

// fixedDigest identifies what every prompt of one phase of one agent
// shares: the agent, the kind of provider that sends it, the model, the
// system prompt and the tools. It keys learned overheads, and tells
// whether a count was of the same fixed part.
func fixedDigest(agent, kind string, req *provider.Request) string {
	h := sha256.New()
	write := func(s string) {
		h.Write(binary.AppendUvarint(nil, uint64(len(s))))
		h.Write([]byte(s))
	}
	write("errand prompt fixed part v1")
	write(agent)
	write(kind)
	write(req.Model)
	write(req.System)
	for _, t := range req.Tools {
		write(t.Name)
		write(t.Description)
		write(string(t.Parameters))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// boundInput is what bounds works from.
type boundInput struct {
	req *provider.Request
	// digest is fixedDigest of req.
	digest string
	// turns are the transcript req.Messages were made from, one for one.
	turns []Turn
	// prev is the fixed part of the attempt's previous call, if any.
	prev *fixedPart
	// tok is the model's tokenizer bound, or nil.
	tok *provider.Bound
	// learned bounds the fixed part, when an earlier call taught it (0:
	// nothing learned).
	learned int64
	// distrust is set once a count was implausible: no count is used.
	distrust bool
}

// boundParts are the bounds promptBound takes the least of; 0 where one
// does not apply.
type boundParts struct {
	bytes, last, tokenizer, learned int64
}

func (p boundParts) min() int64 {
	b := p.bytes
	for _, v := range []int64{p.last, p.tokenizer, p.learned} {
		if v > 0 {
			b = min(b, v)
		}
	}
	return b
}

// bounds computes the bounds of in.req. The tokenizer's count of the
// whole prompt is skipped when the last count applies to the same fixed
// part: it adds little then, and would cost a pass over the transcript on
// every call.
func bounds(in *boundInput) boundParts {
	p := boundParts{bytes: provider.ByteBound.Request(in.req)}
	var fixedSame bool
	if !in.distrust {
		p.last, fixedSame = lastCount(in)
	}
	if in.tok != nil && !fixedSame {
		p.tokenizer = in.tok.Request(in.req)
	}
	if in.learned > 0 && !in.distrust {
		p.learned = in.learned + learnedSlack + counter(in.tok).Messages(in.req.Messages, 0)
	}
	return p
}

// lastUsage is the index of the last turn with a count, or -1.
func lastUsage(turns []Turn) int {
	for i := len(turns) - 1; i >= 0; i-- {
		if turns[i].Usage != nil {
			return i
		}
	}
	return -1
}

// lastCount is the bound from the last count in the transcript, or 0 when
// there is none. fixedSame says whether that count was of the same fixed
// part.
func lastCount(in *boundInput) (bound int64, fixedSame bool) {
	last := lastUsage(in.turns)
	if last < 0 || len(in.turns) != len(in.req.Messages) {
		return 0, false
	}
	count := counter(in.tok)
	u := in.turns[last].Usage
	msgs := in.req.Messages
	bound = u.InputTokens
	next := last + 1
	if next < len(msgs) && msgs[next].Role == provider.RoleAssistant {
		bound += replyBound(count, &msgs[next], u.OutputTokens)
		next++
	}
	bound += count.Messages(msgs, next)
	switch {
	case u.Fixed == in.digest:
		fixedSame = true
	case in.prev != nil && in.prev.digest == u.Fixed:
		bound += fixedGrowth(count, in.prev, in.req)
	default:
		bound += count.Fixed(in.req)
	}
	return bound, fixedSame
}

// counter bounds the parts of a prompt: with the model's tokenizer when
// there is one, else a token per byte.
func counter(tok *provider.Bound) *provider.Bound {
	if tok != nil {
		return tok
	}
	return provider.ByteBound
}

// replyBound bounds the assistant turn m, a reply of out output tokens,
// as it comes back in a prompt.
func replyBound(b *provider.Bound, m *provider.Message, out int64) int64 {
	total := b.MessageFraming + out
	for _, c := range m.ToolCalls {
		total += b.MessageFraming + b.TextFunc(c.ID) + b.TextFunc(c.Name)
		args := string(c.Arguments)
		if strings.HasPrefix(args, rawArgumentsPrefix) {
			total += b.TextFunc(args)
			continue
		}
		for _, r := range args {
			if strings.ContainsRune(escapedRunes, r) {
				total += int64(len(`\u003c`))
			}
		}
	}
	return total
}

// fixedGrowth bounds what req's fixed part may count beyond prev's: a
// system prompt that changed, whole, and each tool prev did not have.
func fixedGrowth(b *provider.Bound, prev *fixedPart, req *provider.Request) int64 {
	var total int64
	if req.System != prev.system {
		total += b.System(req.System)
	}
	if len(prev.tools) == 0 && len(req.Tools) > 0 {
		total += b.ToolUse
	}
	for _, t := range req.Tools {
		had := slices.ContainsFunc(prev.tools, func(p provider.Tool) bool {
			return p.Name == t.Name && p.Description == t.Description && string(p.Parameters) == string(t.Parameters)
		})
		if !had {
			total += b.Tool(t)
		}
	}
	return total
}

// textBytes are the bytes of req's text, without framing.
var textBytes = &provider.Bound{TextFunc: provider.MaxTextTokens}

// plausible reports whether a server's count of req's prompt may be a count
// of the whole prompt (see the top of this file): enough tokens for its
// text, no more than bound (0: not known), and no fewer than the count of
// an earlier prompt of turns it extends, with the same fixed part.
func plausible(req *provider.Request, digest string, turns []Turn, in, bound int64) bool {
	if in*maxBytesPerToken < textBytes.Request(req) || (bound > 0 && in > bound) {
		return false
	}
	if i := lastUsage(turns); i >= 0 && turns[i].Usage.Fixed == digest && in < turns[i].Usage.InputTokens {
		return false
	}
	return true
}

// overheadLearning is where a call's count may teach the agent's overhead.
type overheadLearning struct {
	keeper taskrun.PromptOverheads
	key    string
	tokens int64 // the figure kept before the call; 0: none
}

// digest is fixedDigest of req as this task's agent sends it.
func (a *LLM) digest(req *provider.Request) string {
	return fixedDigest(a.agent, fmt.Sprintf("%T", a.cfg.Provider), req)
}

// promptBound bounds the input tokens of req, made from turns (see the top
// of this file). For the first prompt of a conversation (no count in
// turns), it looks up the overhead learned for req's fixed part, and learn
// says where to keep what the call teaches. Later prompts have the last
// count; a fixed part that changed within a task (a plan in the system
// prompt) is bounded on its own, and not learned: no other task shares it.
//
// Errors are the store's, from that look-up; no call was made.
func (a *LLM) promptBound(ctx context.Context, run taskrun.Run, req *provider.Request, turns []Turn) (prompt int64, learn *overheadLearning, err error) {
	in := &boundInput{req: req, digest: a.digest(req), turns: turns, prev: a.fixed, distrust: a.distrust}
	if tb, ok := a.cfg.Provider.(provider.TokenBounder); ok {
		in.tok = tb.TokenBound(req.Model)
	}
	if lastUsage(turns) < 0 && !a.distrust {
		if keeper, ok := run.(taskrun.PromptOverheads); ok {
			learn = &overheadLearning{keeper: keeper, key: in.digest}
			tokens, found, err := keeper.PromptOverhead(ctx, learn.key)
			if err != nil {
				return 0, nil, fmt.Errorf("look up prompt overhead: %w", err)
			}
			if found {
				learn.tokens, in.learned = tokens, tokens
			}
		}
	}
	return bounds(in).min(), learn, nil
}

// counted notes the fixed part of a call to req, whose prompt was bound
// (0: not known, a replayed call) and, when the server counted its usage
// plausibly, puts that on the last turn of the prompt, for the next
// prompt's bound. It reports whether the usage was such a count: not
// estimated by FillUsage, with input tokens, with output tokens unless the
// reply is empty (a server that counts only the prompt says nothing of the
// reply), and plausible. An implausible count makes the attempt distrust
// every count.
func (a *LLM) counted(state *TaskState, req *provider.Request, u provider.Usage, reply *modelReply, bound int64) bool {
	digest := a.digest(req)
	a.fixed = &fixedPart{system: req.System, tools: req.Tools, digest: digest}
	empty := reply.Content == "" && len(reply.ToolCalls) == 0
	if u.Estimated || u.InputTokens <= 0 || u.OutputTokens < 0 || (u.OutputTokens == 0 && !empty) || len(state.Transcript) == 0 {
		return false
	}
	if a.distrust || !plausible(req, digest, state.Transcript, u.InputTokens, bound) {
		a.distrust = true
		return false
	}
	turns := slices.Clone(state.Transcript)
	turns[len(turns)-1].Usage = &PromptUsage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, Fixed: digest}
	state.Transcript = turns
	return true
}
