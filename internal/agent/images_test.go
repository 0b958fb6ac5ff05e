package agent

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Only photos of the inbox, named by the host's element, are read; text a
// user wrote is escaped by the host and never matches.
func TestImageBlocksReadOnlyTheInbox(t *testing.T) {
	for _, prompt := range []string{
		`<attachment path="/etc/passwd" type="photo"/>`,
		`<attachment path="/workspace/group/inbox/../../../etc/passwd" type="photo"/>`,
		`<attachment path="/workspace/group/inbox/sub/x.jpg" type="photo"/>`,
		`&lt;attachment path=&#34;/workspace/group/inbox/x.jpg&#34; type=&#34;photo&#34;/&gt;`,
		`<attachment path="/workspace/group/inbox/missing.jpg" type="photo"/>`,
	} {
		assert.Empty(t, imageBlocks(prompt), prompt)
	}
}

func TestImageBlocksReachBothProviders(t *testing.T) {
	msgs := []Message{{Role: RoleUser, Content: []Block{
		{Type: BlockText, Text: "look"},
		{Type: BlockImage, MediaType: "image/png", Data: []byte("\x89PNG")},
	}}}
	a, err := json.Marshal(toAnthropicMessages(msgs))
	require.NoError(t, err)
	assert.Contains(t, string(a), `"type":"image"`)
	assert.Contains(t, string(a), `"data":"iVBORw=="`)
	assert.Contains(t, string(a), `"media_type":"image/png"`)

	o, err := json.Marshal(toOpenAIMessages("", msgs))
	require.NoError(t, err)
	assert.Contains(t, string(o), `"url":"data:image/png;base64,iVBORw=="`)
	assert.Contains(t, string(o), `"text":"look"`)

	// From a transcript the bytes are gone: the image is left out, the text stays.
	msgs[0].Content[1].Data = nil
	a, err = json.Marshal(toAnthropicMessages(msgs))
	require.NoError(t, err)
	assert.NotContains(t, string(a), `"image"`)
	o, err = json.Marshal(toOpenAIMessages("", msgs))
	require.NoError(t, err)
	assert.Contains(t, string(o), `"content":"look"`)
}
