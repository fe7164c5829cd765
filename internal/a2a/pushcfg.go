package a2a

import (
	"context"
	"errors"
	"strings"

	"github.com/google/uuid"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/internal/webhook"
)

type pushConfig = errand.PushConfig

// headerSafe reports whether s can be sent as an HTTP header value as it
// is: printable ASCII (and tabs).
func headerSafe(s string) bool {
	for i := range len(s) {
		if c := s[i]; (c < 0x20 && c != '\t') || c > 0x7e {
			return false
		}
	}
	return true
}

// checkPushConfig checks what a client asks to be pushed to; field names
// the config in the request.
func (s *Server) checkPushConfig(c *pushConfig, field string) *rpcError {
	switch {
	case c.URL == "":
		return invalidParams(join(field, "url"), "is required")
	case len(c.URL) > errand.MaxPushConfigURLBytes:
		return invalidParams(join(field, "url"), "is %d bytes; the limit is %d", len(c.URL), errand.MaxPushConfigURLBytes)
	case len(c.ID) > errand.MaxPushConfigIDBytes:
		return invalidParams(join(field, "id"), "is %d bytes; the limit is %d", len(c.ID), errand.MaxPushConfigIDBytes)
	case hasControl(c.ID):
		return invalidParams(join(field, "id"), "holds a control character")
	case len(c.Token) > errand.MaxPushConfigTokenBytes:
		return invalidParams(join(field, "token"), "is %d bytes; the limit is %d", len(c.Token), errand.MaxPushConfigTokenBytes)
	case !headerSafe(c.Token):
		return invalidParams(join(field, "token"), "must be printable ASCII: it is sent back as the X-A2A-Notification-Token header")
	case len(c.AuthScheme) > 100 || !headerSafe(c.AuthScheme) || strings.ContainsAny(c.AuthScheme, " \t"):
		return invalidParams(join(field, "authentication.scheme"), "must be one word of printable ASCII, such as Bearer")
	case len(c.AuthCredentials) > errand.MaxPushConfigTokenBytes || !headerSafe(c.AuthCredentials):
		return invalidParams(join(field, "authentication.credentials"), "must be printable ASCII of at most %d bytes: it is sent as the Authorization header", errand.MaxPushConfigTokenBytes)
	case c.AuthCredentials != "" && c.AuthScheme == "":
		return invalidParams(join(field, "authentication.scheme"), "is required with credentials")
	}
	if err := webhook.CheckURL(c.URL, s.cfg.AllowPrivate); err != nil {
		msg := err.Error()
		if errors.Is(err, webhook.ErrPrivateAddress) {
			msg = strings.Replace(msg, "(set allow_private to allow it)", "(this errand does not push to private addresses)", 1)
		}
		return invalidParams(join(field, "url"), "%s", msg)
	}
	return nil
}

func pushConfigFromV1(p *v1PushConfig) *pushConfig {
	c := &pushConfig{TaskID: p.TaskID, ID: p.ID, URL: p.URL, Token: p.Token, ProtocolVersion: VersionV1}
	if a := p.Authentication; a != nil {
		c.AuthScheme, c.AuthCredentials = a.Scheme, a.Credentials
	}
	return c
}

func pushConfigFromV03(p *v03PushConfig) *pushConfig {
	c := &pushConfig{ID: p.ID, URL: p.URL, Token: p.Token, ProtocolVersion: VersionV03}
	if a := p.Authentication; a != nil {
		if len(a.Schemes) > 0 {
			c.AuthScheme = a.Schemes[0]
		}
		c.AuthCredentials = a.Credentials
	}
	return c
}

// putPushConfig checks and saves a push config of an existing task. A v0.3
// config without an id takes its task's id: v0.3 reads a task's config
// by the task's id alone.
func (s *Server) putPushConfig(ctx context.Context, req *request, c *pushConfig, field string) (*pushConfig, *rpcError) {
	if e := s.checkPushConfig(c, field); e != nil {
		return nil, e
	}
	if c.ID == "" {
		c.ID = uuid.NewString()
		if c.ProtocolVersion == VersionV03 {
			c.ID = c.TaskID
		}
	}
	if _, err := s.client.PushConfig(ctx, c.TaskID, c.ID); errors.Is(err, errand.ErrNotFound) {
		have, err := s.client.PushConfigs(ctx, c.TaskID, "", MaxPushConfigs)
		if err != nil {
			return nil, s.internal(req, err)
		}
		if len(have) >= MaxPushConfigs {
			return nil, invalidParams(join(field, "id"), "task %s has %d push configs already, the limit: delete one first", c.TaskID, len(have))
		}
	} else if err != nil {
		return nil, s.internal(req, err)
	}
	out, err := s.client.PutPushConfig(ctx, c)
	if err != nil {
		var ve *errand.ValidationError
		if errors.As(err, &ve) {
			return nil, invalidParams(join(field, "id"), "%s", strings.TrimPrefix(ve.Message, "push config "))
		}
		return nil, s.taskError(req, c.TaskID, err)
	}
	return out, nil
}

