package a2a

import (
	"encoding/json"
	"time"

	"github.com/errandhq/errand/internal/a2a/wire"
)

// The A2A v1.0 wire shapes both sides share live in package wire.
type (
	v1Part           = wire.Part
	v1Message        = wire.Message
	v1TaskStatus     = wire.TaskStatus
	v1Artifact       = wire.Artifact
	v1Task           = wire.Task
	v1StatusUpdate   = wire.StatusUpdate
	v1ArtifactUpdate = wire.ArtifactUpdate
	v1StreamResponse = wire.StreamResponse
	v1Authentication = wire.Authentication
	v1PushConfig     = wire.PushConfig
	v1SendParams     = wire.SendParams
	v1TaskParams     = wire.TaskParams
)

type v1ListParams struct {
	Tenant               string          `json:"tenant"`
	ContextID            string          `json:"contextId"`
	Status               json.RawMessage `json:"status"`
	PageSize             *int32          `json:"pageSize"`
	PageToken            string          `json:"pageToken"`
	HistoryLength        *int32          `json:"historyLength"`
	StatusTimestampAfter string          `json:"statusTimestampAfter"`
	IncludeArtifacts     bool            `json:"includeArtifacts"`
}

type v1ListResult struct {
	Tasks         []v1Task `json:"tasks"`
	NextPageToken string   `json:"nextPageToken"`
	PageSize      int      `json:"pageSize"`
}

type v1PushList struct {
	Configs       []v1PushConfig `json:"configs"`
	NextPageToken string         `json:"nextPageToken"`
}

var v1States = map[state]string{
	stateSubmitted:     wire.StateSubmitted,
	stateWorking:       wire.StateWorking,
	stateInputRequired: wire.StateInputRequired,
	stateCompleted:     wire.StateCompleted,
	stateFailed:        wire.StateFailed,
	stateCanceled:      wire.StateCanceled,
}

func v1PartsOf(ps []part) []v1Part {
	out := make([]v1Part, len(ps))
	for i, p := range ps {
		if p.isData {
			out[i] = v1Part{Data: p.data, MediaType: "application/json"}
		} else {
			text := p.text
			out[i] = v1Part{Text: &text, MediaType: "text/plain"}
		}
	}
	return out
}

func v1MessageOf(m *message) v1Message {
	r := `"ROLE_USER"`
	if m.role == roleAgent {
		r = `"ROLE_AGENT"`
	}
	return v1Message{MessageID: m.id, ContextID: m.contextID, TaskID: m.taskID, Role: json.RawMessage(r), Parts: v1PartsOf(m.parts)}
}

func v1StatusOf(v *taskView) v1TaskStatus {
	st := v1TaskStatus{State: v1States[v.state], Timestamp: v.timestamp.UTC().Format(time.RFC3339Nano)}
	if v.message != nil {
		m := v1MessageOf(v.message)
		st.Message = &m
	}
	return st
}

func v1ArtifactOf(a artifact) v1Artifact {
	out := v1Artifact{ArtifactID: a.id, Name: a.name, Parts: v1PartsOf(a.parts)}
	if a.warning != "" {
		out.Metadata, _ = json.Marshal(map[string]string{"warning": a.warning})
	}
	if a.metadata != nil {
		out.Metadata = a.metadata
	}
	return out
}

func v1TaskOf(v *taskView) *v1Task {
	t := &v1Task{ID: v.id, ContextID: v.contextID, Status: v1StatusOf(v), Metadata: v.metadata}
	for _, a := range v.artifacts {
		t.Artifacts = append(t.Artifacts, v1ArtifactOf(a))
	}
	for i := range v.history {
		t.History = append(t.History, v1MessageOf(&v.history[i]))
	}
	return t
}

func v1PushConfigOf(c *pushConfig) v1PushConfig {
	out := v1PushConfig{ID: c.ID, TaskID: c.TaskID, URL: c.URL, Token: c.Token}
	if c.AuthScheme != "" {
		out.Authentication = &v1Authentication{Scheme: c.AuthScheme, Credentials: c.AuthCredentials}
	}
	return out
}
