package router

// The prompt: stored chat messages as the text the agent receives. Every
// piece of user-controlled text is escaped so that no message can close its
// element or forge another one.

import (
	"fmt"
	"html"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/clawpen/clawpen/internal/domain"
)

// messagesPrompt formats msgs as a <messages> block, times in loc.
func messagesPrompt(msgs []domain.Message, loc *time.Location) string {
	if loc == nil {
		loc = time.UTC
	}
	var b strings.Builder
	b.WriteString("<messages>\n")
	for _, m := range msgs {
		b.WriteString(`<message sender="`)
		b.WriteString(html.EscapeString(m.SenderName))
		b.WriteString(`" sender_id="`)
		b.WriteString(strconv.FormatInt(m.SenderID, 10))
		b.WriteString(`" time="`)
		b.WriteString(m.Time.In(loc).Format(time.RFC3339))
		b.WriteString(`">`)
		b.WriteString(html.EscapeString(m.Text))
		if a := m.Attachment; a != nil {
			writeAttachment(&b, a)
		}
		b.WriteString("</message>\n")
	}
	b.WriteString("</messages>")
	return b.String()
}

// writeAttachment writes a's element. Every value is escaped (quotes
// included), and the sender's file name also loses its control and format
// characters (shown as \u escapes: a newline or an RTL override cannot
// disguise it) and is cut to maxShownName characters.
func writeAttachment(b *strings.Builder, a *domain.Attachment) {
	b.WriteString("<attachment")
	if a.Path != "" {
		b.WriteString(` path="` + html.EscapeString(a.Path) + `"`)
	}
	b.WriteString(` type="` + html.EscapeString(a.Type) + `"`)
	if a.Name != "" {
		b.WriteString(` name="` + html.EscapeString(shownName(a.Name)) + `"`)
	}
	if a.Note != "" {
		b.WriteString(` note="` + html.EscapeString(a.Note) + `"`)
	}
	if a.Transcript == "" {
		b.WriteString("/>")
		return
	}
	// The sender's words, as a message's text is: escaped, so no markup in
	// them closes this element or opens another.
	b.WriteString("><transcript>" + html.EscapeString(a.Transcript) + "</transcript></attachment>")
}

const maxShownName = 120

func shownName(s string) string {
	var b strings.Builder
	n := 0
	for _, r := range s {
		if n == maxShownName {
			b.WriteString("…")
			break
		}
		n++
		if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || r == utf8.RuneError {
			fmt.Fprintf(&b, "\\u%04x", r)
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}
