package errand

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/store"
)

// A Go agent remembers through its TaskRun; a memory-route task leaves
// its result; a later task recalls both; purging by task removes exactly
// that task's memories.
func TestMemoriesThroughTheLibrary(t *testing.T) {
	t.Parallel()
	c := openTest(t, nil)
	ctx := t.Context()
	recalled := make(chan *Recalled, 1)
	require.NoError(t, c.RegisterAgent("default", AgentFunc(func(ctx context.Context, run *TaskRun) (Result, error) {
		switch run.Task().Goal {
		case "note":
			_, err := run.Remember(ctx, &MemorySpec{Text: "Backups run at 02:00 UTC", Tags: []string{"ops"},
				IdempotencyKey: run.Task().ID + ":note"})
			return Result{Output: "noted"}, err
		case "route":
			return Result{Output: "Restores take about 40 minutes"}, nil
		}
		r, err := run.Recall(ctx, "backups restores", 0)
		recalled <- r
		return Result{Output: "read"}, err
	})))
	e, err := NewEngine(c, &EngineConfig{Workers: 1})
	require.NoError(t, err)
	require.NoError(t, e.Start(ctx))
	t.Cleanup(func() { require.NoError(t, e.Stop(context.Background())) })

	note, err := c.Submit(ctx, &SubmitParams{Goal: "note"})
	require.NoError(t, err)
	route, err := c.Submit(ctx, &SubmitParams{Goal: "route", ResultRoute: store.ResultRouteMemory})
	require.NoError(t, err)
	require.Equal(t, StatusCompleted, waitEnd(t, c, note.ID).Status)
	require.Equal(t, StatusCompleted, waitEnd(t, c, route.ID).Status)

	reader, err := c.Submit(ctx, &SubmitParams{Goal: "read"})
	require.NoError(t, err)
	require.Equal(t, StatusCompleted, waitEnd(t, c, reader.ID).Status)
	r := <-recalled
	require.Len(t, r.Memories, 2)
	byTask := map[string]string{}
	for _, m := range r.Memories {
		byTask[m.TaskID] = m.Text
	}
	require.Equal(t, map[string]string{note.ID: "Backups run at 02:00 UTC", route.ID: "Restores take about 40 minutes"}, byTask)

	n, err := c.PurgeMemories(ctx, &MemoryPurgeParams{TaskID: route.ID})
	require.NoError(t, err)
	require.Equal(t, int64(1), n)
	page, err := c.ListMemories(ctx, nil)
	require.NoError(t, err)
	require.Len(t, page.Memories, 1)
	require.Equal(t, note.ID, page.Memories[0].TaskID)
}

// Memories go through export and import with their ids, provenance, times
// and estimates, and are searchable after.
func TestMemoryExportImportRoundTrip(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	src := openTest(t, nil)
	task, err := src.Submit(ctx, &SubmitParams{Goal: "owner", Agent: "nobody"})
	require.NoError(t, err)
	first, err := src.Remember(ctx, &RememberParams{Text: "The VPN needs <2FA> & a token", Tags: []string{"it"},
		TaskID: task.ID, Agent: "helpdesk", Source: store.SourceEvent, IdempotencyKey: "k1"})
	require.NoError(t, err)
	second, err := src.Remember(ctx, &RememberParams{Text: "Printers are on floor 3"})
	require.NoError(t, err)

	dump := exportBytes(t, src, time.Time{})
	var memories []json.RawMessage
	sc := bufio.NewScanner(bytes.NewReader(dump))
	var last string
	for sc.Scan() {
		var line struct {
			Kind string          `json:"kind"`
			Data json.RawMessage `json:"data"`
		}
		require.NoError(t, json.Unmarshal(sc.Bytes(), &line))
		if line.Kind == ExportKindMemory {
			memories = append(memories, line.Data)
		}
		last = line.Kind
	}
	require.Len(t, memories, 2)
	require.Equal(t, ExportKindMemory, last, "memories come last")
	require.Contains(t, string(memories[0]), `"text":"The VPN needs <2FA> & a token"`)

	dst := openTest(t, nil)
	stats, err := dst.Import(ctx, bytes.NewReader(dump))
	require.NoError(t, err)
	require.Equal(t, 2, stats.Memories)
	for _, want := range []*Memory{first, second} {
		got, err := dst.Memory(ctx, want.ID)
		require.NoError(t, err)
		// Confidence is worked out as each read happens.
		require.InDelta(t, want.Confidence, got.Confidence, 1e-6)
		got.Confidence = want.Confidence
		require.Equal(t, want, got)
	}
	found, err := dst.ListMemories(ctx, &MemoryListParams{Query: "vpn"})
	require.NoError(t, err)
	require.Len(t, found.Memories, 1)
	require.Equal(t, first.ID, found.Memories[0].ID)
	require.Equal(t, dump, exportBytes(t, dst, time.Time{}), "the import exports as it was")
}

func TestImportRefusesBadMemory(t *testing.T) {
	t.Parallel()
	good := `{"id":"mem_01JH0000000000000000000000","text":"t","tags":[],"task_id":"","agent":"","source":"user","estimated_tokens":1,"created_at":"2026-01-02T03:04:05Z"}`
	for _, tc := range []struct{ name, line, want string }{
		{"bad id", strings.Replace(good, "mem_01JH", "mem_01jh", 1), "not a memory id"},
		{"empty text", strings.Replace(good, `"text":"t"`, `"text":""`, 1), "text"},
		{"bad source", strings.Replace(good, `"source":"user"`, `"source":"robot"`, 1), "unknown source"},
		{"bad task", strings.Replace(good, `"task_id":""`, `"task_id":"x"`, 1), "not a task id"},
		{"no tokens", strings.Replace(good, `"estimated_tokens":1`, `"estimated_tokens":0`, 1), "estimated_tokens"},
		{"bad tag", strings.Replace(good, `"tags":[]`, `"tags":["a\u0000b"]`, 1), "tags"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := openTest(t, nil)
			_, err := c.Import(t.Context(), strings.NewReader(`{"kind":"memory","data":`+tc.line+"}\n"))
			require.ErrorContains(t, err, tc.want)
		})
	}
	c := openTest(t, nil)
	stats, err := c.Import(t.Context(), strings.NewReader(`{"kind":"memory","data":`+good+"}\n"))
	require.NoError(t, err)
	require.Equal(t, 1, stats.Memories)
}

// The config file's memory_limits apply when Config sets none.
func TestMemoryLimitsFromConfigFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "errand.yaml")
	require.NoError(t, os.WriteFile(file, []byte("memory_limits:\n  user: {max_entries: 1}\n"), 0o600))
	c := openTest(t, &Config{ConfigFile: file})
	for _, text := range []string{"apples are red", "apples are green"} {
		_, err := c.Remember(t.Context(), &RememberParams{Text: text})
		require.NoError(t, err)
	}
	res, err := c.Recall(t.Context(), &RecallParams{Query: "apples"})
	require.NoError(t, err)
	require.Len(t, res.Memories, 1)
	require.Equal(t, MemoryLimit{MaxTokens: 4000, MaxEntries: 1}, res.Limit)

	own := DefaultMemoryLimits()
	c = openTest(t, &Config{ConfigFile: file, MemoryLimits: &own})
	for _, text := range []string{"pears", "pears again"} {
		_, err := c.Remember(t.Context(), &RememberParams{Text: text})
		require.NoError(t, err)
	}
	res, err = c.Recall(t.Context(), &RecallParams{Query: "pears"})
	require.NoError(t, err)
	require.Len(t, res.Memories, 2, "the Config's own limits win")
}
