package store

import (
	"errors"
	"time"
)

// Dependency kinds. Only blocks holds a task back.
const (
	DependencyBlocks         = "blocks"
	DependencyRelated        = "related"
	DependencyDiscoveredFrom = "discovered_from"
)

// ErrCycle is returned for a dependency that would close a cycle.
var ErrCycle = errors.New("errand: dependency cycle")

// Dependency is one edge of the task graph: TaskID depends on DependsOnID.
type Dependency struct {
	TaskID      string `json:"task_id"`
	DependsOnID string `json:"depends_on"`
	Kind        string `json:"kind"`
}

// TaskDependencyAddParams adds one edge.
type TaskDependencyAddParams struct {
	TaskID      string
	DependsOnID string
	Kind        string // default blocks
	Actor       string
	Now         *time.Time
}
