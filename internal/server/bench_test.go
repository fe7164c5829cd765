package server

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand"
)

// BenchmarkCreateTaskHTTP measures POST /api/tasks over loopback HTTP:
// auth, strict decoding, validation, the durable insert, the response.
func BenchmarkCreateTaskHTTP(b *testing.B) {
	c, err := errand.Open(b.Context(), filepath.Join(b.TempDir(), "errand.db"), nil)
	require.NoError(b, err)
	defer c.Close()
	hs := httptest.NewServer(New(Config{Client: c, Token: testToken}).Handler())
	defer hs.Close()
	client := hs.Client()
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		req, _ := http.NewRequestWithContext(context.Background(), "POST", hs.URL+"/api/tasks",
			strings.NewReader(fmt.Sprintf(`{"goal":"benchmark task %d","tags":["bench"],"input":{"n":%d}}`, i, i)))
		req.Header.Set("Authorization", "Bearer "+testToken)
		res, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusCreated {
			b.Fatalf("status %d", res.StatusCode)
		}
	}
}

// BenchmarkGetTaskHTTP measures GET /api/tasks/{id} over loopback HTTP.
func BenchmarkGetTaskHTTP(b *testing.B) {
	c, err := errand.Open(b.Context(), filepath.Join(b.TempDir(), "errand.db"), nil)
	require.NoError(b, err)
	defer c.Close()
	task, err := c.Submit(b.Context(), &errand.SubmitParams{Goal: "read me"})
	require.NoError(b, err)
	hs := httptest.NewServer(New(Config{Client: c, Token: testToken}).Handler())
	defer hs.Close()
	client := hs.Client()
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		req, _ := http.NewRequestWithContext(context.Background(), "GET", hs.URL+"/api/tasks/"+task.ID, nil)
		req.Header.Set("Authorization", "Bearer "+testToken)
		res, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			b.Fatalf("status %d", res.StatusCode)
		}
	}
}
