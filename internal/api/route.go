package api

import (
	"encoding/json"

	"github.com/errandhq/errand/internal/tasktemplate"
	"github.com/errandhq/errand/store"
)

// The task shapes a schedule or a chain stores live in internal/tasktemplate,
// which the engine uses without the HTTP types; here they are wire shapes
// like the rest.
type (
	// Task is a task as the API returns it. Absent values are null.
	Task = tasktemplate.Task
	// CreateTask is the body of POST /api/tasks and of the WebSocket's
	// submit_task: the writable subset of Task. Unknown fields are refused.
	CreateTask = tasktemplate.CreateTask
	// Route is a task's result route as the wire writes it.
	Route = tasktemplate.Route
)

// FromTask is the wire shape of a stored task.
func FromTask(t *store.Task) *Task { return tasktemplate.FromTask(t) }

// PlanOf reads the plan an agent keeps in its checkpoint (TaskState.plan).
func PlanOf(checkpoint json.RawMessage) json.RawMessage { return tasktemplate.PlanOf(checkpoint) }

// RouteFromOptions is the route of a stored task.
func RouteFromOptions(o *store.Options) *Route { return tasktemplate.RouteFromOptions(o) }
