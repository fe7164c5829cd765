package tasktemplate

import (
	"bytes"
	"fmt"
	"io"
	"os"
)

// MaxGoalBytes bounds a task's goal, and so a heartbeat's checklist file.
const MaxGoalBytes = 64 << 10

// ReadPromptFile reads a heartbeat's checklist file (its prompt_file),
// bounded like a goal; an empty file is an error.
func ReadPromptFile(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxGoalBytes+1))
	switch {
	case err != nil:
		return "", err
	case len(b) > MaxGoalBytes:
		return "", fmt.Errorf("%s is larger than %d bytes", path, MaxGoalBytes)
	case len(bytes.TrimSpace(b)) == 0:
		return "", fmt.Errorf("%s is empty", path)
	}
	return string(b), nil
}
