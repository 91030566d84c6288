package debezium

import (
	"slices"
	"strings"
	"testing"
)

func TestMessagePrefixes(t *testing.T) {
	const decode = `"transforms": "decode,outbox", "transforms.decode.type": "io.debezium.connector.postgresql.transforms.DecodeLogicalDecodingMessageContent",
  "transforms.outbox.type": "io.debezium.transforms.outbox.EventRouter",`
	for _, tc := range []struct {
		name, conf string
		flag, want string // want "": not set
		ignored    bool
		refused    string
	}{
		{name: "with the decode", conf: decode + `"message.prefix.include.list": "outbox,orders"`, flag: "message-prefix", want: "outbox,orders"},
		{name: "exclude with the decode", conf: decode + `"message.prefix.exclude.list": "audit"`, flag: "message-prefix-exclude", want: "audit"},
		{name: "alias", conf: `"transforms": "decode,outbox", "transforms.decode.type": "DecodeLogicalDecodingMessageContent",
  "transforms.outbox.type": "io.debezium.transforms.outbox.EventRouter", "message.prefix.include.list": "outbox"`, flag: "message-prefix", want: "outbox"},
		{name: "both lists", conf: decode + `"message.prefix.include.list": "outbox", "message.prefix.exclude.list": "audit"`, refused: "Debezium refuses the two together"},
		{name: "both lists without the decode", conf: `"message.prefix.include.list": "outbox", "message.prefix.exclude.list": "audit"`, refused: "Debezium refuses the two together"},
		{name: "without the decode", conf: `"transforms": "outbox", "transforms.outbox.type": "io.debezium.transforms.outbox.EventRouter",
  "message.prefix.include.list": "outbox"`, flag: "message-prefix", ignored: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr, err := translateConnect(t, `{"connector.class": "io.debezium.connector.postgresql.PostgresConnector", "table.include.list": "public.outbox", `+tc.conf+`}`)
			if tc.refused != "" {
				if err == nil || !strings.Contains(err.Error(), tc.refused) {
					t.Fatalf("err %v, want %q", err, tc.refused)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got, ok := settingOf(tr, tc.flag)
			if ok != (tc.want != "") || got != tc.want {
				t.Errorf("--%s %q (%v), want %q", tc.flag, got, ok, tc.want)
			}
			if slices.Contains(tr.Ignored, "message.prefix.include.list") != tc.ignored {
				t.Errorf("ignored %v", tr.Ignored)
			}
		})
	}
}