func (s *Server) setPushConfig(ctx context.Context, req *request) (any, *rpcError) {
	var c *pushConfig
	if req.method.dialect == dialectV03 {
		var p v03TaskPushConfig
		if e := decodeParams(req, &p); e != nil {
			return nil, e
		}
		if p.PushConfig == nil {
			return nil, invalidParams("pushNotificationConfig", "is required")
		}
		c = pushConfigFromV03(p.PushConfig)
		c.TaskID = p.TaskID
	} else {
		var p v1PushConfig
		if e := decodeParams(req, &p); e != nil {
			return nil, e
		}
		c = pushConfigFromV1(&p)
	}
	if _, e := s.getTaskByID(ctx, req, "taskId", c.TaskID); e != nil {
		return nil, e
	}
	field := ""
	if req.method.dialect == dialectV03 {
		field = "pushNotificationConfig"
	}
	out, e := s.putPushConfig(ctx, req, c, field)
	if e != nil {
		return nil, e
	}
	return encodePushConfig(req.method.dialect, out), nil
}

func encodePushConfig(d dialect, c *pushConfig) any {
	if d == dialectV03 {
		return v03PushConfigOf(c)
	}
	return v1PushConfigOf(c)
}

// pushTarget reads which task, and which of its configs, a get or delete
// names; configID is empty when v0.3 names none.
func (s *Server) pushTarget(ctx context.Context, req *request) (taskID, configID string, e *rpcError) {
	if req.method.dialect == dialectV03 {
		if req.method.op == opPushList {
			var p v03TaskIDParams
			if e := decodeParams(req, &p); e != nil {
				return "", "", e
			}
			taskID = p.ID
		} else {
			var p v03PushTarget
			if e := decodeParams(req, &p); e != nil {
				return "", "", e
			}
			taskID = p.ID
			if p.PushConfigID != nil {
				configID = *p.PushConfigID
			}
		}
	} else {
		var p v1PushTarget
		if e := decodeParams(req, &p); e != nil {
			return "", "", e
		}
		taskID, configID = p.TaskID, p.ID
	}
	field := "taskId"
	if req.method.dialect == dialectV03 {
		field = "id"
	}
	if _, e := s.getTaskByID(ctx, req, field, taskID); e != nil {
		return "", "", e
	}
	return taskID, configID, nil
}

func pushConfigNotFound(taskID, id string) *rpcError {
	return rpcErr(CodeTaskNotFound, "task %s has no push config %q", taskID, clip(id, 200))
}

func (s *Server) getPushConfig(ctx context.Context, req *request) (any, *rpcError) {
	taskID, id, e := s.pushTarget(ctx, req)
	if e != nil {
		return nil, e
	}
	if id == "" {
		if req.method.dialect == dialectV1 {
			return nil, invalidParams("id", "the push config's id is required")
		}
		id = taskID
	}
	c, err := s.client.PushConfig(ctx, taskID, id)
	if errors.Is(err, errand.ErrNotFound) && req.method.dialect == dialectV03 && id == taskID {
		// A v0.3 client that named no config gets the task's first one.
		if cs, lerr := s.client.PushConfigs(ctx, taskID, "", 1); lerr == nil && len(cs) == 1 {
			c, err = cs[0], nil
		}
	}
	if errors.Is(err, errand.ErrNotFound) {
		return nil, pushConfigNotFound(taskID, id)
	}
	if err != nil {
		return nil, s.internal(req, err)
	}
	return encodePushConfig(req.method.dialect, c), nil
}

func (s *Server) listPushConfigs(ctx context.Context, req *request) (any, *rpcError) {
	if req.method.dialect == dialectV03 {
		taskID, _, e := s.pushTarget(ctx, req)
		if e != nil {
			return nil, e
		}
		cs, err := s.client.PushConfigs(ctx, taskID, "", MaxPushConfigs)
		if err != nil {
			return nil, s.internal(req, err)
		}
		out := make([]v03TaskPushConfig, len(cs))
		for i, c := range cs {
			out[i] = v03PushConfigOf(c)
		}
		return out, nil
	}
	var p v1PushListParams
	if e := decodeParams(req, &p); e != nil {
		return nil, e
	}
	size := int(p.PageSize)
	switch {
	case size < 0:
		return nil, invalidParams("pageSize", "%d is negative", size)
	case size == 0 || size > MaxPushConfigs:
		size = MaxPushConfigs
	}
	if _, e := s.getTaskByID(ctx, req, "taskId", p.TaskID); e != nil {
		return nil, e
	}
	cs, err := s.client.PushConfigs(ctx, p.TaskID, p.PageToken, size+1)
	if err != nil {
		return nil, s.internal(req, err)
	}
	out := v1PushList{Configs: []v1PushConfig{}}
	if len(cs) > size {
		cs = cs[:size]
		out.NextPageToken = cs[size-1].ID
	}
	for _, c := range cs {
		out.Configs = append(out.Configs, v1PushConfigOf(c))
	}
	return out, nil
}

func (s *Server) deletePushConfig(ctx context.Context, req *request) (any, *rpcError) {
	taskID, id, e := s.pushTarget(ctx, req)
	if e != nil {
		return nil, e
	}
	if id == "" {
		field := "id"
		if req.method.dialect == dialectV03 {
			field = "pushNotificationConfigId"
		}
		return nil, invalidParams(field, "the push config's id is required")
	}
	// Deleting twice is deleting once: the spec asks for idempotence.
	if _, err := s.client.DeletePushConfig(ctx, taskID, id); err != nil {
		return nil, s.internal(req, err)
	}
	if req.method.dialect == dialectV03 {
		return nil, nil
	}
	return struct{}{}, nil
}

// join names a field within the object at path ("" for the params).
func join(path, field string) string {
	if path == "" {
		return field
	}
	return path + "." + field
}
