package agent

import "fmt"

// The tools as the tests of package agent_test see them.

// ToolNames lists every tool the agent offers, in the order offered.
func ToolNames() []string {
	var r runner
	var names []string
	for _, t := range r.toolSet() {
		names = append(names, t.def.Name)
	}
	return names
}

// CheckToolInput strictly decodes raw as the arguments of the named tool
// without running it.
func CheckToolInput(name string, raw []byte) error {
	var r runner
	for _, t := range r.toolSet() {
		if t.def.Name == name {
			return t.check(raw)
		}
	}
	return fmt.Errorf("unknown tool %q", name)
}
