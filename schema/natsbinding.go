package schema

import "strings"

// Protocol is a CloudEvents protocol binding: how the attributes of an
// event in the binary content mode are carried as message headers.
type Protocol string

// The bindings.
const (
	// ProtocolKafka: ce_<attribute> headers holding the attribute's text,
	// datacontenttype as content-type (Kafka protocol binding 1.0).
	ProtocolKafka Protocol = "kafka"
	// ProtocolNATS: ce-<attribute> headers, percent-encoded, and
	// datacontenttype as ce-datacontenttype (NATS protocol binding 1.0.3,
	// section 3.1). The structured mode is the same in both: the event in
	// the JSON event format, with a content-type of
	// application/cloudevents+json, which a NATS receiver takes for the
	// structured mode.
	ProtocolNATS Protocol = "nats"
)

// natsBinary turns the Kafka binding's binary-mode headers into the NATS
// binding's, in place.
func natsBinary(hs []Header) {
	for i := range hs {
		h := &hs[i]
		switch {
		case h.Key == "content-type":
			h.Key = "ce-datacontenttype"
		case strings.HasPrefix(h.Key, "ce_"):
			h.Key = "ce-" + h.Key[3:]
			h.Value = percentEncode(h.Value)
		}
	}
}

// percentEncode encodes, byte by byte of its UTF-8, the characters a NATS
// header value must not carry as they are: space, double quote, percent,
// and everything outside printable ASCII (NATS binding 3.1.3.2), with
// upper-case hexadecimal digits. A value with none of them is returned as
// it is.
func percentEncode(v []byte) []byte {
	n := 0
	for _, c := range v {
		if mustEncode(c) {
			n++
		}
	}
	if n == 0 {
		return v
	}
	const hex = "0123456789ABCDEF"
	out := make([]byte, 0, len(v)+2*n)
	for _, c := range v {
		if mustEncode(c) {
			out = append(out, '%', hex[c>>4], hex[c&15])
		} else {
			out = append(out, c)
		}
	}
	return out
}

func mustEncode(c byte) bool { return c <= ' ' || c >= 0x7f || c == '"' || c == '%' }
