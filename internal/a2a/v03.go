package a2a

import (
	"encoding/json"
	"time"
)

// The A2A v0.3 wire shapes: JSON objects told apart by "kind" (task,
// message, status-update, artifact-update; parts text, data, file), states
// in lower case with hyphens.

type v03File struct {
	Bytes    *string `json:"bytes,omitempty"`
	URI      *string `json:"uri,omitempty"`
	MimeType string  `json:"mimeType,omitempty"`
	Name     string  `json:"name,omitempty"`
}

type v03Part struct {
	Kind     string          `json:"kind"`
	Text     *string         `json:"text,omitempty"`
	Data     json.RawMessage `json:"data,omitempty"`
	File     *v03File        `json:"file,omitempty"`
	Metadata json.RawMessage `json:"metadata,omitempty"`
}

type v03Message struct {
	Kind             string          `json:"kind"`
	MessageID        string          `json:"messageId"`
	ContextID        string          `json:"contextId,omitempty"`
	TaskID           string          `json:"taskId,omitempty"`
	Role             string          `json:"role"`
	Parts            []v03Part       `json:"parts"`
	Metadata         json.RawMessage `json:"metadata,omitempty"`
	Extensions       []string        `json:"extensions,omitempty"`
	ReferenceTaskIDs []string        `json:"referenceTaskIds,omitempty"`
}

type v03TaskStatus struct {
	State     string      `json:"state"`
	Message   *v03Message `json:"message,omitempty"`
	Timestamp string      `json:"timestamp,omitempty"`
}

type v03Artifact struct {
	ArtifactID string          `json:"artifactId"`
	Name       string          `json:"name,omitempty"`
	Parts      []v03Part       `json:"parts"`
	Metadata   json.RawMessage `json:"metadata,omitempty"`
}

type v03Task struct {
	Kind      string          `json:"kind"`
	ID        string          `json:"id"`
	ContextID string          `json:"contextId"`
	Status    v03TaskStatus   `json:"status"`
	Artifacts []v03Artifact   `json:"artifacts,omitempty"`
	History   []v03Message    `json:"history,omitempty"`
	Metadata  json.RawMessage `json:"metadata,omitempty"`
}

type v03StatusUpdate struct {
	Kind      string        `json:"kind"`
	TaskID    string        `json:"taskId"`
	ContextID string        `json:"contextId"`
	Status    v03TaskStatus `json:"status"`
	Final     bool          `json:"final"`
}

type v03ArtifactUpdate struct {
	Kind      string      `json:"kind"`
	TaskID    string      `json:"taskId"`
	ContextID string      `json:"contextId"`
	Artifact  v03Artifact `json:"artifact"`
	Append    bool        `json:"append,omitempty"`
	LastChunk bool        `json:"lastChunk"`
}

type v03Authentication struct {
	Schemes     []string `json:"schemes"`
	Credentials string   `json:"credentials,omitempty"`
}

type v03PushConfig struct {
	ID             string             `json:"id,omitempty"`
	URL            string             `json:"url"`
	Token          string             `json:"token,omitempty"`
	Authentication *v03Authentication `json:"authentication,omitempty"`
}

type v03TaskPushConfig struct {
	TaskID     string         `json:"taskId"`
	PushConfig *v03PushConfig `json:"pushNotificationConfig"`
}

type v03SendParams struct {
	Message       *v03Message `json:"message"`
	Configuration *struct {
		AcceptedOutputModes []string       `json:"acceptedOutputModes"`
		Blocking            *bool          `json:"blocking"`
		HistoryLength       *int32         `json:"historyLength"`
		PushConfig          *v03PushConfig `json:"pushNotificationConfig"`
	} `json:"configuration"`
	Metadata json.RawMessage `json:"metadata"`
}

// v03PushTarget names a push config of a task (get, delete).
type v03PushTarget struct {
	ID           string          `json:"id"`
	Metadata     json.RawMessage `json:"metadata"`
	PushConfigID *string         `json:"pushNotificationConfigId"`
}

var v03States = map[state]string{
	stateSubmitted:     "submitted",
	stateWorking:       "working",
	stateInputRequired: "input-required",
	stateCompleted:     "completed",
	stateFailed:        "failed",
	stateCanceled:      "canceled",
}

func v03PartsOf(ps []part) []v03Part {
	out := make([]v03Part, len(ps))
	for i, p := range ps {
		switch {
		case !p.isData:
			text := p.text
			out[i] = v03Part{Kind: "text", Text: &text}
		case len(p.data) > 0 && p.data[0] == '{':
			out[i] = v03Part{Kind: "data", Data: p.data}
		default:
			// v0.3's data parts hold objects only.
			wrapped, _ := json.Marshal(map[string]json.RawMessage{"value": p.data})
			out[i] = v03Part{Kind: "data", Data: wrapped}
		}
	}
	return out
}

func v03MessageOf(m *message) v03Message {
	r := "user"
	if m.role == roleAgent {
		r = "agent"
	}
	return v03Message{Kind: "message", MessageID: m.id, ContextID: m.contextID, TaskID: m.taskID, Role: r, Parts: v03PartsOf(m.parts)}
}

func v03StatusOf(v *taskView) v03TaskStatus {
	st := v03TaskStatus{State: v03States[v.state], Timestamp: v.timestamp.UTC().Format(time.RFC3339Nano)}
	if v.message != nil {
		m := v03MessageOf(v.message)
		st.Message = &m
	}
	return st
}

func v03ArtifactOf(a artifact) v03Artifact {
	out := v03Artifact{ArtifactID: a.id, Name: a.name, Parts: v03PartsOf(a.parts)}
	if a.warning != "" {
		out.Metadata, _ = json.Marshal(map[string]string{"warning": a.warning})
	}
	if a.metadata != nil {
		out.Metadata = a.metadata
	}
	return out
}

func v03TaskOf(v *taskView) *v03Task {
	t := &v03Task{Kind: "task", ID: v.id, ContextID: v.contextID, Status: v03StatusOf(v), Metadata: v.metadata}
	for _, a := range v.artifacts {
		t.Artifacts = append(t.Artifacts, v03ArtifactOf(a))
	}
	for i := range v.history {
		t.History = append(t.History, v03MessageOf(&v.history[i]))
	}
	return t
}

func v03PushConfigOf(c *pushConfig) v03TaskPushConfig {
	pc := &v03PushConfig{ID: c.ID, URL: c.URL, Token: c.Token}
	if c.AuthScheme != "" {
		pc.Authentication = &v03Authentication{Schemes: []string{c.AuthScheme}, Credentials: c.AuthCredentials}
	}
	return v03TaskPushConfig{TaskID: c.TaskID, PushConfig: pc}
}
