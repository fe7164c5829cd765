package agui

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// What @ag-ui/client's HttpAgent posts for a first run.
const clientBody = `{"threadId":"th-1","runId":"run-1","protocolVersion":"1.0","tools":[],"context":[],
	"forwardedProps":{},"state":{},"messages":[
	{"id":"m1","role":"user","content":"first"},
	{"id":"m2","role":"assistant","content":"ok","toolCalls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]},
	{"id":"m3","role":"tool","toolCallId":"c","content":"r"},
	{"id":"m4","role":"user","content":[{"type":"text","text":"Plan a trip"},{"type":"image","source":{"type":"url","value":"http://x"}},{"type":"text","text":"to Rome"}]}]}`

func TestParseInput(t *testing.T) {
	t.Parallel()
	in, err := ParseInput([]byte(clientBody))
	require.NoError(t, err)
	require.Equal(t, "th-1", in.ThreadID)
	require.Equal(t, "run-1", in.RunID)
	require.Len(t, in.Messages, 4)
	goal, field, err := in.Goal()
	require.NoError(t, err)
	require.Equal(t, "Plan a trip\n\nto Rome", goal)
	require.Equal(t, "messages[3].content", field)
	require.JSONEq(t, `{"conversation":[{"role":"user","content":"first"},{"role":"assistant","content":"ok"}]}`, string(in.TaskInput()),
		"what was said before the goal goes with it; tool messages do not")
	require.Empty(t, in.Resume)

	in, err = ParseInput([]byte(`{"threadId":"t","runId":"r","messages":[],"context":[{"description":"city","value":"Rome"}],
		"forwardedProps":{"errand":{"task_id":"tsk_x","agent":"a","answer":"yes"},"other":[1]},"unknownKey":true}`))
	require.NoError(t, err)
	require.Equal(t, Props{TaskID: "tsk_x", Agent: "a", Answer: "yes"}, in.Errand)
	require.JSONEq(t, `{"context":[{"description":"city","value":"Rome"}]}`, string(in.TaskInput()))
	_, field, err = in.Goal()
	require.Error(t, err)
	require.Equal(t, "messages", field)

	for payload, want := range map[string]string{
		`"Rome"`:            "Rome",
		`{"answer":"Rome"}`: "Rome",
		`{"city":"Rome"}`:   `{"city":"Rome"}`,
		`42`:                "42",
	} {
		in, err = ParseInput([]byte(`{"threadId":"t","runId":"r","messages":[],"resume":[{"interruptId":"inp_1","status":"resolved","payload":` + payload + `}]}`))
		require.NoError(t, err, payload)
		require.Equal(t, []ResumeEntry{{InterruptID: "inp_1", Answer: want}}, in.Resume, payload)
	}
	in, err = ParseInput([]byte(`{"threadId":"t","runId":"r","messages":[],"resume":[{"interruptId":"inp_1","status":"cancelled"}]}`))
	require.NoError(t, err)
	require.Equal(t, []ResumeEntry{{InterruptID: "inp_1", Cancelled: true}}, in.Resume)
}

