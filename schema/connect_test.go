package schema

import "testing"

// JSON strings as Jackson writes them in Kafka's JsonConverter, each
// observed in the records Debezium 3.6.1 published (test/compat's escaping
// case): control characters escaped, a character beyond U+FFFF as its
// escaped UTF-16 surrogates, everything else as it is.
func TestAppendJavaString(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`a "q" \ b`, `"a \"q\" \\ b"`},
		{"tab\tnl\ncr\r\b\f", `"tab\tnl\ncr\r\b\f"`},
		{"\x01\x1f\x7f", `"\u0001\u001F` + "\x7f" + `"`},
		{"<script>&amp; \u2028 é", "\"<script>&amp; \u2028 é\""},
		{"🎉!", `"\uD83C\uDF89!"`},
		{"x\U0010FFFF", `"x\uDBFF\uDFFF"`},
	} {
		if got := string(appendJavaString(nil, tc.in)); got != tc.want {
			t.Errorf("%q: got %s, want %s", tc.in, got, tc.want)
		}
		if got := string(appendJavaString(nil, []byte(tc.in))); got != tc.want {
			t.Errorf("%q as bytes: got %s, want %s", tc.in, got, tc.want)
		}
	}
}
