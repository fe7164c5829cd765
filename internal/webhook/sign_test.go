package webhook

import (
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The expected signatures were computed with openssl, not with this
// package:
//
//	printf '%s' "$id.$ts.$body" | openssl dgst -sha256 -mac HMAC -macopt hexkey:$hexkey -binary | base64
//	printf '%s' "$id.$ts.$body" | openssl dgst -sha256 -hmac "$secret" -binary | base64
//
// where $hexkey is the base64 after whsec_, decoded, in hex. The first
// vector is also the example of the Standard Webhooks spec.
func TestSign(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name   string
		secret string
		id     string
		ts     time.Time
		body   string
		want   string
	}{
		{
			name:   "WhsecSecret",
			secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
			id:     "msg_p5jXN8AQM9LWM0D4loKWxJek",
			ts:     time.Unix(1614265330, 0),
			body:   `{"test": 2432232314}`,
			want:   "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=",
		},
		{
			name:   "RawSecret",
			secret: "plain-secret",
			id:     "42",
			ts:     time.Date(2026, 3, 4, 5, 6, 7, 999, time.UTC), // 1772600767; the fraction is dropped
			body:   `{"id":42,"type":"task.completed","task_id":"tsk_1","actor":"system","data":{},"created_at":"2026-03-04T05:06:07Z"}`,
			want:   "v1,WuiblQEfYucJTS26Mgieda6qZQT0sSP0l0DXMAJgxLM=",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			key, err := Key(tt.secret)
			require.NoError(t, err)
			require.Equal(t, tt.want, Sign(key, tt.id, tt.ts, []byte(tt.body)))

			h := http.Header{}
			h.Set(HeaderID, tt.id)
			h.Set(HeaderTimestamp, strconv.FormatInt(tt.ts.Unix(), 10))
			h.Set(HeaderSignature, tt.want)
			require.NoError(t, Verify(key, h, []byte(tt.body), tt.ts.Add(time.Minute), 0))
		})
	}
}

func TestKey(t *testing.T) {
	t.Parallel()

	key, err := Key("whsec_c2VjcmV0")
	require.NoError(t, err)
	require.Equal(t, []byte("secret"), key)

	key, err = Key("not whsec_c2VjcmV0")
	require.NoError(t, err)
	require.Equal(t, []byte("not whsec_c2VjcmV0"), key)

	_, err = Key("whsec_!!")
	require.ErrorContains(t, err, "not valid base64")
	_, err = Key("whsec_")
	require.ErrorContains(t, err, "empty key")
	_, err = Key("")
	require.ErrorContains(t, err, "empty secret")
}

func TestVerify(t *testing.T) {
	t.Parallel()

	key := []byte("k")
	body := []byte(`{"id":7}`)
	ts := time.Unix(1772600767, 0)
	good := Sign(key, "7", ts, body)
	headers := func(id, ts, sig string) http.Header {
		h := http.Header{}
		for k, v := range map[string]string{HeaderID: id, HeaderTimestamp: ts, HeaderSignature: sig} {
			if v != "" {
				h.Set(k, v)
			}
		}
		return h
	}

	tests := []struct {
		name    string
		header  http.Header
		body    []byte
		now     time.Time
		wantErr error
	}{
		{"Valid", headers("7", "1772600767", good), body, ts, nil},
		{"ValidAmongOthers", headers("7", "1772600767", "v1a,xyz v1,AAAA "+good), body, ts.Add(-4 * time.Minute), nil},
		{"TamperedBody", headers("7", "1772600767", good), []byte(`{"id":8}`), ts, ErrBadSignature},
		{"OtherID", headers("8", "1772600767", good), body, ts, ErrBadSignature},
		{"OtherTimestamp", headers("7", "1772600768", good), body, ts, ErrBadSignature},
		{"WrongKey", headers("7", "1772600767", Sign([]byte("other"), "7", ts, body)), body, ts, ErrBadSignature},
		{"NoID", headers("", "1772600767", good), body, ts, ErrBadSignature},
		{"NoTimestamp", headers("7", "", good), body, ts, ErrBadSignature},
		{"NoSignature", headers("7", "1772600767", ""), body, ts, ErrBadSignature},
		{"BadTimestamp", headers("7", "soon", good), body, ts, ErrBadSignature},
		{"TooOld", headers("7", "1772600767", good), body, ts.Add(DefaultTolerance + time.Second), ErrBadTimestamp},
		{"TooNew", headers("7", "1772600767", good), body, ts.Add(-DefaultTolerance - time.Second), ErrBadTimestamp},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := Verify(key, tt.header, tt.body, tt.now, 0)
			if tt.wantErr == nil {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, tt.wantErr)
		})
	}

	t.Run("Tolerance", func(t *testing.T) {
		t.Parallel()
		h := headers("7", "1772600767", good)
		require.NoError(t, Verify(key, h, body, ts.Add(time.Hour), 2*time.Hour))
		require.ErrorIs(t, Verify(key, h, body, ts.Add(time.Minute), time.Second), ErrBadTimestamp)
	})
}
