package dashboard

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"io"
	"strings"
	"time"
)

// sessionCookie holds a signed session: the dashboard keeps no session
// state, and the key is derived from the API token, so a new token ends
// every session.
const sessionCookie = "errand_session"

// sessions issues and checks session cookies and their CSRF tokens.
type sessions struct {
	key []byte
	ttl time.Duration
	now func() time.Time
	// random gives the nonces: crypto/rand, or a fixed source in tests.
	random io.Reader
}

func newSessions(token string, ttl time.Duration, now func() time.Time) *sessions {
	mac := hmac.New(sha256.New, []byte(token))
	mac.Write([]byte("errand dashboard session v1"))
	return &sessions{key: mac.Sum(nil), ttl: ttl, now: now, random: rand.Reader}
}

// session is a checked session cookie.
type session struct {
	nonce   []byte
	expires time.Time
}

// issue returns a new session and its cookie value: the expiry and a
// random nonce, then their HMAC.
func (s *sessions) issue() (session, string) {
	sess := session{nonce: make([]byte, 16), expires: s.now().Add(s.ttl).Truncate(time.Second)}
	_, _ = io.ReadFull(s.random, sess.nonce) // crypto/rand never fails
	payload := binary.BigEndian.AppendUint64(nil, uint64(sess.expires.Unix()))
	payload = append(payload, sess.nonce...)
	enc := base64.RawURLEncoding
	return sess, enc.EncodeToString(payload) + "." + enc.EncodeToString(s.sign("session", payload))
}

// check verifies a cookie value: its signature, then its expiry.
func (s *sessions) check(value string) (session, bool) {
	p, sig, ok := strings.Cut(value, ".")
	if !ok {
		return session{}, false
	}
	enc := base64.RawURLEncoding
	payload, err1 := enc.DecodeString(p)
	mac, err2 := enc.DecodeString(sig)
	if err1 != nil || err2 != nil || len(payload) != 8+16 || !hmac.Equal(mac, s.sign("session", payload)) {
		return session{}, false
	}
	sess := session{expires: time.Unix(int64(binary.BigEndian.Uint64(payload)), 0), nonce: payload[8:]}
	if !s.now().Before(sess.expires) {
		return session{}, false
	}
	return sess, true
}

// csrf is the token every state-changing request of the session must
// carry: a cross-site page can send the cookie but cannot read the token.
func (s *sessions) csrf(sess session) string {
	return base64.RawURLEncoding.EncodeToString(s.sign("csrf", sess.nonce))
}

func (s *sessions) checkCSRF(sess session, token string) bool {
	return hmac.Equal([]byte(token), []byte(s.csrf(sess)))
}

func (s *sessions) sign(purpose string, payload []byte) []byte {
	mac := hmac.New(sha256.New, s.key)
	mac.Write([]byte(purpose))
	mac.Write([]byte{0})
	mac.Write(payload)
	return mac.Sum(nil)
}
