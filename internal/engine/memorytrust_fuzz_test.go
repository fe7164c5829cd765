package engine

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/errandhq/errand/internal/memory"
	"github.com/errandhq/errand/internal/validation"
	"github.com/errandhq/errand/store/sqlitestore"
)

// Any category and subject a model or a client sends is either refused
// with a validation.Error, writing nothing, or kept as sent.
func FuzzRememberCategoryAndSubject(f *testing.F) {
	f.Add("fact", "billing.api_base_url")
	f.Add("Team-Norm", "")
	f.Add("a_1", "bad \xff")
	f.Add("", "nul\x00")
	st, err := sqlitestore.Open(context.Background(), filepath.Join(f.TempDir(), "errand.db"), nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { st.Close() })
	e, err := New(st, nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, category, subject string) {
		ctx := context.Background()
		before := len(listMemories(t, e, &memory.ListParams{Limit: 1000}))
		m, err := e.Memories().Remember(ctx, &memory.RememberParams{Text: "the office closes at six", Category: category, Subject: subject})
		after := len(listMemories(t, e, &memory.ListParams{Limit: 1000}))
		if err != nil {
			var verr *validation.Error
			if !errors.As(err, &verr) || (verr.Field != "category" && verr.Field != "subject") {
				t.Fatalf("not a validation error naming the field: %v", err)
			}
			if after != before {
				t.Fatal("a refused memory was written")
			}
			return
		}
		if m.Subject != subject || (category != "" && m.Category != category) || after != before+1 {
			t.Fatalf("kept %q/%q as %q/%q", category, subject, m.Category, m.Subject)
		}
		if err := e.Memories().Delete(ctx, m.ID, ""); err != nil {
			t.Fatal(err)
		}
	})
}
