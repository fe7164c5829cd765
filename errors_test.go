package errand

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/internal/id"
	"github.com/errandhq/errand/internal/validation"
	"github.com/errandhq/errand/store"
)

// The engine's validation errors reach callers as *ValidationError, with
// their message and field, whether returned as they are or wrapped, and
// still match ErrInvalid; other errors pass unchanged.
func TestEngineErrorTranslatesValidation(t *testing.T) {
	t.Parallel()
	inner := &validation.Error{Field: "agent", Message: "unknown", Unprocessable: true}
	for _, tt := range []struct {
		name    string
		err     error
		wantMsg string
	}{
		{name: "direct", err: inner, wantMsg: "errand: invalid agent: unknown"},
		{name: "wrapped", err: fmt.Errorf("create schedule: %w", inner), wantMsg: "create schedule: errand: invalid agent: unknown"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := engineError(tt.err)
			require.EqualError(t, err, tt.wantMsg)
			var v *ValidationError
			require.ErrorAs(t, err, &v)
			require.Equal(t, ValidationError{Field: "agent", Message: "unknown", Unprocessable: true}, *v)
			require.ErrorIs(t, err, ErrInvalid)
		})
	}
	require.NoError(t, engineError(nil))
	require.Same(t, store.ErrNotFound, engineError(store.ErrNotFound))
	wrapped := fmt.Errorf("get: %w", store.ErrNotFound)
	require.Same(t, wrapped, engineError(wrapped))
}

// A bad field of a request is a *ValidationError of this package, and
// the engine's sentinels match across the boundary.
func TestClientErrorsMatch(t *testing.T) {
	t.Parallel()
	c := openTest(t, nil)
	_, err := c.Submit(t.Context(), &SubmitParams{Goal: "x", Priority: Ptr(12)})
	var v *ValidationError
	require.ErrorAs(t, err, &v)
	require.Equal(t, "priority", v.Field)
	require.ErrorIs(t, err, ErrInvalid)
	require.ErrorIs(t, err, validation.ErrInvalid)

	_, err = c.ListMemories(t.Context(), &MemoryListParams{Limit: -1})
	require.ErrorAs(t, err, &v)
	require.Equal(t, "limit", v.Field)

	_, err = c.Get(t.Context(), "tsk_nope")
	require.True(t, errors.Is(err, ErrNotFound))
}

// Open refuses an empty SQLite file with an error the caller can match
// without naming the driver.
func TestOpenRefusesEmptyFile(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "empty.db")
	require.NoError(t, os.WriteFile(path, nil, 0o600))
	_, err := Open(t.Context(), path, nil)
	require.ErrorIs(t, err, ErrStoreEmptyFile)
}

// An imported memory the API could not have written is refused with the
// *ValidationError that names what is wrong with it.
func TestImportMemoryRefusalIsValidationError(t *testing.T) {
	t.Parallel()
	c := openTest(t, nil)
	line := fmt.Sprintf(`{"kind":"memory","data":{"id":%q,"text":"","source":"user","estimated_tokens":1,"created_at":"2026-01-02T03:04:05Z"}}`, id.New(id.Memory))
	_, err := c.Import(t.Context(), strings.NewReader(line+"\n"))
	var v *ValidationError
	require.ErrorAs(t, err, &v)
	require.ErrorIs(t, err, ErrInvalid)
}
