package remote

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/internal/a2a/wire"
)

func TestArtifactUpdatesFollowA2AsRules(t *testing.T) {
	t.Parallel()
	update := func(id, text string, appendParts bool, metadata string) *wire.ArtifactUpdate {
		u := &wire.ArtifactUpdate{Artifact: wire.Artifact{ArtifactID: id, Parts: []wire.Part{wire.TextPart(text)}}, Append: appendParts}
		if metadata != "" {
			u.Artifact.Metadata = json.RawMessage(metadata)
		}
		return u
	}
	var got []wire.Artifact
	got = addArtifact(got, update("output-1-0", "Thinking", false, `{"errand":{"live_output":true,"step_no":1}}`))
	got = addArtifact(got, update("output-1-0", " hard", true, `{"errand":{"live_output":true,"step_no":1}}`))
	require.Empty(t, got, "an errand peer's live output is not its result")

	got = addArtifact(got, update("report", "Part one", false, ""))
	got = addArtifact(got, update("report", "part two", true, ""))
	got = addArtifact(got, update("table", "draft", false, ""))
	got = addArtifact(got, update("table", "final", false, `{"errand":{"live_output":false}}`))
	require.Equal(t, "Part one\npart two\nfinal", outputOf(got))
}

// FuzzAddArtifact feeds addArtifact what a peer may send: any metadata,
// ids and append flags. It never panics, keeps one artifact per id, and
// never keeps one the metadata marks as live output.
func FuzzAddArtifact(f *testing.F) {
	f.Add([]byte(`{"errand":{"live_output":true}}`), "output-1-0", true, "x")
	f.Add([]byte(`{"errand":{"live_output":"yes"}}`), "result", false, "done")
	f.Add([]byte(`null`), "", true, "")
	f.Fuzz(func(t *testing.T, metadata []byte, id string, appendParts bool, text string) {
		seed := []wire.Artifact{{ArtifactID: "result", Parts: []wire.Part{wire.TextPart("r")}}}
		u := &wire.ArtifactUpdate{Artifact: wire.Artifact{ArtifactID: id, Parts: []wire.Part{wire.TextPart(text)}, Metadata: metadata}, Append: appendParts}
		got := addArtifact(seed, u)
		ids := map[string]bool{}
		for _, a := range got {
			require.False(t, ids[a.ArtifactID], "two artifacts with id %q", a.ArtifactID)
			ids[a.ArtifactID] = true
		}
		if isLiveOutput(metadata) {
			require.Equal(t, seed, got)
		} else {
			require.True(t, ids[id])
		}
		_ = outputOf(got)
	})
}
