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
	for _, m := range base64Blob.FindAllString(s, -1) {
		if b.blobs >= maxBlobs || b.decoded <= 0 {
			break
		}
		b.blobs++
		if d, ok := decodeBase64(m); ok {
			try(d)
		}
	}
	for _, m := range hexBlob.FindAllString(s, -1) {
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
