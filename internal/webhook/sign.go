package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Header names of the Standard Webhooks signing scheme.
const (
	HeaderID        = "webhook-id"
	HeaderTimestamp = "webhook-timestamp"
	HeaderSignature = "webhook-signature"
)

// SecretPrefix marks a secret whose key is the base64 text after it.
const SecretPrefix = "whsec_"

// DefaultTolerance is how far a webhook-timestamp may be from the
// verifier's clock, either way, when Verify is given no tolerance.
const DefaultTolerance = 5 * time.Minute

// Errors returned by Verify.
var (
	// ErrBadSignature: a signing header is missing or malformed, or no
	// signature in webhook-signature matches the body.
	ErrBadSignature = errors.New("webhook: invalid signature")
	// ErrBadTimestamp: webhook-timestamp is further from now than the
	// tolerance, which guards against replays.
	ErrBadTimestamp = errors.New("webhook: timestamp outside tolerance")
)

// Key returns the signing key of a secret: the base64-decoded part after
// "whsec_" for a whsec_… secret, or the raw bytes of any other secret. It
// fails for an empty secret, and for a whsec_ secret whose rest is not
// standard base64 or is empty: an empty key would sign with no secret.
func Key(secret string) ([]byte, error) {
	rest, ok := strings.CutPrefix(secret, SecretPrefix)
	if !ok {
		if secret == "" {
			return nil, errors.New("empty secret")
		}
		return []byte(secret), nil
	}
	key, err := base64.StdEncoding.DecodeString(rest)
	if err != nil {
		return nil, fmt.Errorf("decode %s secret: the part after %[1]s is not valid base64", SecretPrefix)
	}
	if len(key) == 0 {
		return nil, fmt.Errorf("decode %s secret: empty key", SecretPrefix)
	}
	return key, nil
}

// Sign returns the webhook-signature value for a message: "v1," then the
// standard base64 of HMAC-SHA256(key, "{id}.{unix seconds of ts}.{body}").
func Sign(key []byte, id string, ts time.Time, body []byte) string {
	return "v1," + base64.StdEncoding.EncodeToString(mac(key, id, strconv.FormatInt(ts.Unix(), 10), body))
}

func mac(key []byte, id, ts string, body []byte) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(id))
	h.Write([]byte{'.'})
	h.Write([]byte(ts))
	h.Write([]byte{'.'})
	h.Write(body)
	return h.Sum(nil)
}

// Verify checks a received webhook as a Standard Webhooks receiver does:
// webhook-timestamp must be within tolerance of now (DefaultTolerance if
// tolerance ≤ 0), and one of the space-separated "v1,…" signatures of
// webhook-signature must match the body under key. It returns nil, or an
// error wrapping ErrBadSignature or ErrBadTimestamp.
func Verify(key []byte, headers http.Header, body []byte, now time.Time, tolerance time.Duration) error {
	id, ts, sigs := headers.Get(HeaderID), headers.Get(HeaderTimestamp), headers.Get(HeaderSignature)
	switch {
	case id == "":
		return fmt.Errorf("%w: no %s header", ErrBadSignature, HeaderID)
	case ts == "":
		return fmt.Errorf("%w: no %s header", ErrBadSignature, HeaderTimestamp)
	case sigs == "":
		return fmt.Errorf("%w: no %s header", ErrBadSignature, HeaderSignature)
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return fmt.Errorf("%w: %s %q is not Unix seconds", ErrBadSignature, HeaderTimestamp, ts)
	}
	if tolerance <= 0 {
		tolerance = DefaultTolerance
	}
	if skew := now.Sub(time.Unix(sec, 0)); skew > tolerance || skew < -tolerance {
		return fmt.Errorf("%w: %s is %v from now", ErrBadTimestamp, HeaderTimestamp, skew)
	}
	want := mac(key, id, ts, body)
	for sig := range strings.FieldsSeq(sigs) {
		b64, ok := strings.CutPrefix(sig, "v1,")
		if !ok {
			continue // another scheme, such as v1a
		}
		got, err := base64.StdEncoding.DecodeString(b64)
		if err == nil && hmac.Equal(got, want) {
			return nil
		}
	}
	return fmt.Errorf("%w: no v1 signature matches", ErrBadSignature)
}
