package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/clawpen/clawpen/internal/domain"
)

const (
	transcriptName    = domain.TranscriptFile
	transcriptVersion = 1
)

type transcriptDoc struct {
	Version  int       `json:"v"`
	Messages []Message `json:"messages"`
}

// loadTranscript reads the saved history; a missing file is an empty history.
func loadTranscript(path string) ([]Message, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read transcript: %w", err)
	}
	var doc transcriptDoc
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("decode transcript: %w", err)
	}
	if doc.Version != transcriptVersion {
		return nil, fmt.Errorf("transcript version %d, want %d", doc.Version, transcriptVersion)
	}
	if err := checkPairs(doc.Messages); err != nil {
		return nil, fmt.Errorf("transcript: %w", err)
	}
	return doc.Messages, nil
}

// saveTranscript replaces the file with msgs, atomically. Nothing is cut:
// a long conversation is compacted (compact.go), never trimmed.
func saveTranscript(path string, msgs []Message) error {
	data, err := json.Marshal(transcriptDoc{Version: transcriptVersion, Messages: msgs})
	if err != nil {
		return fmt.Errorf("encode transcript: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".transcript-*.tmp")
	if err != nil {
		return fmt.Errorf("save transcript: %w", err)
	}
	defer os.Remove(tmp.Name()) // no-op after the rename
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("save transcript: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("save transcript: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("save transcript: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("save transcript: %w", err)
	}
	return nil
}

// checkPairs verifies every tool_use is answered in the next message and every
// tool_result answers the message before, as the providers require.
func checkPairs(msgs []Message) error {
	for i, m := range msgs {
		if m.Role != RoleUser && m.Role != RoleAssistant {
			return fmt.Errorf("message %d has role %q", i, m.Role)
		}
		uses := m.toolUses()
		if len(uses) > 0 {
			if m.Role != RoleAssistant || i+1 >= len(msgs) {
				return fmt.Errorf("message %d: tool_use without tool_result", i)
			}
			answered := map[string]bool{}
			for _, b := range msgs[i+1].Content {
				if b.Type == BlockToolResult {
					answered[b.ToolUseID] = true
				}
			}
			for _, u := range uses {
				if !answered[u.ID] {
					return fmt.Errorf("message %d: tool_use %q without tool_result", i, u.ID)
				}
			}
		}
		if m.hasToolResult() {
			if i == 0 || len(msgs[i-1].toolUses()) == 0 {
				return fmt.Errorf("message %d: tool_result without tool_use", i)
			}
		}
	}
	return nil
}
