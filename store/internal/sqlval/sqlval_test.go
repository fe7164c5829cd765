package sqlval

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/store"
)

func TestStatusList(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		in   []store.Status
		want string
	}{
		{nil, ""},
		{[]store.Status{store.StatusPending}, "'pending'"},
		{[]store.Status{store.StatusPending, store.StatusRetryScheduled}, "'pending', 'retry_scheduled'"},
	} {
		require.Equal(t, c.want, StatusList(c.in))
	}
}

func TestJSONOr(t *testing.T) {
	t.Parallel()
	require.Equal(t, "{}", JSONOr(nil, "{}"))
	require.Equal(t, "{}", JSONOr(json.RawMessage{}, "{}"))
	require.Equal(t, `{"a":1}`, JSONOr(json.RawMessage(`{"a":1}`), "{}"))
}

func TestMarshalList(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		in   []string
		want string
	}{
		{nil, "[]"},
		{[]string{}, "[]"},
		{[]string{"a", `b"c`}, `["a","b\"c"]`},
	} {
		require.Equal(t, c.want, MarshalList(c.in))
	}
}
