package agui

import (
	"encoding/json"

	"github.com/errandhq/errand/internal/api"
	"github.com/errandhq/errand/store"
)

// State is the agent state errand shows a frontend: where the task
// stands, how far it has come and its plan, as the agent last declared it
// (update_plan).
type State struct {
	TaskID   string          `json:"task_id"`
	Status   store.Status    `json:"status"`
	Progress *store.Progress `json:"progress,omitempty"`
	Plan     json.RawMessage `json:"plan,omitempty"`
}

// StateOf is t's state as a STATE_SNAPSHOT carries it.
func StateOf(t *store.Task) json.RawMessage {
	b, err := json.Marshal(State{TaskID: t.ID, Status: t.Status, Progress: t.Progress, Plan: api.PlanOf(t.Checkpoint)})
	if err != nil {
		return nil // a checkpoint's plan is valid JSON; nothing else can fail
	}
	return b
}
