package engine

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/internal/validation"
)

// TestValidateNamesFieldsInFixedOrder: a request wrong in several fields
// always names the same one.
func TestValidateNamesFieldsInFixedOrder(t *testing.T) {
	t.Parallel()
	e, err := New(nil, &Config{})
	require.NoError(t, err)

	for _, tc := range []struct {
		name   string
		params SubmitParams
		field  string
	}{
		{"tools before tools_deny", SubmitParams{Goal: "g", Tools: []string{" "}, ToolsDeny: []string{" "}}, "tools"},
		{"tools_deny alone", SubmitParams{Goal: "g", ToolsDeny: []string{""}}, "tools_deny"},
		{"goal first", SubmitParams{Tools: []string{" "}, Priority: ptr(10)}, "goal"},
		{"priority before tools", SubmitParams{Goal: "g", Tools: []string{" "}, Priority: ptr(10)}, "priority"},
		{"title before lane", SubmitParams{Goal: "g", Title: "\x00", Lane: "\x00"}, "title"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			for range 50 {
				_, err := e.validate(&tc.params)
				var verr *validation.Error
				require.ErrorAs(t, err, &verr)
				require.ErrorIs(t, err, validation.ErrInvalid)
				require.Equal(t, tc.field, verr.Field)
			}
		})
	}
}
