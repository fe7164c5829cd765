package memory

import (
	"encoding/json"
	"testing"
	"unicode/utf8"
)

// Any answer a classifier gives is read without panic: a verdict with a
// short, valid reason, and an unreadable answer flags.
func FuzzReviewVerdict(f *testing.F) {
	f.Add(`{"instructions":false,"reason":"fine"}`)
	f.Add(`{"instructions":true}`)
	f.Add(`"{\"instructions\": true, \"reason\": \"x\"}"`)
	f.Add(`null`)
	f.Add("\xff")
	f.Fuzz(func(t *testing.T, out string) {
		flagged, reason := Verdict(json.RawMessage(out))
		if !utf8.ValidString(reason) || len(reason) > 600 {
			t.Fatalf("reason %q", reason)
		}
		if flagged && reason == "" {
			t.Fatal("a flag without a reason")
		}
		var v struct {
			Instructions *bool `json:"instructions"`
		}
		if json.Unmarshal([]byte(out), &v) == nil && v.Instructions != nil && *v.Instructions != flagged {
			t.Fatalf("the verdict %v was read as %v", *v.Instructions, flagged)
		}
	})
}
