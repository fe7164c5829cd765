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
