package corpusrun

import (
	"bytes"
	"encoding/json"
	"strings"
)

// NullJSONPath sets the field at path of a JSON value to null, leaving
// every other byte as it was (re-encoding would hide escaping
// differences); a value without the path is left as it is.
func NullJSONPath(v []byte, path []string) []byte {
	dec := json.NewDecoder(bytes.NewReader(v))
	for depth, seg := range path {
		if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
			return v
		}
		found := false
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return v
			}
			if k, _ := kt.(string); k == seg {
				found = true
				break
			}
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return v
			}
		}
		if !found {
			return v
		}
		if depth == len(path)-1 {
			var raw json.RawMessage
			if err := dec.Decode(&raw); err != nil {
				return v
			}
			end := dec.InputOffset()
			start := end - int64(len(raw))
			out := append([]byte{}, v[:start]...)
			out = append(out, "null"...)
			return append(out, v[end:]...)
		}
	}
	return v
}

// NullJSONPaths is NullJSONPath for each dot-separated path of paths.
func NullJSONPaths(v []byte, paths []string) []byte {
	for _, p := range paths {
		v = NullJSONPath(v, strings.Split(p, "."))
	}
	return v
}
