package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"slices"

	"github.com/clawpen/clawpen/internal/domain"
)

// bridgeTools offers the job's host bridge tools to the model under their
// own names. The agent only passes the call on (POST /ipc/host_tool): the
// host checks the tool, the group and the arguments again. A name that is
// already one of the agent's tools is left out, so a built-in is never
// replaced.
func (a *runner) bridgeTools(own []tool, jts []domain.JobTool) []tool {
	var out []tool
	for _, jt := range jts {
		if slices.ContainsFunc(own, func(t tool) bool { return t.def.Name == jt.Name }) {
			a.log.Warn("bridge tool shadows a built-in; not offered", "tool", jt.Name)
			continue
		}
		var schema map[string]any
		if err := json.Unmarshal(jt.InputSchema, &schema); err != nil {
			a.log.Warn("bridge tool schema unreadable; not offered", "tool", jt.Name, "err", err)
			continue
		}
		def := ToolDef{Name: jt.Name, Description: jt.Description, Extra: map[string]any{}}
		if jt.Guidance != "" {
			def.Description += "\n\n" + jt.Guidance
		}
		for k, v := range schema {
			switch k {
			case "type":
			case "properties":
				def.Properties, _ = v.(map[string]any)
			case "required":
				req, _ := v.([]any)
				for _, r := range req {
					if s, ok := r.(string); ok {
						def.Required = append(def.Required, s)
					}
				}
			default:
				def.Extra[k] = v
			}
		}
		if def.Properties == nil {
			def.Properties = map[string]any{}
		}
		name := jt.Name
		out = append(out, tool{
			def:   def,
			check: checkObject,
			run: func(ctx context.Context, raw []byte) (string, error) {
				if err := checkObject(raw); err != nil {
					return "", err
				}
				if len(bytes.TrimSpace(raw)) == 0 {
					raw = []byte("{}")
				}
				return a.callHost(ctx, "host_tool", struct {
					Name string          `json:"name"`
					Args json.RawMessage `json:"args"`
				}{name, raw})
			},
		})
	}
	return out
}

// checkObject accepts a JSON object (or nothing): the host checks the rest.
func checkObject(raw []byte) error {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil || m == nil {
		return errors.New("arguments must be a JSON object")
	}
	return nil
}
