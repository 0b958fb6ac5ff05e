package agent

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// DecodeToolInput strictly decodes a tool's arguments into dst (a pointer to a
// struct): the input must be one JSON object (empty or null counts as {}),
// with no unknown fields, no wrong types, no trailing data, and every name in
// required present and not null. Errors are worded for the model to read.
func DecodeToolInput(raw []byte, dst any, required ...string) error {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		raw = []byte("{}")
	}
	if raw[0] != '{' {
		return errors.New("arguments must be a JSON object")
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return fmt.Errorf("arguments are not a valid JSON object: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) && typeErr.Field != "" && typeErr.Type != nil {
			return fmt.Errorf("argument %q must be of type %s, got %s", typeErr.Field, jsonTypeName(typeErr.Type.Kind().String()), typeErr.Value)
		}
		if msg, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
			return fmt.Errorf("unknown argument %s", msg)
		}
		return fmt.Errorf("invalid arguments: %w", err)
	}
	if dec.More() {
		return errors.New("arguments have trailing data after the JSON object")
	}
	// After decoding, so a misspelled name is reported as unknown, not as missing.
	var missing []string
	for _, name := range required {
		if v, ok := fields[name]; !ok || string(v) == "null" {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("missing required argument(s): %s", strings.Join(missing, ", "))
	}
	return nil
}

// jsonTypeName names a Go kind the way a JSON schema would.
func jsonTypeName(kind string) string {
	switch kind {
	case "string":
		return "string"
	case "bool":
		return "boolean"
	case "int", "int8", "int16", "int32", "int64", "uint", "uint8", "uint16", "uint32", "uint64":
		return "integer"
	case "float32", "float64":
		return "number"
	case "struct", "map":
		return "object"
	case "slice", "array":
		return "array"
	default:
		return kind
	}
}
