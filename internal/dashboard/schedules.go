package dashboard

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/errandhq/errand"
)

// schedulesData is one page of the schedules, by name.
type schedulesData struct {
	Schedules []*errand.Schedule
	// Cursor is the name this page starts after ("" on the first); Next
	// the cursor of the following page, "" on the last.
	Cursor, Next string
}

// schedulePageSize is how many schedules a page shows.
const schedulePageSize = 50

// maxScheduleCursor bounds a cursor, a schedule's name: errand's names
// are at most 100 bytes, imported ones may be longer.
const maxScheduleCursor = 1000

// scheduleCursor reads the schedules page's query: only cursor, once, a
// schedule name (text with no control characters).
func scheduleCursor(q url.Values) (string, error) {
	for k, vs := range q {
		if k != "cursor" {
			return "", fmt.Errorf("the schedules page takes no %q parameter, only cursor", k)
		}
		if len(vs) > 1 {
			return "", errors.New("give one cursor")
		}
	}
	c := q.Get("cursor")
	if !validCursor(c) {
		return "", errors.New("the cursor is not a schedule name")
	}
	return c, nil
}

// validCursor reports whether c could be a schedule's name, or is empty.
func validCursor(c string) bool {
	return len(c) <= maxScheduleCursor && utf8.ValidString(c) && !strings.ContainsFunc(c, unicode.IsControl)
}

// overlapOf is the overlap policy a schedule fires with: a stored empty
// one is its kind's default.
func overlapOf(s *errand.Schedule) string {
	switch {
	case s.Overlap != "":
		return s.Overlap
	case s.Kind == errand.ScheduleEvent:
		return errand.OverlapAllowAll
	}
	return errand.OverlapSkip
}

func (d *Dashboard) schedulesPage(w http.ResponseWriter, r *http.Request, v *view) {
	cursor, err := scheduleCursor(r.URL.Query())
	if err != nil {
		d.fail(w, r, v, http.StatusBadRequest, err.Error())
		return
	}
	data := &schedulesData{Cursor: cursor}
	data.Schedules, data.Next, err = d.client.SchedulePage(r.Context(), cursor, schedulePageSize)
	if err != nil {
		d.fail(w, r, v, http.StatusInternalServerError, err.Error())
		return
	}
	v.Title, v.Data = "Schedules", data
	d.render(w, r, http.StatusOK, "schedules", v)
}

// scheduleAct enables, disables or runs a schedule now.
func (d *Dashboard) scheduleAct(w http.ResponseWriter, r *http.Request, v *view) {
	ctx, id := r.Context(), r.PathValue("id")
	switch action := r.PathValue("action"); action {
	case "enable", "disable":
		enabled := action == "enable"
		if _, err := d.client.UpdateSchedule(ctx, id, &errand.SchedulePatch{Enabled: &enabled}); err != nil {
			d.fail(w, r, v, actionStatus(err), err.Error())
			return
		}
		// Back to the page the button was on.
		back := "/schedules"
		if c := r.PostFormValue("cursor"); c != "" && validCursor(c) {
			back += "?" + url.Values{"cursor": {c}}.Encode()
		}
		http.Redirect(w, r, back, http.StatusSeeOther)
	case "run":
		task, err := d.client.RunSchedule(ctx, id)
		if err != nil {
			d.fail(w, r, v, actionStatus(err), err.Error())
			return
		}
		http.Redirect(w, r, "/tasks/"+task.ID, http.StatusSeeOther)
	default:
		d.fail(w, r, v, http.StatusNotFound, "No such action.")
	}
}
