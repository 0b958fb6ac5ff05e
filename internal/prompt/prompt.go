// Package prompt turns stored chat messages into the text the agent receives.
// Every piece of user-controlled text is escaped so that no message can close
// its element or forge another one.
package prompt

import (
	"strconv"
	"strings"
	"time"

	"github.com/clawpen/clawpen/internal/domain"
)

var escaper = strings.NewReplacer(
	"&", "&amp;",
	"<", "&lt;",
	">", "&gt;",
	`"`, "&quot;",
	"'", "&#39;",
)

// Escape makes s safe inside an element's text or a quoted attribute.
func Escape(s string) string { return escaper.Replace(s) }

// Messages formats msgs as a <messages> block, times in loc.
func Messages(msgs []domain.Message, loc *time.Location) string {
	if loc == nil {
		loc = time.UTC
	}
	var b strings.Builder
	b.WriteString("<messages>\n")
	for _, m := range msgs {
		b.WriteString(`<message sender="`)
		b.WriteString(Escape(m.SenderName))
		b.WriteString(`" sender_id="`)
		b.WriteString(strconv.FormatInt(m.SenderID, 10))
		b.WriteString(`" time="`)
		b.WriteString(m.Time.In(loc).Format(time.RFC3339))
		b.WriteString(`"`)
		if m.FromBot {
			b.WriteString(` from="assistant"`)
		}
		b.WriteString(">")
		b.WriteString(Escape(m.Text))
		b.WriteString("</message>\n")
	}
	b.WriteString("</messages>")
	return b.String()
}
