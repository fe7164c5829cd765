package a2a

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/internal/webhook"
)

// NotificationTokenHeader carries a push config's token back to the
// client with every push.
const NotificationTokenHeader = "X-A2A-Notification-Token"

// PushSource makes the push notifications of journal events, for a
// webhook.PushDispatcher: when a task's status changes (as A2A shows it),
// each of its push configs gets, in its version's shape, v1.0 a
// StreamResponse (the artifact update of a completed task, then the
// status update), v0.3 the whole task. It is not safe for concurrent use;
// the dispatcher calls it from one goroutine.
func (s *Server) PushSource() webhook.PushSource {
	return &pushSource{s: s, last: map[string]*taskView{}}
}

type pushSource struct {
	s *Server
	// last is what was last pushed to each config (by queue name), so a
	// config hears of changes only; a terminal push forgets it.
	last map[string]*taskView
}

// maxRemembered bounds last: past it, the oldest entries are not told
// apart from new ones (the worst case is a status pushed twice).
const maxRemembered = 100_000

func (p *pushSource) Pushes(ctx context.Context, ev *errand.Event) ([]*webhook.Push, error) {
	// A new config hears where its task stands, even if the task does not
	// change again.
	if ev.TaskID == "" || !slices.Contains(statusEvents, ev.Type) && ev.Type != errand.EventPushConfigSet {
		return nil, nil
	}
	configs, err := p.s.client.PushConfigs(ctx, ev.TaskID, "", MaxPushConfigs)
	if err != nil || len(configs) == 0 {
		return nil, err
	}
	t, err := p.s.client.Get(ctx, ev.TaskID)
	if errors.Is(err, errand.ErrNotFound) {
		return nil, nil // purged since
	}
	if err != nil {
		return nil, err
	}
	var v, full *taskView
	var out []*webhook.Push
	for _, c := range configs {
		queue := ev.TaskID + "\x00" + c.ID
		var bodies []any
		var contentType string
		if c.ProtocolVersion == VersionV03 {
			if full == nil {
				if full, err = p.s.view(ctx, t, fullView); err != nil {
					return nil, err
				}
			}
			if full.sameStatus(p.last[queue]) {
				continue
			}
			p.remember(queue, full)
			bodies, contentType = []any{v03TaskOf(full)}, "application/json"
		} else {
			if v == nil {
				if v, err = p.s.view(ctx, t, viewOptions{artifacts: true}); err != nil {
					return nil, err
				}
			}
			if v.sameStatus(p.last[queue]) {
				continue
			}
			p.remember(queue, v)
			bodies, contentType = updates(dialectV1, v), "application/a2a+json"
		}
		for i, body := range bodies {
			b, err := json.Marshal(body)
			if err != nil {
				return nil, fmt.Errorf("encode the push of task %s: %w", t.ID, err)
			}
			out = append(out, &webhook.Push{
				Queue: queue, URL: c.URL, ID: pushID(ev.ID, queue, i), Body: b, ContentType: contentType,
				Header: pushHeader(c), Key: pushKey(c.Token),
			})
		}
	}
	return out, nil
}

func (p *pushSource) remember(queue string, v *taskView) {
	if v.state.terminal() {
		delete(p.last, queue)
		return
	}
	if len(p.last) >= maxRemembered {
		clear(p.last)
	}
	p.last[queue] = v
}

// pushID is the webhook-id of a push: the same when the event is read
// again after a restart, and a valid header whatever the config's id.
func pushID(eventID int64, queue string, i int) string {
	sum := sha256.Sum256([]byte(queue))
	return fmt.Sprintf("%d-%s-%d", eventID, hex.EncodeToString(sum[:6]), i)
}

func pushHeader(c *pushConfig) http.Header {
	h := http.Header{}
	if c.Token != "" {
		h.Set(NotificationTokenHeader, c.Token)
	}
	if c.AuthScheme != "" && c.AuthCredentials != "" {
		h.Set("Authorization", c.AuthScheme+" "+c.AuthCredentials)
	}
	return h
}

// pushKey signs a push with the client's token, read as a webhook secret
// is: the client chose it, so it can check the webhook-signature.
func pushKey(token string) []byte {
	if token == "" {
		return nil
	}
	if k, err := webhook.Key(token); err == nil {
		return k
	}
	return []byte(token)
}
