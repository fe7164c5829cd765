package injection

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// views are the folded forms of one text the rules match against.
type views struct {
	main string // NFKC, lower case, look-alikes folded, spaced letters joined
	leet string // main with leetspeak undone; "" when it equals main
}

// smallCaps maps the Latin small capitals NFKC leaves alone.
var smallCaps = map[rune]rune{
	'ᴀ': 'a', 'ʙ': 'b', 'ᴄ': 'c', 'ᴅ': 'd', 'ᴇ': 'e', 'ꜰ': 'f', 'ɢ': 'g', 'ʜ': 'h',
	'ɪ': 'i', 'ᴊ': 'j', 'ᴋ': 'k', 'ʟ': 'l', 'ᴍ': 'm', 'ɴ': 'n', 'ᴏ': 'o', 'ᴘ': 'p',
	'ʀ': 'r', 'ꜱ': 's', 'ᴛ': 't', 'ᴜ': 'u', 'ᴠ': 'v', 'ᴡ': 'w', 'ʏ': 'y', 'ᴢ': 'z',
	'ı': 'i', 'ſ': 's', 'ɑ': 'a', 'ɡ': 'g',
}

// confusables maps Cyrillic and Greek letters that look Latin. It is
// applied only to words that also hold Latin letters, so Russian and Greek
// text stays as it is.
var confusables = map[rune]rune{
	'а': 'a', 'в': 'b', 'е': 'e', 'ё': 'e', 'к': 'k', 'м': 'm', 'н': 'h', 'о': 'o',
	'р': 'p', 'с': 'c', 'т': 't', 'у': 'y', 'х': 'x', 'і': 'i', 'ї': 'i', 'ј': 'j',
	'ѕ': 's', 'ԁ': 'd', 'һ': 'h', 'ӏ': 'l', 'ԛ': 'q', 'ԝ': 'w', 'ɩ': 'i',
	'α': 'a', 'β': 'b', 'ε': 'e', 'η': 'n', 'ι': 'i', 'κ': 'k', 'ν': 'v', 'ο': 'o',
	'ρ': 'p', 'τ': 't', 'υ': 'u', 'χ': 'x', 'γ': 'y', 'ω': 'w',
}

// leet maps the digits and signs of leetspeak, applied only inside words
// that mix them with Latin letters.
var leet = map[rune]rune{
	'0': 'o', '1': 'i', '3': 'e', '4': 'a', '5': 's', '7': 't', '9': 'g',
	'@': 'a', '$': 's', '!': 'i', '|': 'l', '+': 't',
}

// fold computes the views of s.
func fold(s string) views {
	s = norm.NFKC.String(s)
	ascii := isASCII(s)
	switch {
	case !ascii:
		s = lower(s)
	case hasUpper(s):
		s = lowerASCII(s)
	}
	if !ascii {
		// Only words with non-ASCII letters can hold look-alikes.
		s = foldWords(s, confusables, isMixedScript)
	}
	if !ascii || maySpace(s) {
		s = joinSpaced(s)
	}
	s = squeezeSpaces(s)
	v := views{main: s}
	if !ascii || mayLeet(s) {
		if l := foldWords(s, leet, isLeetWord); l != s {
			v.leet = l
		}
	}
	return v
}

