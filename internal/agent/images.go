package agent

// Images users sent go to the model as image input as well as by path: the
// host fetched them into the group's inbox and named them in the prompt as
// <attachment path="/workspace/group/inbox/…" type="photo" …/>. The host
// escapes every user text in the prompt, so such an element comes from the
// host alone; and only files of the inbox, read from this sandbox's own
// view, are attached.

import (
	"html"
	"io"
	"net/http"
	"os"
	"path"
	"regexp"
	"strings"
	"syscall"
)

// BlockImage is an image for the model; its bytes are not kept in the
// transcript (a later turn sees the prompt's path only).
const BlockImage = "image"

// Limits of image input: the providers' own per-image limit, and a bound
// on how many one prompt attaches.
const (
	maxImageBytes = 5 << 20
	maxImages     = 8
	inboxView     = "/workspace/group/inbox/"
)

var attachmentRe = regexp.MustCompile(`<attachment path="([^"]*)" type="photo"`)

// imageBlocks reads the photos prompt names from the inbox. An image that
// cannot be read or is not JPEG, PNG, GIF or WebP is skipped: the model
// still has its path.
func imageBlocks(prompt string) []Block {
	var out []Block
	for _, m := range attachmentRe.FindAllStringSubmatch(prompt, maxImages) {
		p := path.Clean(html.UnescapeString(m[1]))
		if !strings.HasPrefix(p, inboxView) || strings.Contains(p[len(inboxView):], "/") {
			continue
		}
		data, err := readSmall(p, maxImageBytes)
		if err != nil {
			continue
		}
		switch mt := http.DetectContentType(data); mt {
		case "image/jpeg", "image/png", "image/gif", "image/webp":
			out = append(out, Block{Type: BlockImage, MediaType: mt, Data: data})
		}
	}
	return out
}

// readSmall reads a regular file of at most limit bytes, never through a
// symlink at its last component.
func readSmall(p string, limit int64) ([]byte, error) {
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() || st.Size() > limit {
		return nil, os.ErrInvalid
	}
	return io.ReadAll(io.LimitReader(f, limit))
}
