package debezium

import (
	"fmt"
	"net/url"
	"strings"
)

// Login modules and callback handlers of Kafka's clients and of AWS's
// aws-msk-iam-auth.
const (
	plainLoginModule  = "org.apache.kafka.common.security.plain.PlainLoginModule"
	scramLoginModule  = "org.apache.kafka.common.security.scram.ScramLoginModule"
	oauthLoginModule  = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
	iamLoginModule    = "software.amazon.msk.auth.iam.IAMLoginModule"
	iamClientCallback = "software.amazon.msk.auth.iam.IAMClientCallbackHandler"
)

// oauthLoginCallbacks are Kafka's token endpoint handler, by its 3.x-4.x
// name and the older one under .secured.
var oauthLoginCallbacks = []string{
	"org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler",
	"org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerLoginCallbackHandler",
}

// security reads security.protocol and, as Kafka does, the ssl.* settings
// with SSL and the sasl.* ones with SASL; the others are ignored then.
func (r *reading) security(p map[string]keyValue) {
	protocol := "PLAINTEXT"
	if kv, ok := p["security.protocol"]; ok {
		protocol = strings.ToUpper(kv.value)
		switch protocol {
		case "PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL":
		default:
			r.refuse(kv.key, fmt.Sprintf("%q: want PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL", kv.value))
			return
		}
	}
	tls, sasl := strings.HasSuffix(protocol, "SSL"), strings.HasPrefix(protocol, "SASL_")
	for name, kv := range p {
		if !tls && strings.HasPrefix(name, "ssl.") || !sasl && strings.HasPrefix(name, "sasl.") {
			r.ignore(kv.key + " (security.protocol=" + protocol + ")")
		}
	}
	if tls {
		r.set("kafka-tls", "true")
		r.stores(p)
	}
	if sasl {
		r.sasl(p)
	}
}

// stores reads the trust store and the key store: JKS and PKCS12 stores
// with their passwords, or PEM files.
func (r *reading) stores(p map[string]keyValue) {
	for _, name := range []string{"ssl.keystore.key", "ssl.keystore.certificate.chain", "ssl.truststore.certificates"} {
		if kv, ok := p[name]; ok {
			r.refuse(kv.key, producerRefusal(name))
		}
	}
	for _, s := range []struct{ store, flag string }{{"truststore", "kafka-tls-ca"}, {"keystore", "kafka-tls-cert"}} {
		loc, ok := p["ssl."+s.store+".location"]
		if !ok {
			continue
		}
		typ := "JKS" // Kafka's default
		typKey := "ssl." + s.store + ".type"
		if kv, typed := p[typKey]; typed {
			typ, typKey = strings.ToUpper(strings.TrimSpace(kv.value)), kv.key
		}
		switch typ {
		case "PEM":
			r.set(s.flag, loc.value)
			if s.store == "keystore" {
				r.set("kafka-tls-key", loc.value) // the key and the chain in one file
				if kv, ok := p["ssl.key.password"]; ok {
					r.refuse(kv.key, producerRefusal("ssl.key.password"))
				}
			}
		case "JKS", "PKCS12":
			r.set(s.flag, loc.value)
			if kv, ok := p["ssl."+s.store+".password"]; ok {
				r.set(s.flag+"-password", kv.value)
			}
			if kv, ok := p["ssl.key.password"]; ok && s.store == "keystore" {
				r.set("kafka-tls-key-password", kv.value)
			}
		default:
			r.refuse(typKey, fmt.Sprintf("%q: pgoutbox reads JKS, PKCS12 and PEM stores", typ))
		}
	}
}

// producerRefusal is a producer row's Refuses text.
func producerRefusal(name string) string {
	for _, p := range producerRows {
		if p.key == name {
			return p.refuses
		}
	}
	return ""
}

// sasl reads sasl.mechanism and its login module.
func (r *reading) sasl(p map[string]keyValue) {
	mech := "GSSAPI"
	mechKey := "sasl.mechanism"
	if kv, ok := p["sasl.mechanism"]; ok {
		mech, mechKey = strings.ToUpper(kv.value), kv.key
	}
	jaas, ok := p["sasl.jaas.config"]
	var entry jaasEntry
	if ok {
		var err error
		if entry, err = parseJAAS(jaas.value); err != nil {
			r.refuse(jaas.key, err.Error())
			return
		}
	}
	want := map[string]string{"PLAIN": plainLoginModule, "SCRAM-SHA-256": scramLoginModule, "SCRAM-SHA-512": scramLoginModule,
		"OAUTHBEARER": oauthLoginModule, "AWS_MSK_IAM": iamLoginModule}[mech]
	switch {
	case want == "":
		r.refuse(mechKey, fmt.Sprintf("%q: pgoutbox takes PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER and AWS_MSK_IAM (no Kerberos)", mech))
		return
	case !ok && mech != "OAUTHBEARER":
		r.refuse(mechKey, fmt.Sprintf("%s without sasl.jaas.config", mech))
		return
	case ok && entry.class != want:
		r.refuse(jaas.key, fmt.Sprintf("login module %s: %s takes %s", entry.class, mech, want))
		return
	}
	r.set("kafka-sasl-mechanism", mech)
	switch mech {
	case "OAUTHBEARER":
		r.oauth(p, entry)
	case "AWS_MSK_IAM":
		r.awsIAM(p, entry)
	default:
		r.set("kafka-username", entry.options["username"])
		r.set("kafka-password", entry.options["password"])
	}
}

// oauth reads the token endpoint and the client credentials.
func (r *reading) oauth(p map[string]keyValue, entry jaasEntry) {
	endpoint, ok := p["sasl.oauthbearer.token.endpoint.url"]
	if !ok {
		key := "sasl.oauthbearer.token.endpoint.url"
		if m, ok := p["sasl.mechanism"]; ok {
			key = m.key
		}
		r.refuse(key, "OAUTHBEARER without sasl.oauthbearer.token.endpoint.url: Kafka's unsecured development tokens; pgoutbox takes tokens from a token endpoint")
		return
	}
	if u, err := url.Parse(endpoint.value); err != nil || u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		r.refuse(endpoint.key, "want an http or https URL")
		return
	}
	if kv, ok := p["sasl.login.callback.handler.class"]; ok && !contains(oauthLoginCallbacks, kv.value) {
		r.refuse(kv.key, fmt.Sprintf("%q: pgoutbox takes tokens from the token endpoint, as %s does", kv.value, oauthLoginCallbacks[0]))
	}
	r.set("kafka-oauth-token-url", endpoint.value)
	for opt, flag := range map[string]string{"clientId": "kafka-oauth-client-id", "clientSecret": "kafka-oauth-client-secret", "scope": "kafka-oauth-scope"} {
		if v, ok := entry.options[opt]; ok {
			r.set(flag, v)
		}
	}
}

// awsIAM reads aws-msk-iam-auth's options.
func (r *reading) awsIAM(p map[string]keyValue, entry jaasEntry) {
	if kv, ok := p["sasl.client.callback.handler.class"]; ok && kv.value != iamClientCallback {
		r.refuse(kv.key, fmt.Sprintf("%q: AWS_MSK_IAM takes %s", kv.value, iamClientCallback))
	}
	flags := map[string]string{"awsProfileName": "kafka-aws-profile", "awsRoleArn": "kafka-aws-role-arn",
		"awsRoleSessionName": "kafka-aws-role-session-name", "awsStsRegion": "kafka-aws-sts-region"}
	for opt, v := range entry.options {
		if flag, ok := flags[opt]; ok {
			r.set(flag, v)
		} else {
			r.ignore(p["sasl.jaas.config"].key + " " + opt)
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
