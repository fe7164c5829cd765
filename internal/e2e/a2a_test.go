package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// a2aDaemon runs errand serve with the agents the A2A clients drive: the
// default one (examples' shell agent: three steps, then "Finished:
// <goal>"), asker (asks a name, then greets it) and slow (runs until
// cancelled).
func a2aDaemon(t *testing.T) *daemon {
	t.Helper()
	home := t.TempDir()
	writeFile(t, filepath.Join(home, "asker.sh"), `#!/bin/sh
# Asks for a name, then greets whoever answered.
input=$(cat)
name=$(printf '%s\n' "$input" | sed -n 's/.*"answers":\[.*"answer":"\([^"\\]*\)".*/\1/p')
if [ -z "$name" ]; then
	printf '{"status":"ask_user","question":"What is your name?"}\n'
else
	printf '{"status":"finish","output":"Hello, %s!"}\n' "$name"
fi
`, 0o755)
	writeFile(t, filepath.Join(home, "slow.sh"), "#!/bin/sh\ncat >/dev/null\nsleep 600\nprintf '{\"status\":\"finish\"}\\n'\n", 0o755)
	writeFile(t, filepath.Join(home, "errand.yaml"), fmt.Sprintf(`
agents:
  default: {kind: exec, command: [%q]}
  asker: {kind: exec, command: ["./asker.sh"]}
  slow: {kind: exec, command: ["./slow.sh"]}
`, repoPath(t, "examples/agents/shell-agent.sh")), 0o600)
	return startDaemon(t, home)
}

