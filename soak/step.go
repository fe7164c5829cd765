package main

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"
)

// The step mode: errand's exec agent runs this program once per step with
// these variables set (the agent's env in errand.yaml).
const (
	envStep   = "ERRAND_SOAK_STEP"   // "1": run one step and exit
	envLedger = "ERRAND_SOAK_LEDGER" // the ledger file, outside errand
	envSteps  = "ERRAND_SOAK_STEPS"  // steps per task: the last one finishes
)

// stepInput is the part of the exec protocol's stdin document a step reads.
type stepInput struct {
	Task struct {
		ID      string `json:"id"`
		Attempt int    `json:"attempt"`
	} `json:"task"`
	Step struct {
		Number         int    `json:"number"`
		IdempotencyKey string `json:"idempotency_key"`
	} `json:"step"`
}

// stepOutput is the step's output: the run whose line it wrote.
type stepOutput struct {
	Run  string `json:"run"`
	Step int    `json:"step"`
}

// isStep reports whether this process was started as a step.
func isStep() bool { return os.Getenv(envStep) == "1" }

// runStep is one step: it reads the stdin document, pays (appends one
// line to the ledger and syncs it), then answers continue, or finish at
// the last step. Any failure exits non-zero, which errand retries.
func runStep(stdin io.Reader, stdout io.Writer) error {
	start := time.Now().UnixNano()
	var in stepInput
	if err := json.NewDecoder(stdin).Decode(&in); err != nil {
		return fmt.Errorf("read stdin: %w", err)
	}
	if in.Step.IdempotencyKey == "" || in.Step.Number < 1 {
		return fmt.Errorf("stdin has no step number or idempotency key")
	}
	steps, err := strconv.Atoi(os.Getenv(envSteps))
	if err != nil || steps < 1 {
		return fmt.Errorf("%s=%q: want a number ≥ 1", envSteps, os.Getenv(envSteps))
	}
	var nonce [8]byte
	if _, err := rand.Read(nonce[:]); err != nil {
		return err
	}
	run := Run{
		Key: in.Step.IdempotencyKey, Task: in.Task.ID, Step: in.Step.Number, Attempt: in.Task.Attempt,
		RunID: hex.EncodeToString(nonce[:]), Start: start, PID: os.Getpid(),
	}
	run.End = time.Now().UnixNano()
	line, err := json.Marshal(run)
	if err != nil {
		return err
	}
	if err := appendLine(os.Getenv(envLedger), append(line, '\n')); err != nil {
		return err
	}
	status := "continue"
	if in.Step.Number >= steps {
		status = "finish"
	}
	return json.NewEncoder(stdout).Encode(map[string]any{
		"status":   status,
		"output":   stepOutput{Run: run.RunID, Step: in.Step.Number},
		"progress": map[string]any{"current": in.Step.Number, "total": steps, "label": "soak"},
	})
}

// appendLine writes line in one write to the end of the file and syncs
// it: once it returns the run has paid, whatever happens to errand.
func appendLine(path string, line []byte) error {
	if path == "" {
		return fmt.Errorf("%s is not set", envLedger)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(line); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// stepMain runs a step and exits.
func stepMain() {
	if err := runStep(os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "soak step:", err)
		os.Exit(1)
	}
	os.Exit(0)
}
