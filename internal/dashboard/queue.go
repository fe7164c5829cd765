package dashboard

import (
	"net/http"
	"slices"

	"github.com/errandhq/errand"
)

// queueData is the people's queue: questions tasks wait on, and the
// inbox.
type queueData struct {
	Inputs []*errand.InputRequest // the oldest pending questions
	// Waiting is how many tasks wait for an answer, when more than
	// Inputs shows.
	Waiting int
	Inbox   []*errand.Notification // the newest, newest first
	// InboxCut is set when there are older notifications than Inbox shows.
	InboxCut bool
}

// Bounds of the people's queue: questions longest waiting first, the
// inbox newest first.
const (
	queueQuestions = 50
	queueInbox     = 100
)

func (d *Dashboard) queuePage(w http.ResponseWriter, r *http.Request, v *view) {
	ctx := r.Context()
	data := &queueData{}
	inputs, err := d.client.PendingInputs(ctx)
	if err == nil && len(inputs) > queueQuestions {
		var counts map[errand.Status]int
		counts, err = d.client.CountByStatus(ctx)
		data.Waiting = max(counts[errand.StatusInputRequired], len(inputs))
		inputs = inputs[:queueQuestions]
	}
	data.Inputs = inputs
	if err == nil {
		data.Inbox, err = d.client.Inbox(ctx, &errand.InboxParams{Limit: queueInbox, Newest: true})
		slices.Reverse(data.Inbox)
		data.InboxCut = len(data.Inbox) == queueInbox
	}
	if err != nil {
		d.fail(w, r, v, http.StatusInternalServerError, err.Error())
		return
	}
	v.Title, v.Data = "Questions & inbox", data
	d.render(w, r, http.StatusOK, "queue", v)
}
