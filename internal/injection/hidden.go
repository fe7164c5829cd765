package injection

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// hidden is what scanHidden found.
type hidden struct {
	visible string // the text without invisible characters
	tagText string // ASCII spelled by tag characters outside emoji flags
	inWord  int    // zero-width characters between two letters
	weight  int    // weight of hidden_text by itself
	reason  string
}

// isZeroWidth reports the zero-width and invisible formatting characters
// (U+200B–U+200F, U+2060–U+2064, U+FEFF, U+180E, U+034F).
func isZeroWidth(r rune) bool {
	return (r >= 0x200b && r <= 0x200f) || (r >= 0x2060 && r <= 0x2064) ||
		r == 0xfeff || r == 0x180e || r == 0x034f
}

// isBidi reports the bidi embedding, override and isolate controls.
func isBidi(r rune) bool {
	return (r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069)
}

func isTag(r rune) bool { return r >= 0xe0000 && r <= 0xe007f }

// scanHidden finds and removes invisible characters in one pass.
func scanHidden(s string) hidden {
	var h hidden
	fast := true
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			fast = false
			break
		}
	}
	if fast {
		h.visible = s
		return h
	}
	var (
		vis       strings.Builder
		tags      strings.Builder
		run       int  // invisible characters in a row
		maxRun    int  // longest such run
		overrides int  // U+202D, U+202E
		strayTags int  // tag characters outside an emoji flag
		prev      rune // last visible rune
		inFlag    bool // after U+1F3F4, inside its tag sequence
	)
	vis.Grow(len(s))
	for i, r := range s {
		invisible := isZeroWidth(r) || isBidi(r) || isTag(r)
		if !invisible {
			if run > maxRun {
				maxRun = run
			}
			// ZWJ and ZWNJ between letters are legitimate in Persian,
			// Arabic and the Indic scripts; only Latin, Cyrillic and Greek
			// words count.
			if run > 0 && unicode.IsLetter(prev) && unicode.IsLetter(r) && isWordLetter(r) {
				h.inWord++
			}
			run = 0
			inFlag = r == 0x1f3f4
			prev = r
			vis.WriteRune(r)
			continue
		}
		switch {
		case isTag(r):
			if inFlag {
				if r == 0xe007f {
					inFlag = false
				}
				continue
			}
			strayTags++
			if r >= 0xe0020 && r <= 0xe007e && tags.Len() < 4096 {
				tags.WriteByte(byte(r - 0xe0000))
			}
		case r == 0x202d || r == 0x202e:
			overrides++
		case r == 0xfeff && i == 0:
			continue // a byte order mark
		}
		run++
	}
	if run > maxRun {
		maxRun = run
	}
	h.visible = vis.String()
	h.tagText = tags.String()
	switch {
	case strayTags > 0:
		h.weight, h.reason = flagScore, "carries invisible Unicode tag characters"
	case overrides > 0:
		h.weight, h.reason = flagScore, "carries bidi override characters that reorder the text"
	case maxRun >= 3:
		h.weight, h.reason = flagScore, "carries a run of invisible characters"
	}
	return h
}

// isWordLetter reports whether r is a letter of Latin, Cyrillic or Greek
// script, where a zero-width character inside a word has no linguistic
// role.
func isWordLetter(r rune) bool {
	return r < 0x250 || unicode.In(r, unicode.Cyrillic, unicode.Greek)
}
