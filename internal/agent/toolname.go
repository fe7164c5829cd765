package agent

import (
	"crypto/sha256"
	"encoding/hex"
	"regexp"
	"strings"
)

// Tool names as models see them. errand names a tool of an MCP server
// "server.tool": that is the name allow and deny lists, step records and
// the call use. OpenAI and Anthropic accept function names that match
// ^[a-zA-Z0-9_-]{1,64}$ only, so the model sees another name, and the
// name it calls is mapped back. This file is the one place that knows.
//
// modelToolName chooses, for the name errand uses:
//   - the name itself when models accept it (every built-in tool);
//   - "server__tool" when that is accepted and reads back one way only:
//     the server name holds no "__" and does not end in '_' (server names
//     have no dots, so a name splits at its first one);
//   - otherwise (a long name, characters models refuse, an ambiguous
//     server name) the name with every refused character made '_', cut
//     to fit, then '_' and 8 hex digits of its SHA-256: distinct names
//     stay distinct.
//
// The mapping depends on the name alone, so a transcript written by one
// attempt reads the same to the model in the next. toolNames maps back,
// from the tools of one request (and, for a "server__tool" not offered,
// by reading the name).

var modelNameRE = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

const maxModelName = 64

func modelToolName(name string) string {
	if modelNameRE.MatchString(name) {
		return name
	}
	server, tool, ok := strings.Cut(name, ".")
	if ok && server != "" && !strings.Contains(server, "__") && !strings.HasSuffix(server, "_") {
		if n := server + "__" + tool; modelNameRE.MatchString(n) {
			return n
		}
	}
	sum := sha256.Sum256([]byte(name))
	suffix := "_" + hex.EncodeToString(sum[:4])
	var b strings.Builder
	for _, r := range strings.Replace(name, ".", "__", 1) {
		if b.Len() == maxModelName-len(suffix) {
			break
		}
		if r < 0x80 && modelNameRE.MatchString(string(r)) {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String() + suffix
}

// toolNames maps the names a model calls back to errand's.
type toolNames map[string]string

// add records a tool offered under its model name, and reports false when
// another tool took that model name first.
func (n toolNames) add(name string) (string, bool) {
	model := modelToolName(name)
	if prev, taken := n[model]; taken && prev != name {
		return model, false
	}
	n[model] = name
	return model, true
}

// name is errand's name of a tool the model called: the tool offered under
// that name; else the "server.tool" whose model name it is (a tool not
// offered now, named as policies and step records know it); else the name
// as called. Tools not offered are refused or answered as unknown.
func (n toolNames) name(model string) string {
	if name, ok := n[model]; ok {
		return name
	}
	if server, tool, ok := strings.Cut(model, "__"); ok {
		if name := server + "." + tool; modelToolName(name) == model {
			return name
		}
	}
	return model
}
