package compat

import (
	"slices"
	"strings"
)

// Transaction metadata (provide.transaction.metadata): Debezium writes a
// BEGIN and an END record per transaction to <topic.prefix>.<topic.transaction>.

// transactionTopic is the configuration's transaction topic after
// <topic.prefix>., when it writes transaction metadata.
func transactionTopic(conf map[string]string) (string, bool) {
	if !strings.EqualFold(strings.TrimSpace(conf["provide.transaction.metadata"]), "true") {
		return "", false
	}
	if t := strings.TrimSpace(conf["topic.transaction"]); t != "" {
		return t, true
	}
	return "transaction", true
}

// withoutFenceTransaction leaves out of Debezium's records (their topics
// under prefix) the BEGIN and END of the fence's transaction, which
// pgoutbox does not publish (its message is the harness's, not an
// event): records of the transaction topic whose key names the fence's
// transaction (<xid>:<lsn>, in whichever converter's form).
func (r *run) withoutFenceTransaction(recs []Record, prefix string) []Record {
	topic, ok := transactionTopic(r.c.DebeziumConfig())
	if !ok || len(r.fenceXIDs) == 0 {
		return recs
	}
	topic = prefix + r.id + "." + topic
	out := recs[:0]
	for _, rec := range recs {
		if rec.Topic == topic && slices.ContainsFunc(r.fenceXIDs, func(x string) bool { return namesTransaction(string(rec.Key), x) }) {
			continue
		}
		out = append(out, rec)
	}
	return out
}

// namesTransaction tells a key that holds xid:<lsn>, xid not part of a
// longer number.
func namesTransaction(key, xid string) bool {
	for at := 0; ; {
		i := strings.Index(key[at:], xid+":")
		if i < 0 {
			return false
		}
		i += at
		if i == 0 || key[i-1] < '0' || key[i-1] > '9' {
			return true
		}
		at = i + 1
	}
}
