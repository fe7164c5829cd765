package dashboard

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/errandhq/errand"
)

// tasksData is the task list page: the filters, one page of tasks and the
// cursor of the next.
type tasksData struct {
	Status, Agent, Session string
	Text                   string // in the title or goal, or the id
	Tasks                  []*errand.Task
	Next                   string
	Query                  string // the filters as a query string, for the live refresh
	// After is the journal's last event id when the page was read: the
	// live refresh announces anything written after it.
	After int64
}

// pageSize is how many tasks a list page shows.
const pageSize = 50

func (d *Dashboard) listTasks(r *http.Request) (*tasksData, error) {
	q := r.URL.Query()
	data := &tasksData{Status: q.Get("status"), Agent: q.Get("agent"), Session: q.Get("session"), Text: strings.TrimSpace(q.Get("q"))}
	for _, s := range []string{data.Status, data.Agent, data.Session, data.Text, q.Get("cursor")} {
		if !utf8.ValidString(s) || len(s) > 200 {
			return nil, errors.New("a filter is not valid text")
		}
	}
	after, err := d.client.LastEventID(r.Context()) // before the read: later writes get higher ids
	if err != nil {
		return nil, err
	}
	data.After = after
	p := &errand.ListParams{Agent: data.Agent, SessionID: data.Session, Text: data.Text, Cursor: q.Get("cursor"), Limit: pageSize}
	if data.Status != "" {
		st := errand.Status(data.Status)
		if !st.Valid() {
			return nil, fmt.Errorf("there is no status %q", data.Status)
		}
		p.Statuses = []errand.Status{st}
	}
	res, err := d.client.List(r.Context(), p)
	if err != nil {
		return nil, err
	}
	data.Tasks, data.Next = res.Tasks, res.NextCursor
	filters := q
	filters.Del("cursor")
	data.Query = filters.Encode()
	return data, nil
}

func (d *Dashboard) tasksPage(w http.ResponseWriter, r *http.Request, v *view) {
	data, err := d.listTasks(r)
	if err != nil {
		d.fail(w, r, v, http.StatusBadRequest, err.Error())
		return
	}
	v.Title, v.Data = "Tasks", data
	d.render(w, r, http.StatusOK, "tasks", v)
}

// taskRows is the list's rows alone, for the live refresh.
func (d *Dashboard) taskRows(w http.ResponseWriter, r *http.Request, v *view) {
	data, err := d.listTasks(r)
	if err != nil {
		d.fail(w, r, v, http.StatusBadRequest, err.Error())
		return
	}
	v.Data, v.Fragment = data, true
	d.render(w, r, http.StatusOK, "rows", v)
}
