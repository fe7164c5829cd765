package store

import (
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// PushConfig is where an A2A client asked to be told of a task's changes:
// errand POSTs them to URL, with Token and Auth as the client set them.
// A task has any number of them, each named by an id unique within it.
type PushConfig struct {
	TaskID string
	ID     string
	URL    string
	// Token is sent back with every notification, so the receiver can
	// tell it asked for it; empty sends none.
	Token string
	// AuthScheme and AuthCredentials, when set, are sent as the
	// Authorization header ("Bearer abc").
	AuthScheme      string
	AuthCredentials string
	// ProtocolVersion is the A2A version the client spoke ("1.0" or
	// "0.3"): notifications take that version's shape.
	ProtocolVersion string
	CreatedAt       time.Time
	UpdatedAt       time.Time
}

// Limits of a PushConfig's fields, in bytes.
const (
	MaxPushConfigIDBytes    = 200
	MaxPushConfigURLBytes   = 2048
	MaxPushConfigTokenBytes = 4096
)

// PushConfigPutParams writes one push config: a new one, or, when the task
// has one with the same ID, its replacement (CreatedAt kept).
type PushConfigPutParams struct {
	Config PushConfig // TaskID, ID, URL and ProtocolVersion required
	Actor  string     // on the event; default system
	Now    *time.Time
}

// EventPushConfigSet is journaled, about the task, with each push config
// written: whoever delivers pushes learns of a config made after the
// task's last change, and can tell it where the task stands.
const EventPushConfigSet = "a2a.push_config_set"

// PushConfigEventData is the data of an EventPushConfigSet: the config's
// id, never its URL or secrets.
type PushConfigEventData struct {
	ID string `json:"id"`
}

// Validate reports a missing or oversized field or text that is not UTF-8.
// Drivers call it before writing.
func (p *PushConfigPutParams) Validate() error {
	c := &p.Config
	for _, f := range []struct {
		name, value string
		max         int
		required    bool
	}{
		{"task_id", c.TaskID, MaxPushConfigIDBytes, true},
		{"id", c.ID, MaxPushConfigIDBytes, true},
		{"url", c.URL, MaxPushConfigURLBytes, true},
		{"token", c.Token, MaxPushConfigTokenBytes, false},
		{"auth_scheme", c.AuthScheme, MaxPushConfigIDBytes, false},
		{"auth_credentials", c.AuthCredentials, MaxPushConfigTokenBytes, false},
		{"protocol_version", c.ProtocolVersion, 16, true},
	} {
		switch {
		case f.required && f.value == "":
			return fmt.Errorf("push config %s is required", f.name)
		case len(f.value) > f.max:
			return fmt.Errorf("push config %s is %d bytes; the limit is %d", f.name, len(f.value), f.max)
		case !utf8.ValidString(f.value):
			return fmt.Errorf("push config %s is not valid UTF-8", f.name)
		case strings.ContainsRune(f.value, 0):
			return fmt.Errorf("push config %s holds a NUL byte", f.name)
		}
	}
	return nil
}

// PushConfigListParams pages through one task's push configs by id.
type PushConfigListParams struct {
	TaskID  string
	AfterID string // list configs with id > AfterID
	Limit   int    // ≥ 1
}

// ErrPushConfigInvalid is wrapped by the error of a PushConfigPut whose
// params do not validate.
var ErrPushConfigInvalid = errors.New("errand: invalid push config")
