package dashboard

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"io"
	"strings"
	"sync"
	"time"
)

// sessionCookie starts the name of the session cookie. A daemon's cookie
// is named sessionCookie, "_" and a short hash of its data directory and
// token (see cookieName): browsers send a host's cookies to every port,
// so two daemons on one host must not share a name, or each login would
// overwrite the other's.
const sessionCookie = "errand_session"

// maxRevoked bounds the logouts remembered until their sessions expire;
// past it, every session ends at once (see revoke).
const maxRevoked = 10_000

// sessions issues and checks session cookies and their CSRF tokens.
//
// A session is a signed cookie: its expiry and a random nonce, and their
// HMAC under a key derived from the API token (a new token ends every
// session) and, in a daemon, a secret drawn when it starts (see
// forDaemon). Logging out revokes the session: its nonce is remembered,
// in memory, until the session would have expired, and a cookie bearing
// it is refused however well signed. A restart forgets those revocations,
// and so it ends every session: the new secret signs differently, and no
// revoked cookie can come back.
type sessions struct {
	// name is the cookie's name.
	name string
	ttl  time.Duration
	now  func() time.Time
	// random gives the nonces: crypto/rand, or a fixed source in tests.
	random io.Reader

	// base is the key derived from the token alone.
	base []byte

	mu  sync.Mutex
	key []byte
	// revoked holds the nonces of the sessions logged out, until they
	// would have expired; pruned once it doubles, or is full.
	revoked   map[string]time.Time
	pruneSize int
}

func newSessions(token string, ttl time.Duration, now func() time.Time) *sessions {
	mac := hmac.New(sha256.New, []byte(token))
	mac.Write([]byte("errand dashboard session v1"))
	base := mac.Sum(nil)
	return &sessions{
		name: cookieName(base, ""), ttl: ttl, now: now, random: rand.Reader,
		base: base, key: base, revoked: map[string]time.Time{}, pruneSize: 64,
	}
}

// forDaemon names the cookie after the daemon's data directory and token,
// and signs with a secret of this start, so that a restart ends every
// session (see sessions). It returns s.
func (s *sessions) forDaemon(home string) *sessions {
	s.name = cookieName(s.base, home)
	s.rotate()
	return s
}

// cookieName is sessionCookie, "_" and 12 hex digits of a hash of the
// token's key and home: the same across restarts, apart between daemons.
// It tells nothing of the token.
func cookieName(base []byte, home string) string {
	h := sha256.New()
	h.Write([]byte("errand dashboard cookie name\x00"))
	h.Write(base)
	h.Write([]byte{0})
	h.Write([]byte(home))
	return sessionCookie + "_" + hex.EncodeToString(h.Sum(nil))[:12]
}

// rotate draws a new secret: every session issued before ends.
func (s *sessions) rotate() {
	secret := make([]byte, 32)
	_, _ = io.ReadFull(rand.Reader, secret) // crypto/rand never fails
	mac := hmac.New(sha256.New, s.base)
	mac.Write([]byte("errand dashboard session start\x00"))
	mac.Write(secret)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.key = mac.Sum(nil)
	clear(s.revoked)
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

// check verifies a cookie value: its signature, its expiry, then that it
// was not logged out.
func (s *sessions) check(value string) (session, bool) {
	p, sig, ok := strings.Cut(value, ".")
	if !ok {
		return session{}, false
	}
	enc := base64.RawURLEncoding
	payload, err1 := enc.DecodeString(p)
	mac, err2 := enc.DecodeString(sig)
	// The decoder skips line breaks and unused trailing bits: only the
	// spelling issue wrote is accepted, not another that decodes the same.
	if err1 != nil || err2 != nil || enc.EncodeToString(payload) != p || enc.EncodeToString(mac) != sig ||
		len(payload) != 8+16 || !hmac.Equal(mac, s.sign("session", payload)) {
		return session{}, false
	}
	sess := session{expires: time.Unix(int64(binary.BigEndian.Uint64(payload)), 0), nonce: payload[8:]}
	if !s.now().Before(sess.expires) {
		return session{}, false
	}
	s.mu.Lock()
	_, revoked := s.revoked[string(sess.nonce)]
	s.mu.Unlock()
	if revoked {
		return session{}, false
	}
	return sess, true
}

// revoke ends sess before its expiry. Past maxRevoked sessions logged out
// and not expired, it ends every session instead (rotate): the memory a
// token holder can make the dashboard keep stays bounded.
func (s *sessions) revoke(sess session) {
	now := s.now()
	s.mu.Lock()
	if len(s.revoked) >= min(s.pruneSize, maxRevoked) {
		for nonce, expires := range s.revoked {
			if !now.Before(expires) {
				delete(s.revoked, nonce)
			}
		}
		s.pruneSize = max(64, 2*len(s.revoked))
	}
	full := len(s.revoked) >= maxRevoked
	if !full {
		s.revoked[string(sess.nonce)] = sess.expires
	}
	s.mu.Unlock()
	if full {
		s.rotate()
	}
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
	s.mu.Lock()
	key := s.key
	s.mu.Unlock()
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(purpose))
	mac.Write([]byte{0})
	mac.Write(payload)
	return mac.Sum(nil)
}
