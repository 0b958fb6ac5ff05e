package agent

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"strings"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// DecodeToolInput strictly decodes a tool's arguments into dst (a pointer to a
// struct): the input must be one JSON object (empty or null counts as {}),
// with no unknown or duplicate names (matched exactly, as encoding/json/v2
// does), no wrong types, no trailing data, and every name in required present
// and not null. Errors are worded for the model to read.
func DecodeToolInput(raw []byte, dst any, required ...string) error {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		raw = []byte("{}")
	}
	if raw[0] != '{' {
		return errors.New("arguments must be a JSON object")
	}
	// Also refuses trailing data, duplicate names and invalid UTF-8.
	var fields map[string]jsontext.Value
	if err := json.Unmarshal(raw, &fields); err != nil {
		return fmt.Errorf("arguments are not a valid JSON object: %w", err)
	}
	if err := json.Unmarshal(raw, dst, json.RejectUnknownMembers(true)); err != nil {
		var se *json.SemanticError
		if errors.As(err, &se) && se.JSONPointer.LastToken() != "" {
			name := se.JSONPointer.LastToken()
			switch {
			case errors.Is(se.Err, json.ErrUnknownName):
				return fmt.Errorf("unknown argument %q", name)
			case se.GoType != nil:
				return fmt.Errorf("argument %q must be of type %s, got %s", name, jsonTypeName(se.GoType), jsonKindName(se.JSONKind))
			}
		}
		return fmt.Errorf("invalid arguments: %w", err)
	}
	// After decoding, so a misspelled name is reported as unknown, not as missing.
	var missing []string
	for _, name := range required {
		if v, ok := fields[name]; !ok || v.Kind() == 'n' {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("missing required argument(s): %s", strings.Join(missing, ", "))
	}
	return nil
}

// jsonTypeName names a Go type the way a JSON schema would.
func jsonTypeName(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "integer"
	case reflect.Float32, reflect.Float64:
		return "number"
	case reflect.Struct, reflect.Map:
		return "object"
	case reflect.Slice, reflect.Array:
		return "array"
	default:
		return t.Kind().String()
	}
}

// jsonKindName names the kind of a JSON value as a schema would.
func jsonKindName(k jsontext.Kind) string {
	switch k {
	case 't', 'f':
		return "boolean"
	case '{':
		return "object"
	case '[':
		return "array"
	default:
		return k.String() // null, string, number
	}
}