// TestA2AServed checks, without any A2A SDK, what errand serve mounts: the
// card open, the JSON-RPC endpoint behind the token.
func TestA2AServed(t *testing.T) {
	t.Parallel()
	d := a2aDaemon(t)

	get := func(path string, header ...string) (int, []byte) {
		req, err := http.NewRequestWithContext(t.Context(), "GET", d.url+path, nil)
		require.NoError(t, err)
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		require.NoError(t, err)
		return res.StatusCode, b
	}
	status, b := get("/.well-known/agent-card.json", "A2A-Version", "1.0")
	require.Equal(t, http.StatusOK, status, string(b))
	var card struct {
		Name                string `json:"name"`
		SupportedInterfaces []struct {
			URL             string `json:"url"`
			ProtocolVersion string `json:"protocolVersion"`
		} `json:"supportedInterfaces"`
		Skills []struct {
			ID          string   `json:"id"`
			Description string   `json:"description"`
			Tags        []string `json:"tags"`
		} `json:"skills"`
	}
	require.NoError(t, json.Unmarshal(b, &card))
	require.Equal(t, "errand", card.Name)
	require.Equal(t, d.url+"/a2a", card.SupportedInterfaces[0].URL)
	require.Equal(t, "1.0", card.SupportedInterfaces[0].ProtocolVersion)
	var skills []string
	for _, s := range card.Skills {
		skills = append(skills, s.ID+": "+s.Description)
	}
	require.Equal(t, []string{"asker: an errand exec agent", "default: an errand exec agent", "slow: an errand exec agent"}, skills)
	require.NotContains(t, string(b), "asker.sh", "the open card names no command")

	status, b = get("/.well-known/agent-card.json")
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, string(b), `"protocolVersion": "0.3.0"`)

	// The endpoint needs the token; with it, it answers JSON-RPC.
	res, err := http.Post(d.url+"/a2a", "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"x"}}`))
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusUnauthorized, res.StatusCode)
	req, err := http.NewRequestWithContext(t.Context(), "POST", d.url+"/a2a",
		strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"e2e-1","role":"ROLE_USER","parts":[{"text":"over plain HTTP"}]}}}`))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+d.token)
	req.Header.Set("Content-Type", "application/json")
	res, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	var answer struct {
		Result struct {
			Task struct {
				ID        string                 `json:"id"`
				Status    struct{ State string } `json:"status"`
				Artifacts []struct {
					Parts []struct{ Text string } `json:"parts"`
				} `json:"artifacts"`
			} `json:"task"`
		} `json:"result"`
	}
	require.NoError(t, json.NewDecoder(res.Body).Decode(&answer))
	require.Equal(t, "TASK_STATE_COMPLETED", answer.Result.Task.Status.State)
	require.Equal(t, "Finished: over plain HTTP", answer.Result.Task.Artifacts[0].Parts[0].Text)
	// It is an errand task like any other.
	out, stderr, code := d.errand("tasks", "show", answer.Result.Task.ID)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "completed")
}

// TestA2AInterop drives errand's A2A server with the official A2A SDKs
// for JavaScript: the v1.0 client from the card (interop/a2a/v1.mjs) and
// the v0.3 one (interop/a2a/v03.mjs).
func TestA2AInterop(t *testing.T) {
	t.Parallel()
	interop := os.Getenv("ERRAND_TEST_INTEROP")
	if interop == "" {
		t.Skip("ERRAND_TEST_INTEROP is not set (the path of interop/, with node_modules installed): skipping the A2A interop test")
	}
	interop, err := filepath.Abs(interop)
	require.NoError(t, err)
	node, err := exec.LookPath("node")
	require.NoError(t, err, "ERRAND_TEST_INTEROP is set but node is not on PATH")
	d := a2aDaemon(t)

	run := func(t *testing.T, script string, out any) {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, node, filepath.Join(interop, "a2a", script), d.url, d.token)
		cmd.Dir = interop
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		require.NoError(t, cmd.Run(), "%s:\nstdout: %s\nstderr: %s", script, stdout.String(), stderr.String())
		t.Logf("%s: %s\nstderr:\n%s", script, stdout.String(), stderr.String())
		require.NoError(t, json.Unmarshal(bytes.TrimSpace(stdout.Bytes()), out), stdout.String())
	}

	t.Run("v1.0", func(t *testing.T) {
		var got struct {
			Card struct {
				Name       string   `json:"name"`
				Streaming  bool     `json:"streaming"`
				Push       bool     `json:"push"`
				Interfaces []string `json:"interfaces"`
				Skills     []string `json:"skills"`
				Schemes    []string `json:"schemes"`
			} `json:"card"`
			ProtocolVersion string `json:"protocolVersion"`
			Send            struct {
				ID, Context, State, Artifact string
				History                      []string
			} `json:"send"`
			Get    struct{ State, Artifact string } `json:"get"`
			Stream []string                         `json:"stream"`
			Cancel struct{ Before, After string }   `json:"cancel"`
			Again  string                           `json:"cancelAgain"`
			Ask    struct{ State, Role, Question string }
			Answer struct {
				ID, State, Artifact string
				History             []string
			}
			List struct{ Count int } `json:"list"`
			Push struct {
				URL, Token          string
				Listed, AfterDelete int
			} `json:"push"`
			Unknown string `json:"unknown"`
		}
		run(t, "v1.mjs", &got)
		require.Equal(t, "errand", got.Card.Name)
		require.True(t, got.Card.Streaming)
		require.True(t, got.Card.Push)
		require.Equal(t, []string{"JSONRPC 1.0 " + d.url + "/a2a", "JSONRPC 0.3 " + d.url + "/a2a"}, got.Card.Interfaces)
		require.Equal(t, []string{"asker", "default", "slow"}, got.Card.Skills)
		require.Equal(t, []string{"bearer"}, got.Card.Schemes)
		require.Equal(t, "1.0", got.ProtocolVersion)

		require.Equal(t, "TASK_STATE_COMPLETED", got.Send.State)
		require.Equal(t, "Finished: say hello", got.Send.Artifact)
		require.Equal(t, []string{"say hello"}, got.Send.History)
		require.Equal(t, "TASK_STATE_COMPLETED", got.Get.State)

		require.Equal(t, "task TASK_STATE_SUBMITTED", got.Stream[0])
		require.Contains(t, got.Stream, "status TASK_STATE_WORKING")
		require.Equal(t, []string{"artifact Finished: stream it", "status TASK_STATE_COMPLETED"}, got.Stream[len(got.Stream)-2:])

		require.Equal(t, "TASK_STATE_CANCELED", got.Cancel.After)
		require.Equal(t, "TaskNotCancelableError", got.Again)

		require.Equal(t, "TASK_STATE_INPUT_REQUIRED", got.Ask.State)
		require.Equal(t, "ROLE_AGENT", got.Ask.Role)
		require.Equal(t, "What is your name?", got.Ask.Question)
		require.Equal(t, "TASK_STATE_COMPLETED", got.Answer.State)
		require.Equal(t, "Hello, Ada!", got.Answer.Artifact)
		require.Equal(t, []string{"ROLE_USER greet me", "ROLE_AGENT What is your name?", "ROLE_USER Ada"}, got.Answer.History)

		require.Equal(t, 2, got.List.Count, "the two tasks sent in one context")
		require.Equal(t, "https://hooks.example.invalid/a2a", got.Push.URL)
		require.Equal(t, "tok-1", got.Push.Token)
		require.Equal(t, 1, got.Push.Listed)
		require.Equal(t, 0, got.Push.AfterDelete)
		require.Equal(t, "TaskNotFoundError", got.Unknown)
	})

	t.Run("v0.3", func(t *testing.T) {
		var got struct {
			Card struct {
				ProtocolVersion string `json:"protocolVersion"`
				URL             string `json:"url"`
				Transport       string `json:"transport"`
				Streaming       bool   `json:"streaming"`
			} `json:"card"`
			Send        struct{ Kind, ID, Context, State, Artifact string } `json:"send"`
			Get         struct{ Kind, State string }                        `json:"get"`
			Stream      []string                                            `json:"stream"`
			Resubscribe []string                                            `json:"resubscribe"`
			Cancel      struct{ State string }                              `json:"cancel"`
			CancelAgain int                                                 `json:"cancelAgain"`
			Ask         struct{ State, Role, Question string }              `json:"ask"`
			Answer      struct{ ID, State, Artifact string }                `json:"answer"`
			Push        struct {
				URL, Token string
				Listed     int
			} `json:"push"`
			Unknown int `json:"unknown"`
		}
		run(t, "v03.mjs", &got)
		require.Equal(t, "0.3.0", got.Card.ProtocolVersion)
		require.Equal(t, d.url+"/a2a", got.Card.URL)
		require.Equal(t, "JSONRPC", got.Card.Transport)

		require.Equal(t, "task", got.Send.Kind)
		require.Equal(t, "completed", got.Send.State)
		require.Equal(t, "Finished: say hello", got.Send.Artifact)
		require.Equal(t, "completed", got.Get.State)

		require.Equal(t, "task submitted", got.Stream[0])
		require.Equal(t, []string{"artifact Finished: stream it", "status completed final"}, got.Stream[len(got.Stream)-2:])

		require.Equal(t, "canceled", got.Cancel.State)
		require.Equal(t, "status-update canceled final", got.Resubscribe[len(got.Resubscribe)-1])
		require.Equal(t, -32002, got.CancelAgain)

		require.Equal(t, "input-required", got.Ask.State)
		require.Equal(t, "agent", got.Ask.Role)
		require.Equal(t, "What is your name?", got.Ask.Question)
		require.Equal(t, "completed", got.Answer.State)
		require.Equal(t, "Hello, Grace!", got.Answer.Artifact)

		require.Equal(t, "https://hooks.example.invalid/a2a", got.Push.URL)
		require.Equal(t, "tok-3", got.Push.Token)
		require.Equal(t, 1, got.Push.Listed)
		require.Equal(t, -32001, got.Unknown)
	})
}
