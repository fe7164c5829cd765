//go:build unix

package agent

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/internal/engine"
	"github.com/errandhq/errand/internal/taskrun"
	"github.com/errandhq/errand/store"
)

// An exec agent streams by writing {"type":"output","text":…} lines on
// stderr: each step's pieces reach the run's watchers, in order, and the
// step ends once.
func TestExecStreamsOutputLines(t *testing.T) {
	t.Parallel()
	b := setup(t)
	cmd, _ := writeScript(t, stepOf+`if [ "$step" = 1 ]; then
	echo '{"type":"output","text":"Reading "}' >&2
	printf '%s\n' '{"type":"output","text":"the notes…\n"}' >&2 # sh's echo would expand \n
	echo '{"status":"continue","output":1}'
else
	printf '%s' '{"type":"output","text":"Done, no newline at the end."}' >&2
	echo '{"status":"finish","output":"ok"}'
fi
`)
	out := newLiveOutput()
	b.start(t, liveHandler(newExecAgent(t, ExecConfig{Command: cmd}), out, nil))
	task := submit(t, b, &engine.SubmitParams{Goal: "stream"})
	done := b.waitEnd(t, task.ID)
	require.Equal(t, store.StatusCompleted, done.Status, "%+v", done.Error)

	require.Equal(t, []string{"Reading ", "the notes…\n"}, out.Pieces(1, 0))
	require.Equal(t, []string{"Done, no newline at the end."}, out.Pieces(2, 0))
	require.Equal(t, 1, out.Ended(1, 0))
	require.Equal(t, 1, out.Ended(2, 0))
	require.Equal(t, []string{"text 1/0", "text 1/0", "end 1/0", "text 2/0", "end 2/0"}, out.Log())
}

// Output lines are not stderr: a failed step's message keeps every other
// line (other types, invalid JSON, plain text) and none of the output.
func TestExecOutputLinesLeaveStderrTail(t *testing.T) {
	t.Parallel()
	b := setup(t)
	cmd, _ := writeScript(t, `cat > /dev/null
echo 'starting up' >&2
echo '{"type":"output","text":"live words"}' >&2
echo '{"type":"progress","text":"another type"}' >&2
echo '{"type":"output","text":' >&2
echo '{"type":"output"}' >&2
echo '  {"type":"output","text":" more live words","extra":[1]}' >&2
echo 'giving up' >&2
exit 3
`)
	out := newLiveOutput()
	b.start(t, liveHandler(newExecAgent(t, ExecConfig{Command: cmd}), out, nil))
	task := submit(t, b, &engine.SubmitParams{Goal: "fail loudly"})
	done := b.waitEnd(t, task.ID)
	require.Equal(t, store.StatusRetryScheduled, done.Status)

	require.Equal(t, []string{"live words", " more live words"}, out.Pieces(1, 0))
	require.Equal(t, 1, out.Ended(1, 0))
	got := steps(t, b, task.ID)
	require.Len(t, got, 1)
	require.Equal(t, taskrun.StepFailed, got[0].Status)
	msg := got[0].ErrorMessage
	_, stderr, ok := strings.Cut(msg, "; stderr: ")
	require.True(t, ok, msg)
	require.Equal(t, "starting up\n"+`{"type":"progress","text":"another type"}`+"\n"+
		`{"type":"output","text":`+"\n"+`{"type":"output"}`+"\n"+"giving up", stderr)
	require.NotContains(t, done.Error.Message, "live words")
}

// A line too long to look into is ordinary stderr, whatever it holds.
func TestExecOutputLineTooLong(t *testing.T) {
	t.Parallel()
	b := setup(t)
	cmd, _ := writeScript(t, `cat > /dev/null
big=$(head -c 70000 /dev/zero | tr '\0' 'x')
printf '{"type":"output","text":"%s"}\n' "$big" >&2
echo '{"type":"output","text":"short"}' >&2
echo 'the end' >&2
exit 1
`)
	out := newLiveOutput()
	b.start(t, liveHandler(newExecAgent(t, ExecConfig{Command: cmd}), out, nil))
	task := submit(t, b, &engine.SubmitParams{Goal: "too long"})
	b.waitEnd(t, task.ID)

	require.Equal(t, []string{"short"}, out.Pieces(1, 0))
	got := steps(t, b, task.ID)
	require.Len(t, got, 1)
	require.True(t, strings.HasSuffix(got[0].ErrorMessage, `xxx"}`+"\nthe end"), "%.200s", got[0].ErrorMessage[len(got[0].ErrorMessage)-200:])
}
