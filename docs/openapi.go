// Package docs holds the service's API as a document: openapi.yaml, the
// OpenAPI 3.1 description of the contract, written by hand beside the
// prose it sums up, served by the service at GET /openapi.yaml as written
// and at GET /openapi.json as JSON, and held to the truth by
// openapi_test.go, which validates real answers of every route and error
// code against it.
package docs

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"

	"gopkg.in/yaml.v3"
)

//go:embed openapi.yaml
var openapiYAML []byte

// OpenAPIYAML returns the document as written.
func OpenAPIYAML() []byte { return bytes.Clone(openapiYAML) }

// OpenAPIJSON returns the document in JSON, indented, its keys in the
// order they are written in.
func OpenAPIJSON() ([]byte, error) {
	return yamlToJSON(openapiYAML)
}

// yamlToJSON converts a YAML document to JSON, keeping the order of every
// mapping's keys (a map would sort them, and "openapi" and "info" would no
// longer come first). Only what JSON can hold is accepted: string keys,
// and scalars that are strings, integers, floats, booleans or null.
func yamlToJSON(in []byte) ([]byte, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(in, &doc); err != nil {
		return nil, fmt.Errorf("docs: read the YAML: %w", err)
	}
	var out bytes.Buffer
	if err := writeJSON(&out, &doc); err != nil {
		return nil, fmt.Errorf("docs: %w", err)
	}
	var indented bytes.Buffer
	if err := json.Indent(&indented, out.Bytes(), "", "  "); err != nil {
		return nil, fmt.Errorf("docs: indent the JSON: %w", err)
	}
	indented.WriteByte('\n')
	return indented.Bytes(), nil
}

// writeJSON writes n to out as JSON.
func writeJSON(out *bytes.Buffer, n *yaml.Node) error {
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) != 1 {
			return fmt.Errorf("line %d: a document of %d nodes", n.Line, len(n.Content))
		}
		return writeJSON(out, n.Content[0])
	case yaml.AliasNode:
		return writeJSON(out, n.Alias)
	case yaml.MappingNode:
		out.WriteByte('{')
		for i := 0; i+1 < len(n.Content); i += 2 {
			key, value := n.Content[i], n.Content[i+1]
			if key.Kind != yaml.ScalarNode || key.Tag != "!!str" {
				return fmt.Errorf("line %d: a key that is not a string (%s)", key.Line, key.Tag)
			}
			if i > 0 {
				out.WriteByte(',')
			}
			if err := writeScalar(out, key); err != nil {
				return err
			}
			out.WriteByte(':')
			if err := writeJSON(out, value); err != nil {
				return err
			}
		}
		out.WriteByte('}')
		return nil
	case yaml.SequenceNode:
		out.WriteByte('[')
		for i, item := range n.Content {
			if i > 0 {
				out.WriteByte(',')
			}
			if err := writeJSON(out, item); err != nil {
				return err
			}
		}
		out.WriteByte(']')
		return nil
	case yaml.ScalarNode:
		return writeScalar(out, n)
	}
	return fmt.Errorf("line %d: a node of kind %d", n.Line, n.Kind)
}

// writeScalar writes a scalar as the JSON value of its resolved tag.
func writeScalar(out *bytes.Buffer, n *yaml.Node) error {
	var v any
	switch n.Tag {
	case "!!str":
		v = n.Value
	case "!!null":
		v = nil
	case "!!bool", "!!int", "!!float":
		if err := n.Decode(&v); err != nil {
			return fmt.Errorf("line %d: %w", n.Line, err)
		}
	default:
		return fmt.Errorf("line %d: a scalar tagged %s", n.Line, n.Tag)
	}
	// Written as they are: "<" and ">" stay readable, as in the YAML.
	enc := json.NewEncoder(out)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("line %d: %w", n.Line, err)
	}
	out.Truncate(out.Len() - 1) // Encode's newline
	return nil
}
