package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/internal/api"
	"github.com/errandhq/errand/internal/heartbeat"
)

// Exit codes of `errand status`, after the LSB init-script status codes.
const (
	exitAlive = 0
	exitDead  = 3 // LSB: program is not running
	exitStale = 4 // LSB: program status is unknown
)

// Where errand status's task counts come from (api.Status.CountsSource).
const (
	countsFromDaemon    = "daemon"    // a live daemon's /api/status: current
	countsFromHeartbeat = "heartbeat" // the heartbeat file: as of its last beat
)

// statusTimeout bounds the call to a live daemon's /api/status.
const statusTimeout = 5 * time.Second

func (a *app) newStatusCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "status",
		Short: "Say whether the daemon is alive, with task counts and today's spend",
		Long: `status reads the daemon's heartbeat file, $ERRAND_HOME/heartbeat.json, so it
works whether the daemon runs or not. The daemon is:

  alive  its process runs and wrote a heartbeat within 3 intervals (90 s)
  stale  its process runs but has not written a heartbeat for longer: hung?
  dead   there is no heartbeat file (never started, or stopped cleanly), or
         the process that wrote it is gone (it crashed or was killed)

For a live daemon it also asks the API for the current task counts and today's
spend, and falls back to the heartbeat's counts if that fails. Counts from the
heartbeat (a stale or dead daemon's, or when the API fails) are as old as its
last beat, and say so: "(as of 3m ago, when the daemon last wrote its
heartbeat)".

It always prints the state, and exits 0 when the daemon is alive, 3 when it is
dead, 4 when it is stale (after the LSB status codes), and 1 on any other
error, so "errand status >/dev/null && …" runs only with a live daemon.
--json prints {"state", "pid", "started_at", "uptime", "tasks", "spend_today_usd",
"counts_source", "counts_as_of", "version"}: counts_source is "daemon" (current)
or "heartbeat" (as of counts_as_of); version is a live daemon's.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			home, err := a.home()
			if err != nil {
				return err
			}
			path := filepath.Join(home, heartbeat.FileName)
			beat, readErr := heartbeat.Read(path)
			now := a.now()
			state := heartbeat.Classify(beat, readErr, now, nil)
			st := &api.Status{State: string(state), Tasks: map[string]int{}}
			if beat != nil {
				started := beat.StartedAt
				st.PID, st.StartedAt, st.Uptime = beat.PID, &started, beat.Uptime
				maps.Copy(st.Tasks, beat.Tasks)
				// Until a live daemon says otherwise, the counts are the
				// heartbeat's, as old as its last beat.
				asOf := beat.Timestamp.UTC()
				st.CountsSource, st.CountsAsOf = countsFromHeartbeat, &asOf
			}
			if readErr != nil && !errors.Is(readErr, fs.ErrNotExist) {
				fmt.Fprintf(a.stderr, "errand: warning: %v\n", readErr)
			}
			var liveErr error
			if state == heartbeat.StateAlive {
				st.Uptime = now.Sub(beat.StartedAt).Round(time.Second).String()
				liveErr = a.liveStatus(cmd.Context(), beat, st)
				if liveErr != nil {
					fmt.Fprintf(a.stderr, "errand: warning: %s; showing the heartbeat's counts\n", a.describe(liveErr))
				}
			}
			if a.asJSON {
				err = printJSON(a.stdout, st)
			} else {
				err = a.printStatus(st, beat, path, now, liveErr == nil)
			}
			if err != nil {
				return err
			}
			switch state {
			case heartbeat.StateAlive:
				return nil
			case heartbeat.StateStale:
				return &exitError{code: exitStale}
			}
			return &exitError{code: exitDead}
		},
	}
}

// liveStatus fills st from a live daemon's /api/status.
func (a *app) liveStatus(ctx context.Context, beat *heartbeat.Beat, st *api.Status) error {
	c, err := a.clientFor(beat.Listen)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, statusTimeout)
	defer cancel()
	live, err := c.Status(ctx)
	if err != nil {
		return fmt.Errorf("ask the daemon at %s: %w", c.BaseURL(), err)
	}
	if live.Tasks != nil {
		st.Tasks = live.Tasks
		st.CountsSource, st.CountsAsOf = countsFromDaemon, nil
	}
	st.Version = live.Version
	st.SpendTodayUSD = live.SpendTodayUSD
	st.Uptime = cmp.Or(live.Uptime, st.Uptime)
	if live.StartedAt != nil {
		st.StartedAt = live.StartedAt
	}
	return nil
}

func (a *app) printStatus(st *api.Status, beat *heartbeat.Beat, path string, now time.Time, haveSpend bool) error {
	color := a.color()
	t := &table{}
	h := func(s string) string { return style(color, ansiBold, s) }
	var daemon string
	switch heartbeat.State(st.State) {
	case heartbeat.StateAlive:
		daemon = fmt.Sprintf("%s (pid %d, up %s", style(color, ansiGreen, "alive"), st.PID, st.Uptime)
		if beat.Listen != "" {
			daemon += ", listening on " + beat.Listen
		}
		daemon += ")"
	case heartbeat.StateStale:
		daemon = fmt.Sprintf("%s (pid %d runs, but its last heartbeat was %s ago: is it hung?)",
			style(color, ansiYellow, "stale"), st.PID, age(now, beat.Timestamp))
	default:
		if beat == nil {
			daemon = fmt.Sprintf("%s (no heartbeat at %s: not started, or stopped cleanly)", style(color, ansiRed, "dead"), path)
		} else {
			daemon = fmt.Sprintf("%s (pid %d is gone, last heartbeat %s ago: it crashed or was killed)",
				style(color, ansiRed, "dead"), st.PID, age(now, beat.Timestamp))
		}
	}
	t.row(h("daemon"), daemon)
	if beat != nil {
		counts := countsText(st.Tasks)
		if st.CountsSource == countsFromHeartbeat && st.CountsAsOf != nil {
			counts += fmt.Sprintf(" (as of %s ago, when the daemon last wrote its heartbeat)", age(now, *st.CountsAsOf))
		}
		t.row(h("tasks"), counts)
	}
	if st.State == string(heartbeat.StateAlive) && haveSpend {
		t.row(h("spend"), money(st.SpendTodayUSD)+" today")
	}
	return t.write(a.stdout)
}

// countsText lists non-zero counts in lifecycle order: running 2, pending 5.
func countsText(counts map[string]int) string {
	order := func(s string) int {
		if i := slices.Index(statusDisplayOrder, errand.Status(s)); i >= 0 {
			return i
		}
		return len(statusDisplayOrder)
	}
	keys := slices.Collect(maps.Keys(counts))
	slices.SortFunc(keys, func(x, y string) int {
		return cmp.Or(cmp.Compare(order(x), order(y)), strings.Compare(x, y))
	})
	var parts []string
	for _, k := range keys {
		if counts[k] != 0 {
			parts = append(parts, fmt.Sprintf("%s %d", k, counts[k]))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// statusDisplayOrder puts working and waiting tasks first, then the queue,
// then the ended ones.
var statusDisplayOrder = []errand.Status{
	errand.StatusRunning, errand.StatusInputRequired, errand.StatusWaitingSubtasks, errand.StatusPaused,
	errand.StatusPending, errand.StatusRetryScheduled, errand.StatusBlocked,
	errand.StatusCompleted, errand.StatusFailed, errand.StatusCancelled,
}
