package crashpoint

import (
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	for in, want := range map[string]Armed{
		"claim.in_tx":             {Claim, 1},
		"task_finish.committed#7": {TaskFinishCommitted, 7},
		" recover.in_tx#1 ":       {Recover, 1},
	} {
		got, err := Parse(in)
		if err != nil || got != want {
			t.Errorf("Parse(%q) = %v, %v; want %v", in, got, err, want)
		}
		if again, err := Parse(got.String()); err != nil || again != got {
			t.Errorf("Parse(%q) = %v, %v; want %v", got.String(), again, err, got)
		}
	}
	for in, want := range map[string]string{
		"claim":           `unknown crash point "claim"`,
		"":                `unknown crash point ""`,
		"claim.in_tx#0":   "whole number ≥ 1",
		"claim.in_tx#two": "whole number ≥ 1",
		"claim.in_tx#":    "whole number ≥ 1",
	} {
		if _, err := Parse(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%q) error = %v; want one saying %q", in, err, want)
		}
	}
}

func TestNamesAreDistinct(t *testing.T) {
	seen := map[Name]bool{}
	for _, n := range All {
		if seen[n] {
			t.Errorf("%s listed twice", n)
		}
		seen[n] = true
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"claim.in_tx", "task_finish.committed#3", "x#", "#", "recover.in_tx#99999999999999999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		a, err := Parse(v)
		if err != nil {
			return
		}
		if a.At < 1 {
			t.Fatalf("Parse(%q) = %v: hit below 1", v, a)
		}
		if again, err := Parse(a.String()); err != nil || again != a {
			t.Fatalf("Parse(%q) = %v; its String %q parses to %v, %v", v, a, a.String(), again, err)
		}
	})
}