func TestParseInputNamesTheField(t *testing.T) {
	t.Parallel()
	base := func(extra string) string { return `{"threadId":"t","runId":"r","messages":[]` + extra + `}` }
	for body, field := range map[string]string{
		``:                            "",
		`[]`:                          "",
		`{"threadId":`:                "",
		"{\"threadId\":\"\xff\"}":     "",
		`{"runId":"r","messages":[]}`: "threadId",
		`{"threadId":7,"runId":"r","messages":[]}`:                                                                "threadId",
		`{"threadId":"  ","runId":"r","messages":[]}`:                                                             "threadId",
		`{"threadId":"a\u0000b","runId":"r","messages":[]}`:                                                       "threadId",
		`{"threadId":"` + strings.Repeat("x", 201) + `","runId":"r","messages":[]}`:                               "threadId",
		`{"threadId":"t","messages":[]}`:                                                                          "runId",
		`{"threadId":"t","runId":"r"}`:                                                                            "messages",
		base(`,"messages":{}`):                                                                                    "messages",
		`{"threadId":"t","runId":"r","messages":[null]}`:                                                          "messages[0]",
		`{"threadId":"t","runId":"r","messages":[{"id":1}]}`:                                                      "messages[0].id",
		`{"threadId":"t","runId":"r","messages":[{"id":"a","role":"bot"}]}`:                                       "messages[0].role",
		`{"threadId":"t","runId":"r","messages":[{"id":"a","role":"user"}]}`:                                      "messages[0].content",
		`{"threadId":"t","runId":"r","messages":[{"id":"a","role":"user","content":5}]}`:                          "messages[0].content",
		`{"threadId":"t","runId":"r","messages":[{"id":"a","role":"user","content":[{"type":"x"}]}]}`:             "messages[0].content[0].type",
		`{"threadId":"t","runId":"r","messages":[{"id":"a","role":"user","content":[{"type":"text","text":1}]}]}`: "messages[0].content[0].text",
		`{"threadId":"t","runId":"r","messages":[{"id":"a","role":"assistant","content":[]}]}`:                    "messages[0].content",
		base(`,"context":{}`):                               "context",
		base(`,"context":[{"description":"d","value":3}]`):  "context[0].value",
		base(`,"tools":"all"`):                              "tools",
		base(`,"protocolVersion":1`):                        "protocolVersion",
		base(`,"forwardedProps":{"errand":[]}`):             "forwardedProps.errand",
		base(`,"forwardedProps":{"errand":{"task":"x"}}`):   "forwardedProps.errand.task",
		base(`,"forwardedProps":{"errand":{"task_id":5}}`):  "forwardedProps.errand.task_id",
		base(`,"forwardedProps":{"errand":{"agent":true}}`): "forwardedProps.errand.agent",
		base(`,"forwardedProps":{"errand":{"answer":" "}}`): "forwardedProps.errand.answer",
		base(`,"resume":{}`):                                "resume",
		base(`,"resume":[{"interruptId":"a","status":"cancelled"},{"interruptId":"b","status":"cancelled"}]`):                "resume",
		base(`,"resume":[{"status":"resolved","payload":"x"}]`):                                                              "resume[0].interruptId",
		base(`,"resume":[{"interruptId":"a","status":"done"}]`):                                                              "resume[0].status",
		base(`,"resume":[{"interruptId":"a","status":"resolved"}]`):                                                          "resume[0].payload",
		base(`,"resume":[{"interruptId":"a","status":"resolved","payload":""}]`):                                             "resume[0].payload",
		base(`,"resume":[{"interruptId":"a","status":"cancelled","metadata":[]}]`):                                           "resume[0].metadata",
		base(`,"resume":[{"interruptId":"a","status":"resolved","payload":"x"}],"forwardedProps":{"errand":{"answer":"y"}}`): "forwardedProps.errand.answer",
	} {
		_, err := ParseInput([]byte(body))
		var fe *FieldError
		require.True(t, errors.As(err, &fe), "%s: %v", body, err)
		require.Equal(t, field, fe.Field, "%s: %v", body, err)
		require.NotEmpty(t, fe.Message)
	}
}

func TestConversationIsBounded(t *testing.T) {
	t.Parallel()
	in := &Input{}
	for i := range 30 {
		in.Messages = append(in.Messages, Message{Role: "assistant", Text: fmt.Sprint(i)})
	}
	in.Messages = append(in.Messages, Message{Role: "user", Text: "goal"}, Message{Role: "assistant", Text: "after"})
	c := in.Conversation()
	require.Len(t, c, MaxConversationMessages)
	require.Equal(t, "10", c[0].Content, "the most recent are kept")
	require.Equal(t, "29", c[len(c)-1].Content)

	big := strings.Repeat("x", MaxConversationBytes/2)
	in.Messages = []Message{{Role: "user", Text: big + "1"}, {Role: "user", Text: big}, {Role: "user", Text: "old"}, {Role: "user", Text: "goal"}}
	c = in.Conversation()
	require.Equal(t, []Turn{{"user", big}, {"user", "old"}}, c)
	require.Nil(t, (&Input{Messages: []Message{{Role: "user", Text: "only"}}}).TaskInput())
}

func FuzzParseInput(f *testing.F) {
	f.Add([]byte(clientBody))
	f.Add([]byte(`{"threadId":"t","runId":"r","messages":[],"resume":[{"interruptId":"inp_1","status":"resolved","payload":{"answer":"x"}}]}`))
	f.Add([]byte(`{"threadId":"t","runId":"r","messages":[],"forwardedProps":{"errand":{"task_id":"tsk_1","answer":"a"}}}`))
	f.Add([]byte(`{"threadId":"t","runId":"r","messages":[{"id":"a","role":"user","content":[{"type":"text","text":"x"}]}],"context":[{"description":"d","value":"v"}]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		in, err := ParseInput(body)
		if err != nil {
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Message == "" {
				t.Fatalf("%q: an error that names no field: %v", body, err)
			}
			return
		}
		if in.ThreadID == "" || in.RunID == "" || len(in.ThreadID) > MaxIDBytes {
			t.Fatalf("%q: accepted without ids: %+v", body, in)
		}
		if len(in.Resume) > MaxResumeEntries {
			t.Fatalf("%q: %d resume entries", body, len(in.Resume))
		}
		for _, r := range in.Resume {
			if !r.Cancelled && strings.TrimSpace(r.Answer) == "" {
				t.Fatalf("%q: a resolved entry without an answer", body)
			}
		}
		if goal, _, err := in.Goal(); err == nil && strings.TrimSpace(goal) == "" {
			t.Fatalf("%q: a blank goal", body)
		}
		if ti := in.TaskInput(); ti != nil && !json.Valid(ti) {
			t.Fatalf("%q: task input %q", body, ti)
		}
	})
}
