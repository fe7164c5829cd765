package dashboard

import (
	"errors"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/internal/id"
)

// artifact is a completed task's output file, artifacts/<task>/output.md
// under the data directory.
type artifact struct {
	Path string // relative to the data directory
	Text string // the start of the file, as text
	Size int64
	Cut  bool // Text is only the start
}

// maxArtifactShown is how much of an artifact the task page shows; the
// download has all of it.
const maxArtifactShown = 64 << 10

// artifactPath is where taskID's artifact lives, or "" when there is no
// data directory or the id could name another path.
func (d *Dashboard) artifactPath(taskID string) string {
	if d.cfg.Home == "" || !id.Valid(id.Task, taskID) {
		return ""
	}
	return filepath.Join(d.cfg.Home, "artifacts", taskID, "output.md")
}

// artifactOf reads t's artifact; a task without one (not completed, no
// data directory, unreadable file) has none.
func (d *Dashboard) artifactOf(t *errand.Task) *artifact {
	path := d.artifactPath(t.ID)
	if path == "" {
		return nil
	}
	f, err := os.Open(path)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			d.log.Warn("read artifact", "task", t.ID, "err", err)
		}
		return nil
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil || !info.Mode().IsRegular() {
		return nil
	}
	head, err := io.ReadAll(io.LimitReader(f, maxArtifactShown))
	if err != nil {
		d.log.Warn("read artifact", "task", t.ID, "err", err)
		return nil
	}
	return &artifact{
		Path: filepath.ToSlash(filepath.Join("artifacts", t.ID, "output.md")),
		Text: strings.ToValidUTF8(string(head), "\uFFFD"),
		Size: info.Size(),
		Cut:  info.Size() > int64(len(head)),
	}
}

// downloadArtifact sends a task's whole artifact as a file.
func (d *Dashboard) downloadArtifact(w http.ResponseWriter, r *http.Request, v *view) {
	taskID := r.PathValue("id")
	path := d.artifactPath(taskID)
	f, err := os.Open(path)
	if path == "" || err != nil {
		d.fail(w, r, v, http.StatusNotFound, "This task has no artifact.")
		return
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil || !info.Mode().IsRegular() {
		d.fail(w, r, v, http.StatusNotFound, "This task has no artifact.")
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/markdown; charset=utf-8")
	h.Set("Content-Disposition", `attachment; filename="`+taskID+`.md"`)
	http.ServeContent(w, r, "", info.ModTime(), f)
}
