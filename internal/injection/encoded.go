package injection

import (
	"encoding/base64"
	"encoding/hex"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"
)

const (
	// maxDecodedBytes bounds the decoded bytes classified per Classify call.
	maxDecodedBytes = 32 << 10
	// maxBlobs bounds the blobs decoded per Classify call.
	maxBlobs = 64
)

var (
	base64Blob = regexp.MustCompile(`[A-Za-z0-9+/_-]{20,}={0,2}`)
	hexBlob    = regexp.MustCompile(`(?:(?:\\x|0x)?[0-9a-fA-F]{2}[ :]?){16,}`)
)

// decodeBlobs returns the base64 and hex blobs of s that decode to text.
func decodeBlobs(s string, b *budget) []string {
	var out []string
	try := func(d []byte) {
		if len(d) > b.decoded || !isText(d) {
			return
		}
		b.decoded -= len(d)
		out = append(out, string(d))
	}
	for _, m := range base64Blobs(s) {
		if b.blobs >= maxBlobs || b.decoded <= 0 {
			break
		}
		b.blobs++
		if d, ok := decodeBase64(m); ok {
			try(d)
		}
	}
	for _, m := range hexBlobs(s) {
		if b.blobs >= maxBlobs || b.decoded <= 0 {
			break
		}
		b.blobs++
		m = strings.NewReplacer(`\x`, "", "0x", "", " ", "", ":", "").Replace(m)
		if len(m)%2 == 1 {
			m = m[:len(m)-1]
		}
		if d, err := hex.DecodeString(m); err == nil {
			try(d)
		}
	}
	return out
}

// base64Blobs returns base64Blob.FindAllString(s, -1), found without the
// regexp engine: a match is a run of 20 or more characters of the class,
// as long as it goes, and then up to two '='.
func base64Blobs(s string) []string {
	var out []string
	for i := 0; i < len(s); {
		if !isBase64Char(s[i]) {
			i++
			continue
		}
		j := i + 1
		for j < len(s) && isBase64Char(s[j]) {
			j++
		}
		if j-i >= 20 {
			for k := 0; k < 2 && j < len(s) && s[j] == '='; k++ {
				j++
			}
			out = append(out, s[i:j])
		}
		i = j
	}
	return out
}

func isBase64Char(c byte) bool { return blobClass[c]&base64Class != 0 }

// blobClass holds, per byte, whether it belongs in a base64 or a hex blob.
var blobClass = func() (t [256]byte) {
	for c := range 256 {
		b := byte(c)
		if 'a' <= b && b <= 'z' || 'A' <= b && b <= 'Z' || '0' <= b && b <= '9' || b == '+' || b == '/' || b == '_' || b == '-' {
			t[c] |= base64Class
		}
		if '0' <= b && b <= '9' || 'a' <= b && b <= 'f' || 'A' <= b && b <= 'F' {
			t[c] |= hexDigitClass | hexRunClass
		}
		if b == 'x' || b == '\\' || b == ' ' || b == ':' {
			t[c] |= hexRunClass
		}
	}
	return t
}()

const (
	base64Class = 1 << iota
	hexDigitClass
	hexRunClass
)

// hexBlobs returns hexBlob.FindAllString(s, -1). A match is made of hex
// digits, 'x', '\\', ' ' and ':' only and holds at least 32 hex digits, so
// the regexp runs only on the runs of those characters that have as many.
func hexBlobs(s string) []string {
	var out []string
	for i := 0; i < len(s); {
		if !isHexRunChar(s[i]) {
			i++
			continue
		}
		j, digits := i, 0
		for ; j < len(s) && isHexRunChar(s[j]); j++ {
			if isHexDigit(s[j]) {
				digits++
			}
		}
		if digits >= 32 {
			out = append(out, hexBlob.FindAllString(s[i:j], -1)...)
		}
		i = j
	}
	return out
}

func isHexDigit(c byte) bool { return blobClass[c]&hexDigitClass != 0 }

func isHexRunChar(c byte) bool { return blobClass[c]&hexRunClass != 0 }

func decodeBase64(m string) ([]byte, bool) {
	m = strings.TrimRight(m, "=")
	if len(m)%4 == 1 {
		m = m[:len(m)-1]
	}
	enc := base64.RawStdEncoding
	if strings.ContainsAny(m, "-_") {
		enc = base64.RawURLEncoding
	}
	d, err := enc.DecodeString(m)
	return d, err == nil
}

// isText reports whether d is UTF-8 text of mostly letters and spaces, not a
// hash, key or compressed data that happens to decode.
func isText(d []byte) bool {
	if len(d) < 12 || !utf8.Valid(d) {
		return false
	}
	var n, letters, spaces, bad int
	for _, r := range string(d) {
		n++
		switch {
		case unicode.IsLetter(r):
			letters++
		case unicode.IsSpace(r):
			spaces++
		case !unicode.IsPrint(r):
			bad++
		}
	}
	return bad == 0 && spaces >= 1 && letters*10 >= n*6
}
