package schema

import "strings"

// The trace context a row carries, as W3C Trace Context headers
// (https://www.w3.org/TR/trace-context/): traceparent is
// version-traceid-parentid-flags in lower-case hex, 00-<32>-<16>-<2> for
// version 00; tracestate is a list of vendor entries passed on as is.

// parseTraceContext reads a trace column's value: a bare traceparent, or
// java.util.Properties text with traceparent and tracestate keys (what
// Debezium's tracing.span.context.field holds, as the Quarkus outbox
// extension writes it). A value without a valid traceparent gives none:
// the event still goes out, untraced, as OpenTelemetry's propagators
// ignore an invalid one.
func parseTraceContext(v []byte) (parent, state string) {
	s := strings.TrimSpace(string(v))
	if validTraceParent(s) {
		return s, ""
	}
	props, err := ParseProperties([]byte(s))
	if err != nil {
		return "", ""
	}
	parent = strings.TrimSpace(props["traceparent"])
	if !validTraceParent(parent) {
		return "", ""
	}
	return parent, strings.TrimSpace(props["tracestate"])
}

// validTraceParent checks a traceparent as the W3C recommendation's
// parsing rules do: version 00 is exactly 55 characters; a later version
// may carry more fields after a dash; version ff, an all-zero trace id or
// an all-zero parent id is invalid.
func validTraceParent(s string) bool {
	if len(s) < 55 || (len(s) > 55 && (s[:2] == "00" || s[55] != '-')) {
		return false
	}
	if s[2] != '-' || s[35] != '-' || s[52] != '-' || s[:2] == "ff" {
		return false
	}
	for _, part := range []string{s[:2], s[3:35], s[36:52], s[53:55]} {
		for i := 0; i < len(part); i++ {
			if c := part[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
				return false
			}
		}
	}
	return strings.Trim(s[3:35], "0") != "" && strings.Trim(s[36:52], "0") != ""
}
