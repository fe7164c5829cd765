package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"sync"
	"time"
)

// readLedger reads every line of the ledger.
//
// A step killed while writing its line can leave the front of it with no
// newline: Linux stops a write between pages once its writer has a fatal
// signal. The next run's line then follows the torn front on the same
// line. A torn run never returned its output, so errand rightly ran its
// step again: the front is skipped and the record after it kept.
func readLedger(path string) ([]Run, error) {
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	lines := bytes.Split(b, []byte("\n"))
	var runs []Run
	for i, line := range lines {
		if len(line) == 0 {
			continue
		}
		var r Run
		err := json.Unmarshal(line, &r)
		if err != nil {
			if at := bytes.LastIndex(line, []byte(`{"key":`)); at > 0 {
				err = json.Unmarshal(line[at:], &r)
			} else if i == len(lines)-1 {
				continue // torn at the end of the file
			}
		}
		if err != nil {
			return nil, fmt.Errorf("ledger line %d: %w", i+1, err)
		}
		runs = append(runs, r)
	}
	return runs, nil
}

// countLines counts the lines of the ledger, reading only what was added
// since the last call.
type lineCounter struct {
	path string
	off  int64
	n    int
}

func (c *lineCounter) count() int {
	f, err := os.Open(c.path)
	if err != nil {
		return c.n
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	for {
		k, err := f.ReadAt(buf, c.off)
		c.n += bytes.Count(buf[:k], []byte("\n"))
		c.off += int64(k)
		if err != nil || k == 0 {
			return c.n
		}
	}
}

// exportLine is one line of errand export.
type exportLine struct {
	Kind string          `json:"kind"`
	Data json.RawMessage `json:"data"`
}

type exportStep struct {
	TaskID         string          `json:"task_id"`
	StepNo         int             `json:"step_no"`
	Status         string          `json:"status"`
	IdempotencyKey string          `json:"idempotency_key"`
	Output         json.RawMessage `json:"output"`
	UpdatedAt      time.Time       `json:"updated_at"`
}

type exportEvent struct {
	ID     int64  `json:"id"`
	Type   string `json:"type"`
	TaskID string `json:"task_id"`
	Data   struct {
		IdempotencyKey string `json:"idempotency_key"`
		Status         string `json:"status"`
	} `json:"data"`
}

// export runs errand export on home into file and counts its lines by kind.
func export(ctx context.Context, bin, home, file string) (map[string]int, error) {
	cmd := exec.CommandContext(ctx, bin, "export", "-o", file)
	cmd.Env = append(os.Environ(), "ERRAND_HOME="+home)
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("errand export (ERRAND_HOME=%s): %v: %s", home, err, out)
	}
	counts := map[string]int{}
	err := eachExportLine(file, func(l *exportLine) error { counts[l.Kind]++; return nil })
	return counts, err
}

func eachExportLine(file string, fn func(*exportLine) error) error {
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var l exportLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			return fmt.Errorf("%s: %w", file, err)
		}
		if err := fn(&l); err != nil {
			return err
		}
	}
	return sc.Err()
}

// roundTrip imports the export into a fresh ERRAND_HOME and exports that
// again: the second export must hold what the first did, line for line.
func roundTrip(ctx context.Context, bin, dir, file string, counts map[string]int) error {
	home := filepath.Join(dir, "import-home")
	if err := os.MkdirAll(home, 0o700); err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, bin, "import", file)
	cmd.Env = append(os.Environ(), "ERRAND_HOME="+home)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("errand import into a fresh ERRAND_HOME: %v: %s", err, out)
	}
	again := filepath.Join(dir, "export-again.jsonl")
	counts2, err := export(ctx, bin, home, again)
	if err != nil {
		return err
	}
	for k, n := range counts {
		if counts2[k] != n {
			return fmt.Errorf("export round trip: %d %s lines exported, %d after import (%s, %s)", n, k, counts2[k], file, again)
		}
	}
	a, err := sortedLines(file)
	if err != nil {
		return err
	}
	b, err := sortedLines(again)
	if err != nil {
		return err
	}
	for i := range a {
		if a[i] != b[i] {
			return fmt.Errorf("export round trip: a line changed:\n  before: %.300s\n  after:  %.300s", a[i], b[i])
		}
	}
	return nil
}

func sortedLines(file string) ([]string, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var ls []string
	for _, l := range bytes.Split(b, []byte("\n")) {
		if len(l) > 0 {
			ls = append(ls, string(l))
		}
	}
	sort.Strings(ls)
	return ls, nil
}

// gather reads what errand holds (its API, and its export for the journal
// and the times steps were recorded) and the ledger into the evidence.
func gather(ctx context.Context, c *client, exportFile, ledger string, ev *Evidence) ([]string, error) {
	var problems []string
	tasks, err := c.tasks(ctx)
	if err != nil {
		return nil, fmt.Errorf("list tasks: %w", err)
	}
	for _, t := range tasks {
		ev.Tasks = append(ev.Tasks, TaskRecord{ID: t.ID, SoakKey: t.soakKey(), Status: t.Status})
	}
	recorded := map[string]time.Time{}
	exported := map[string]string{}
	err = eachExportLine(exportFile, func(l *exportLine) error {
		switch l.Kind {
		case "step":
			var s exportStep
			if err := json.Unmarshal(l.Data, &s); err != nil {
				return err
			}
			recorded[s.IdempotencyKey] = s.UpdatedAt
			exported[s.IdempotencyKey] = s.Status
		case "event":
			var e exportEvent
			if err := json.Unmarshal(l.Data, &e); err != nil {
				return err
			}
			ev.Journal = append(ev.Journal, Event{ID: e.ID, Type: e.Type, Task: e.TaskID,
				StepKey: e.Data.IdempotencyKey, StepStatus: e.Data.Status})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	sort.Slice(ev.Journal, func(i, j int) bool { return ev.Journal[i].ID < ev.Journal[j].ID })

	// Each task's steps and its own stream, a few at a time.
	ev.Streams = map[string][]int64{}
	var mu sync.Mutex
	var firstErr error
	sem := make(chan struct{}, 4)
	var wg sync.WaitGroup
	for _, t := range tasks {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			steps, err := c.steps(ctx, t.ID)
			var ids []int64
			if err == nil {
				ids, err = c.streamIDs(ctx, t.ID)
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if firstErr == nil {
					firstErr = fmt.Errorf("task %s: %w", t.ID, err)
				}
				return
			}
			ev.Streams[t.ID] = ids
			for _, s := range steps {
				// The step's record holds the whole stdout document.
				var out struct {
					Output stepOutput `json:"output"`
				}
				_ = json.Unmarshal(s.Output, &out)
				at, ok := recorded[s.IdempotencyKey]
				if !ok {
					problems = append(problems, fmt.Sprintf("export: step %s (%s over the API) is not in the export", s.IdempotencyKey, s.Status))
				} else if exported[s.IdempotencyKey] != s.Status {
					problems = append(problems, fmt.Sprintf("export: step %s is %s in the export, %s over the API", s.IdempotencyKey, exported[s.IdempotencyKey], s.Status))
				}
				ev.Records = append(ev.Records, StepRecord{Task: t.ID, No: s.StepNo, Key: s.IdempotencyKey,
					Status: s.Status, RunID: out.Output.Run, RecordedAt: at.UnixNano()})
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return nil, firstErr
	}
	ev.Ledger, err = readLedger(ledger)
	return problems, err
}
