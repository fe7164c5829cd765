package dashboard

import (
	"errors"
	"net/http"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/internal/sse"
	"github.com/errandhq/errand/store"
)

// output is a Server-Sent Events stream of a task's live output: each
// piece of a running call's text as an "output" message whose data is the
// delta as the API's task stream carries it ({"step_no", "call_index",
// "offset", "text"}). The page's script (static/task.js) keeps
// text[:offset] + text per call and shows it under the running step. A
// page that connects mid-call first gets the text so far (offset 0).
func (d *Dashboard) output(w http.ResponseWriter, r *http.Request, _ *view) {
	ctx, id := r.Context(), r.PathValue("id")
	if _, err := d.client.Get(ctx, id); errors.Is(err, errand.ErrNotFound) {
		http.Error(w, "no task "+id, http.StatusNotFound)
		return
	} else if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	// Only deltas are wanted: start at the journal's end, so no old event
	// is read for nothing.
	after, err := d.client.LastEventID(ctx)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	sub, err := d.client.Subscribe(ctx, errand.EventFilter{TaskID: id, Live: true}, after)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	defer sub.Close()

	send := sse.Open(w, streamWriteTimeout).WriteString
	if !send(": output\n\n") {
		return
	}
	keepAlive := d.cfg.Clock.NewTicker(15 * time.Second)
	defer keepAlive.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-sub.Events():
			if !ok {
				return
			}
			// Data is one line of JSON (json.Marshal escapes newlines).
			if ev.Type == store.EventTaskOutputDelta && !send("event: output\ndata: "+string(ev.Data)+"\n\n") {
				return
			}
		case <-keepAlive.C():
			if !send(": keep-alive\n\n") {
				return
			}
		}
	}
}
