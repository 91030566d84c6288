package debezium

import (
	"fmt"
	"strings"
)

// The Java stores Debezium Server's NATS JetStream, RabbitMQ and Redis
// sinks take for TLS, read into --*-tls-ca and --*-tls-cert with their
// passwords, when and as each sink uses them:
//
//   - NATS JetStream: auth.tls.keystore is one store for both the client's
//     key and the certificates it trusts, opened with
//     auth.tls.keystore.password, its key with auth.tls.password; used only
//     when neither auth.jwt nor auth.user is set.
//   - RabbitMQ (amqp-client's keys under connection.): ssl.key.store and
//     ssl.trust.store with their .password and .type (PKCS12 and JKS by
//     default), used with ssl.enabled=true.
//   - Redis: ssl.keystore.path and ssl.truststore.path with their .password
//     and .type (JKS by default), used with ssl.enabled=true and a path.
//
// A store type other than JKS or PKCS12 is refused.
type sinkStore struct {
	typ               string // debezium.sink.type
	sink, enabled     string // the sink's key prefix; its TLS switch, "" for none
	flags             string // the flags' prefix: nats-tls, rabbitmq-tls, redis-tls
	trust, key        storeKeys
	keyPassword       string // the key's own password, "" for none
	unusedWhenPresent []string
}

// storeKeys are one store's keys, relative to the sink's prefix.
type storeKeys struct{ path, password, typ string }

var sinkStores = []sinkStore{
	{typ: "nats-jetstream", sink: natsSink, flags: "nats-tls",
		trust:       storeKeys{"auth.tls.keystore", "auth.tls.keystore.password", ""},
		key:         storeKeys{"auth.tls.keystore", "auth.tls.keystore.password", ""},
		keyPassword: "auth.tls.password", unusedWhenPresent: []string{"auth.jwt", "auth.user"}},
	{typ: "rabbitmq", sink: rabbitSink, enabled: "connection.ssl.enabled", flags: "rabbitmq-tls",
		trust: storeKeys{"connection.ssl.trust.store", "connection.ssl.trust.store.password", "connection.ssl.trust.store.type"},
		key:   storeKeys{"connection.ssl.key.store", "connection.ssl.key.store.password", "connection.ssl.key.store.type"}},
	{typ: "redis", sink: redisSink, enabled: "ssl.enabled", flags: "redis-tls",
		trust: storeKeys{"ssl.truststore.path", "ssl.truststore.password", "ssl.truststore.type"},
		key:   storeKeys{"ssl.keystore.path", "ssl.keystore.password", "ssl.keystore.type"}},
}

// storeKey tells a key sinkStores reads.
func storeKey(k string) bool {
	for _, s := range sinkStores {
		for _, name := range []string{s.trust.path, s.trust.password, s.trust.typ, s.key.path, s.key.password, s.key.typ, s.keyPassword} {
			if name != "" && k == s.sink+name {
				return true
			}
		}
	}
	return false
}

// sinkStores reads the stores of the configured sink.
func (c config) sinkStores(r *reading) {
	get := func(k string) (string, bool) {
		v, ok := c.other[k]
		return strings.TrimSpace(v), ok && strings.TrimSpace(v) != ""
	}
	sinkType, _ := get("debezium.sink.type")
	for _, s := range sinkStores {
		why := ""
		if sinkType != s.typ {
			why = "debezium.sink.type is not " + s.typ
		} else if on, _ := get(s.sink + s.enabled); s.enabled != "" && !strings.EqualFold(on, "true") {
			why = s.sink + s.enabled + " is not true"
		}
		if why != "" {
			for k := range c.other {
				if storeKey(k) && strings.HasPrefix(k, s.sink) {
					r.ignore(k + " (" + why + ")")
				}
			}
			continue
		}
		unused := ""
		for _, k := range s.unusedWhenPresent {
			if _, ok := get(s.sink + k); ok {
				unused = s.sink + k
			}
		}
		for _, st := range []struct {
			keys storeKeys
			flag string
		}{{s.trust, s.flags + "-ca"}, {s.key, s.flags + "-cert"}} {
			path, ok := get(s.sink + st.keys.path)
			if !ok {
				continue
			}
			if unused != "" {
				r.ignore(s.sink + st.keys.path + " (unused with " + unused + ", as Debezium Server leaves it)")
				continue
			}
			if st.keys.typ != "" {
				if typ, ok := get(s.sink + st.keys.typ); ok && !strings.EqualFold(typ, "JKS") && !strings.EqualFold(typ, "PKCS12") {
					r.refuse(s.sink+st.keys.typ, fmt.Sprintf("%q: pgoutbox reads JKS and PKCS12 stores", typ))
					continue
				}
			}
			r.set(st.flag, path)
			if pw, ok := get(s.sink + st.keys.password); ok {
				r.set(st.flag+"-password", pw)
			}
		}
		if pw, ok := get(s.sink + s.keyPassword); ok && s.keyPassword != "" && unused == "" {
			r.set(s.flags+"-key-password", pw)
		}
	}
}
