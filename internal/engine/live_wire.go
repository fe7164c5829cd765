package engine

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"

	"github.com/errandhq/errand/internal/live"
	"github.com/errandhq/errand/store"
)

// relayMessage is one payload of the live output relay, as JSON.
type relayMessage struct {
	Origin string `json:"o"`
	// Want: tasks the origin follows; Fresh: tasks it has just begun to
	// follow, whose text so far it asks for.
	Want   []string     `json:"w,omitempty"`
	Fresh  []string     `json:"n,omitempty"`
	Pieces []relayPiece `json:"p,omitempty"`
}

// relayPiece is a live.Delta on the wire, or the end of a call (End), or
// (Reset) word that the task's pieces before were dropped: forget them,
// its text so far follows.
type relayPiece struct {
	Task   string `json:"t"`
	Step   int    `json:"s,omitempty"`
	Call   int    `json:"c,omitempty"`
	Offset int    `json:"f,omitempty"`
	Text   string `json:"x,omitempty"`
	End    bool   `json:"e,omitempty"`
	Reset  bool   `json:"r,omitempty"`
}

func decodeRelay(payload string) (relayMessage, bool) {
	var m relayMessage
	if err := json.Unmarshal([]byte(payload), &m); err != nil || m.Origin == "" {
		return relayMessage{}, false // from a newer errand, or not errand's
	}
	return m, true
}

// mergePieces turns changes, in the order made, into pieces: the
// consecutive pieces of a call become one, and an end follows its call's
// text.
func mergePieces(changes []live.Change) []relayPiece {
	type open struct{ at, runes int }
	var out []relayPiece
	last := map[[3]any]*open{}
	for _, c := range changes {
		d := c.Delta
		k := [3]any{d.TaskID, d.StepNo, d.CallIndex}
		if c.End {
			out = append(out, relayPiece{Task: d.TaskID, Step: d.StepNo, Call: d.CallIndex, End: true})
			delete(last, k)
			continue
		}
		if o := last[k]; o != nil && out[o.at].Offset+o.runes == d.Offset {
			out[o.at].Text += d.Text
			o.runes += utf8.RuneCountInString(d.Text)
			continue
		}
		out = append(out, relayPiece{Task: d.TaskID, Step: d.StepNo, Call: d.CallIndex, Offset: d.Offset, Text: d.Text})
		last[k] = &open{at: len(out) - 1, runes: utf8.RuneCountInString(d.Text)}
	}
	return out
}

// packRelay encodes msg's wants and the pieces, in order, into payloads
// of at most store.MaxOutputPayload bytes, cutting long text between
// characters. Sizes are counted as JSON escapes them at most, so no
// payload is measured twice.
func packRelay(msg relayMessage, pieces []relayPiece) []string {
	const limit = store.MaxOutputPayload
	// Room for `{"o":…,"w":[],"n":[],"p":[]}` with nothing in the lists.
	base := len(`{"o":,"w":[],"n":[],"p":[]}`) + quotedLen(msg.Origin)
	var (
		out  []string
		cur  = relayMessage{Origin: msg.Origin}
		size = base
	)
	emit := func() {
		if len(cur.Want)+len(cur.Fresh)+len(cur.Pieces) == 0 {
			return
		}
		out = append(out, encodeRelay(cur))
		cur, size = relayMessage{Origin: msg.Origin}, base
	}
	for i, tasks := range [][]string{msg.Want, msg.Fresh} {
		for _, t := range tasks {
			n := quotedLen(t) + 1
			if size+n > limit {
				emit()
			}
			if i == 0 {
				cur.Want = append(cur.Want, t)
			} else {
				cur.Fresh = append(cur.Fresh, t)
			}
			size += n
		}
	}
	for _, p := range pieces {
		text, end := p.Text, p.End
		quoted := quotedLen(text) // counted once: a long text is cut many times
		for {
			bare := p
			bare.Text = ""
			// The piece without its text, plus `,"x":""` and a comma.
			n := len(encodePiece(bare)) + len(`,"x":""`) + 1
			if size+n+quoted-2 <= limit {
				p.Text, p.End = text, end
				cur.Pieces = append(cur.Pieces, p)
				size += n + quoted - 2
				break
			}
			room := limit - size - n
			if room < 256 && len(cur.Pieces)+len(cur.Want)+len(cur.Fresh) > 0 {
				emit() // too little room left: cut the text in a new payload
				continue
			}
			head, runes, escaped := cutQuoted(text, room)
			p.Text, p.End = head, false
			cur.Pieces = append(cur.Pieces, p)
			emit()
			p.Offset += runes
			text = text[len(head):]
			quoted -= escaped
		}
	}
	emit()
	return out
}

func encodeRelay(m relayMessage) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(m) // strings and ints only: it cannot fail
	return string(bytes.TrimSuffix(b.Bytes(), []byte("\n")))
}

func encodePiece(p relayPiece) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(p)
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// quotedLen bounds the length of s as a JSON string, quotes included.
func quotedLen(s string) int {
	n := 2
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		n += escapedLen(r, size)
		i += size
	}
	return n
}

// escapedLen bounds the bytes JSON takes for a character of size bytes.
func escapedLen(r rune, size int) int {
	switch {
	case r == '"' || r == '\\':
		return 2
	case r < 0x20, r == utf8.RuneError && size == 1, r == '\u2028', r == '\u2029':
		return 6 // \uXXXX
	}
	return size
}

// cutQuoted returns the longest head of s, cut between characters, whose
// escaped length fits room (at least one character), its characters and
// its escaped length.
func cutQuoted(s string, room int) (head string, runes, escaped int) {
	i := 0
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		e := escapedLen(r, size)
		if escaped+e > room && runes > 0 {
			break
		}
		escaped += e
		i += size
		runes++
	}
	return s[:i], runes, escaped
}
