package dashboard

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/store"
)

// memoryPageSize is how many memories a page shows, and conflictsShown
// how many of the newest memory conflicts the memories page lists.
const (
	memoryPageSize = 50
	conflictsShown = 20
)

// memoriesData is the memories page: one page of memories (all, or only
// the quarantined ones), or one memory, and the newest conflicts.
type memoriesData struct {
	// Flagged lists only the quarantined memories.
	Flagged  bool
	Memories []*errand.Memory
	// Cursor is where this page starts ("" on the first), Next the
	// cursor of the following page ("" on the last).
	Cursor, Next string
	// One is set when the page shows a single memory (/memories/{id}).
	One       bool
	Conflicts []memoryConflict
}

// memoryConflict is one memory.conflict event: a recall found two
// memories with one subject that disagree, and the newer won.
type memoryConflict struct {
	NewerID, OlderID, Subject, TaskID string
	Event                             *errand.Event
}

// memoriesQuery reads the memories page's query: flagged=true|false and
// cursor, each at most once.
func memoriesQuery(q url.Values) (flagged bool, cursor string, err error) {
	for k, vs := range q {
		if k != "flagged" && k != "cursor" {
			return false, "", fmt.Errorf("the memories page takes no %q parameter, only flagged and cursor", k)
		}
		if len(vs) > 1 {
			return false, "", fmt.Errorf("give %s once", k)
		}
	}
	switch v := q.Get("flagged"); v {
	case "", "false":
	case "true":
		flagged = true
	default:
		return false, "", errors.New("flagged is true or false")
	}
	cursor = q.Get("cursor")
	if !validCursor(cursor) {
		return false, "", errors.New("the cursor is not one this page gave")
	}
	return flagged, cursor, nil
}

func (d *Dashboard) memoriesPage(w http.ResponseWriter, r *http.Request, v *view) {
	flagged, cursor, err := memoriesQuery(r.URL.Query())
	if err != nil {
		d.fail(w, r, v, http.StatusBadRequest, err.Error())
		return
	}
	data := &memoriesData{Flagged: flagged, Cursor: cursor}
	p := &errand.MemoryListParams{Cursor: cursor, Limit: memoryPageSize}
	if flagged {
		p.Flagged = &flagged
	}
	page, err := d.client.ListMemories(r.Context(), p)
	if err != nil {
		var ve *errand.ValidationError
		if errors.As(err, &ve) {
			d.fail(w, r, v, http.StatusBadRequest, err.Error())
			return
		}
		d.fail(w, r, v, http.StatusInternalServerError, err.Error())
		return
	}
	data.Memories, data.Next = page.Memories, page.NextCursor
	if data.Conflicts, err = d.conflicts(r); err != nil {
		d.fail(w, r, v, http.StatusInternalServerError, err.Error())
		return
	}
	v.Title, v.Data = "Memories", data
	if flagged {
		v.Title = "Quarantined memories"
	}
	d.render(w, r, http.StatusOK, "memories", v)
}

// memoryPage shows one memory, and the conflicts it is part of.
func (d *Dashboard) memoryPage(w http.ResponseWriter, r *http.Request, v *view) {
	if len(r.URL.Query()) > 0 {
		d.fail(w, r, v, http.StatusBadRequest, "A memory's page takes no query parameters.")
		return
	}
	id := r.PathValue("id")
	m, err := d.client.Memory(r.Context(), id)
	if err != nil {
		d.fail(w, r, v, actionStatus(err), err.Error())
		return
	}
	all, err := d.conflicts(r)
	if err != nil {
		d.fail(w, r, v, http.StatusInternalServerError, err.Error())
		return
	}
	data := &memoriesData{Memories: []*errand.Memory{m}, One: true, Flagged: m.Flagged != nil}
	for _, c := range all {
		if c.NewerID == id || c.OlderID == id {
			data.Conflicts = append(data.Conflicts, c)
		}
	}
	v.Title, v.Data = "Memory "+m.ID, data
	d.render(w, r, http.StatusOK, "memories", v)
}

// conflicts reads the newest memory.conflict events from the journal.
func (d *Dashboard) conflicts(r *http.Request) ([]memoryConflict, error) {
	evs, err := d.client.MemoryConflicts(r.Context(), conflictsShown)
	if err != nil {
		return nil, err
	}
	out := make([]memoryConflict, 0, len(evs))
	for _, ev := range evs {
		var c store.MemoryConflictData
		if json.Unmarshal(ev.Data, &c) != nil {
			continue
		}
		out = append(out, memoryConflict{NewerID: c.NewerID, OlderID: c.OlderID, Subject: c.Subject, TaskID: ev.TaskID, Event: ev})
	}
	return out, nil
}

// memoryAct releases a quarantined memory and goes back to the page the
// button was on: the memory's own, or the list of quarantined ones.
func (d *Dashboard) memoryAct(w http.ResponseWriter, r *http.Request, v *view) {
	id := r.PathValue("id")
	if r.PathValue("action") != "release" {
		d.fail(w, r, v, http.StatusNotFound, "No such action.")
		return
	}
	if _, err := d.client.ReleaseMemory(r.Context(), id); err != nil {
		d.fail(w, r, v, actionStatus(err), err.Error())
		return
	}
	back := "/memories?flagged=true"
	switch r.PostFormValue("back") {
	case "memory":
		back = "/memories/" + url.PathEscape(id)
	case "all":
		back = "/memories"
	}
	http.Redirect(w, r, back, http.StatusSeeOther)
}

// confidenceText is a memory's confidence with two decimals.
func confidenceText(c float64) string { return fmt.Sprintf("%.2f", c) }
