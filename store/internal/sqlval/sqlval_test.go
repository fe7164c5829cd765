package sqlval

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

type status string

func TestStatusList(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		in   []status
		want string
	}{
		{nil, ""},
		{[]status{"pending"}, "'pending'"},
		{[]status{"pending", "retry_scheduled"}, "'pending', 'retry_scheduled'"},
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