func lowerASCII(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// mayLeet reports whether the ASCII text s may hold a leetspeak word: one
// made of letters and leet signs only, with at least one of each, so with a
// letter next to a sign.
func mayLeet(s string) bool {
	for i := 0; i+1 < len(s); i++ {
		if leetPair[leetClass[s[i]]|leetClass[s[i+1]]<<2] {
			return true
		}
	}
	return false
}

// leetClass is 1 for a-z and 2 for a leet sign; leetPair is true for a
// letter and a sign in either order.
var (
	leetClass = func() (t [256]byte) {
		for c := 'a'; c <= 'z'; c++ {
			t[c] = 1
		}
		for c := range leet {
			t[c] = 2
		}
		return t
	}()
	leetPair = [16]bool{1 | 2<<2: true, 2 | 1<<2: true}
)

// lower is the case and space folding of fold.
func lower(s string) string {
	return strings.Map(func(r rune) rune {
		if r < utf8.RuneSelf {
			if 'A' <= r && r <= 'Z' {
				return r + 'a' - 'A'
			}
			return r
		}
		r = unicode.ToLower(r)
		if m, ok := smallCaps[r]; ok {
			return m
		}
		switch r {
		case '\u00a0', '\u2002', '\u2003', '\u2009', '\u202f', '\u3000':
			return ' '
		case '’', '‘', 'ʼ':
			return '\''
		}
		return r
	}, s)
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

func hasUpper(s string) bool {
	for i := 0; i < len(s); i++ {
		if 'A' <= s[i] && s[i] <= 'Z' {
			return true
		}
	}
	return false
}

// maySpace reports whether the ASCII text s may hold what joinSpaced joins:
// three single letters separated by one and the same spacer.
func maySpace(s string) bool {
	for p := 0; p+4 < len(s); p++ {
		sep := s[p+1]
		if isSpacer(sep) && s[p+3] == sep && isASCIILetter(s[p]) && isASCIILetter(s[p+2]) && isASCIILetter(s[p+4]) &&
			(p == 0 || !isASCIIAlnum(s[p-1])) && (p+5 == len(s) || !isASCIIAlnum(s[p+5])) {
			return true
		}
	}
	return false
}

func isASCIILetter(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }

func isASCIIAlnum(c byte) bool { return isASCIILetter(c) || '0' <= c && c <= '9' }

// isWordRune reports the runes foldWords treats as part of a word.
func isWordRune(r rune) bool {
	if r < utf8.RuneSelf {
		return asciiWord[r]
	}
	return unicode.IsLetter(r) || unicode.IsDigit(r) || r == '@' || r == '$' || r == '!' || r == '|' || r == '+' || r == '_'
}

// asciiWord is isWordRune for ASCII.
var asciiWord = func() (t [utf8.RuneSelf]bool) {
	for c := range rune(utf8.RuneSelf) {
		t[c] = unicode.IsLetter(c) || unicode.IsDigit(c) || c == '@' || c == '$' || c == '!' || c == '|' || c == '+' || c == '_'
	}
	return t
}()

// asciiLeet is leet for ASCII (every leet sign is ASCII).
var asciiLeet = func() (t [utf8.RuneSelf]rune) {
	for k, v := range leet {
		t[k] = v
	}
	return t
}()

// foldWords applies m to each word for which want is true.
func foldWords(s string, m map[rune]rune, want func(word string) bool) string {
	var b strings.Builder
	changed := false
	start := -1
	flush := func(end int) {
		w := s[start:end]
		if want(w) {
			nw := strings.Map(func(r rune) rune {
				if x, ok := m[r]; ok {
					return x
				}
				return r
			}, w)
			if nw != w {
				if !changed {
					b.Grow(len(s))
					b.WriteString(s[:start])
					changed = true
				}
				b.WriteString(nw)
				return
			}
		}
		if changed {
			b.WriteString(w)
		}
	}
	for i, r := range s {
		if isWordRune(r) {
			if start < 0 {
				start = i
			}
			continue
		}
		if start >= 0 {
			flush(i)
			start = -1
		}
		if changed {
			b.WriteRune(r)
		}
	}
	if start >= 0 {
		flush(len(s))
	}
	if !changed {
		return s
	}
	return b.String()
}

// isMixedScript reports a word with both Latin letters and Cyrillic or
// Greek look-alikes.
func isMixedScript(w string) bool {
	latin, other := false, false
	for _, r := range w {
		switch {
		case r < utf8.RuneSelf:
			if unicode.IsLetter(r) {
				latin = true
			}
		case confusables[r] != 0:
			other = true
		}
	}
	return latin && other
}

// isLeetWord reports a word of at least three runes made only of ASCII
// letters and leet signs, with at least one of each.
func isLeetWord(w string) bool {
	letters, signs, n := 0, 0, 0
	for _, r := range w {
		n++
		switch {
		case r >= 'a' && r <= 'z':
			letters++
		case r >= utf8.RuneSelf:
			return false
		case asciiLeet[r] != 0:
			signs++
		}
	}
	return n >= 3 && letters >= 1 && signs >= 1 && letters+signs == n
}

// joinSpaced joins runs of three or more single letters separated by one
// and the same space or sign ("i g n o r e", "i.g.n.o.r.e") into words.
func joinSpaced(s string) string {
	var b strings.Builder
	changed := false
	last := 0 // s[:last] is in b
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if !unicode.IsLetter(r) || (i > 0 && isLetterBefore(s, i)) {
			i += size
			continue
		}
		n, end, k := 0, i, i
		var sep byte
		for {
			r, sz := utf8.DecodeRuneInString(s[k:])
			if !unicode.IsLetter(r) {
				break
			}
			after := k + sz
			if after < len(s) && isLetterAt(s, after) {
				break // not a single letter
			}
			n, end = n+1, after
			if after+1 >= len(s) || !isSpacer(s[after]) || (sep != 0 && s[after] != sep) {
				break
			}
			sep, k = s[after], after+1
		}
		if n < 3 {
			i = max(end, i+size)
			continue
		}
		if !changed {
			b.Grow(len(s))
			changed = true
		}
		b.WriteString(s[last:i])
		for _, c := range s[i:end] {
			if unicode.IsLetter(c) {
				b.WriteRune(c)
			}
		}
		last, i = end, end
	}
	if !changed {
		return s
	}
	b.WriteString(s[last:])
	return b.String()
}

func isSpacer(c byte) bool {
	switch c {
	case ' ', '.', '-', '_', '*', '|', '/', '~':
		return true
	}
	return false
}

func isLetterBefore(s string, i int) bool {
	r, _ := utf8.DecodeLastRuneInString(s[:i])
	return unicode.IsLetter(r) || unicode.IsDigit(r)
}

func isLetterAt(s string, i int) bool {
	r, _ := utf8.DecodeRuneInString(s[i:])
	return unicode.IsLetter(r) || unicode.IsDigit(r)
}

// squeezeSpaces turns runs of spaces and tabs into one space and trims them
// at line ends.
func squeezeSpaces(s string) string {
	if !strings.Contains(s, "  ") && !strings.Contains(s, "\t") && !strings.Contains(s, " \n") {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	space := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == ' ' || c == '\t' {
			space = true
			continue
		}
		if space && c != '\n' && b.Len() > 0 {
			b.WriteByte(' ')
		}
		space = false
		b.WriteByte(c)
	}
	return b.String()
}
