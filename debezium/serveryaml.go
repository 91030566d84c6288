package debezium

import (
	"bytes"
	"errors"
	"io"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Debezium Server also reads its configuration from config/application.yaml
// (its distribution ships application.yaml.example), as SmallRye Config's
// YAML source flattens it, checked with the distribution's own jars:
//   - nested keys join with '.'; a key holding a '.' is one segment,
//     written in quotes (debezium.source."connector.class"), which no
//     option of Debezium's is: Debezium Server passes it on as it is;
//   - a ~ key gives its map's own value (transforms: {~: outbox, outbox: …});
//   - a list of scalars is their text joined by ',' (a ',' or a '\'
//     within one escaped, a null left out), and each element is also
//     key[i];
//   - every document is read, a later one's keys over an earlier one's;
//     a merge key (<<: *anchor) brings in the anchored map's keys, the
//     map's own winning;
//   - a plain yes, no, on, off, true or false (any of YAML 1.1's
//     spellings) is true or false, a key so written too; a number stays
//     as written; null and ~ give no key.

// serverYAML is data's keys as Debezium Server reads them from an
// application.yaml; ok is false when data is no YAML map or holds no key
// under debezium.
func serverYAML(data []byte) (props map[string]string, ok bool) {
	props = map[string]string{}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		// Every document, a later one's keys over an earlier one's, as
		// the YAML source loads them all.
		var doc yaml.Node
		if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
			break
		} else if err != nil || len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
			return nil, false
		}
		flattenYAML(doc.Content[0], "", props)
	}
	return props, hasServerKeys(props)
}

func flattenYAML(n *yaml.Node, path string, out map[string]string) {
	if n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	switch n.Kind {
	case yaml.MappingNode:
		// A merge key's maps first, the first of them last, so that an
		// earlier one's keys and the map's own win, as SnakeYAML merges.
		for i := 0; i+1 < len(n.Content); i += 2 {
			if k, v := n.Content[i], n.Content[i+1]; k.Tag == "!!merge" {
				merged := []*yaml.Node{v}
				if v.Kind == yaml.SequenceNode {
					merged = v.Content
				}
				for j := len(merged) - 1; j >= 0; j-- {
					flattenYAML(merged[j], path, out)
				}
			}
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Tag == "!!merge" {
				continue
			}
			key := path
			if k.Tag != "!!null" {
				seg := yamlScalar(k)
				if strings.Contains(seg, ".") {
					seg = `"` + seg + `"`
				}
				key = joinKey(path, seg)
			}
			flattenYAML(v, key, out)
		}
	case yaml.SequenceNode:
		var texts []string
		scalars := true
		for i, c := range n.Content {
			if c.Kind == yaml.AliasNode {
				c = c.Alias
			}
			flattenYAML(c, path+"["+strconv.Itoa(i)+"]", out)
			switch {
			case c.Kind == yaml.ScalarNode && c.Tag == "!!null":
				// No value, and none in the joined text either.
			case c.Kind == yaml.ScalarNode:
				texts = append(texts, listEscaper.Replace(yamlScalar(c)))
			default:
				scalars = false
			}
		}
		if scalars {
			out[path] = strings.Join(texts, ",")
		}
	case yaml.ScalarNode:
		if n.Tag != "!!null" {
			out[path] = yamlScalar(n)
		}
	}
}

// yamlScalar is a scalar's text as SnakeYAML gives it: YAML 1.1's
// booleans as true or false, anything else as written.
func yamlScalar(n *yaml.Node) string {
	if n.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle|yaml.LiteralStyle|yaml.FoldedStyle) == 0 {
		switch n.Value {
		case "yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON":
			return "true"
		case "no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF":
			return "false"
		}
	}
	return n.Value
}

// listEscaper escapes a list element within the joined text, as the YAML
// source does: \ and , each behind a \.
var listEscaper = strings.NewReplacer(`\`, `\\`, ",", `\,`)

func joinKey(path, seg string) string {
	if path == "" {
		return seg
	}
	return path + "." + seg
}
