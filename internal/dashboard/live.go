package dashboard

import (
	"net/http"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/internal/sse"
)

// liveThrottle bounds how often a page is told to refresh: a busy task
// writes many events a second, and one refresh shows them all.
const liveThrottle = 250 * time.Millisecond

// live is a Server-Sent Events stream that says "changed" when an event
// of the task (?task=) or of any task is written, at most every
// liveThrottle; the page then fetches what it shows.
func (d *Dashboard) live(w http.ResponseWriter, r *http.Request, _ *view) {
	ctx := r.Context()
	taskID := r.URL.Query().Get("task")
	if !utf8.ValidString(taskID) || len(taskID) > 200 {
		http.Error(w, "bad task id", http.StatusBadRequest)
		return
	}
	// The page says how far into the journal it was read, so nothing
	// written between its render and this connection goes unannounced.
	var after int64
	var err error
	if a := r.URL.Query().Get("after"); a != "" {
		after, err = strconv.ParseInt(a, 10, 64)
		if err != nil || after < 0 {
			http.Error(w, "bad after: want a journal event id", http.StatusBadRequest)
			return
		}
	} else {
		after, err = d.client.LastEventID(ctx)
	}
	if err == nil {
		var sub *errand.Subscription
		if sub, err = d.client.Subscribe(ctx, errand.EventFilter{TaskID: taskID}, after); err == nil {
			defer sub.Close()
			d.stream(w, r, sub)
			return
		}
	}
	http.Error(w, err.Error(), http.StatusInternalServerError)
}

// streamWriteTimeout bounds one write of a page's event stream: a tab
// that stopped reading ends its stream.
const streamWriteTimeout = 10 * time.Second

func (d *Dashboard) stream(w http.ResponseWriter, r *http.Request, sub *errand.Subscription) {
	send := sse.Open(w, streamWriteTimeout).WriteString
	if !send(": live\n\n") {
		return
	}
	keepAlive := d.cfg.Clock.NewTicker(15 * time.Second)
	defer keepAlive.Stop()
	var throttle <-chan time.Time
	for {
		select {
		case <-r.Context().Done():
			return
		case _, ok := <-sub.Events():
			if !ok {
				return
			}
			if throttle == nil {
				throttle = d.cfg.Clock.NewTimer(liveThrottle).C()
			}
		case <-throttle:
			throttle = nil
			if !send("event: changed\ndata: \n\n") {
				return
			}
		case <-keepAlive.C():
			if !send(": keep-alive\n\n") {
				return
			}
		}
	}
}
