package main

import (
	"flag"
	"fmt"
	"strings"

	"github.com/pgoutbox/pgoutbox/registry"
)

// registryFlags are one avro converter's schema registry flags
// (--key-registry-*, --value-registry-*).
type registryFlags struct {
	part               string
	url, api, useID    string
	headers, autoReg   bool
	findLatest         bool
	idSize             int
	user, password, ca string
}

func registerRegistryFlags(fs *flag.FlagSet, part string) *registryFlags {
	r := &registryFlags{part: part}
	p := part + "-registry-"
	fs.StringVar(&r.url, p+"url", "", part+" converter avro: the schema registry's API, e.g. http://registry:8080/apis/registry/v2 (Apicurio apicurio.registry.url; Confluent schema.registry.url)")
	fs.StringVar(&r.api, p+"api", string(registry.Apicurio), part+" converter avro: apicurio (Apicurio's AvroConverter) or confluent (Confluent's AvroConverter, the Confluent-compatible API)")
	fs.BoolVar(&r.headers, p+"headers", true, part+" converter avro, apicurio: the schema id in apicurio.* headers, the datum bare (apicurio.registry.headers.enabled)")
	fs.IntVar(&r.idSize, p+"id-size", 0, part+" converter avro: the id's bytes after the magic byte, 8 (apicurio's default) or 4 (apicurio.registry.as-confluent, and confluent)")
	fs.StringVar(&r.useID, p+"use-id", "globalId", part+" converter avro, apicurio: the id written, globalId or contentId (apicurio.registry.use-id)")
	fs.BoolVar(&r.autoReg, p+"auto-register", true, part+" converter avro: register a new schema; false looks it up and dead-letters a record whose schema is not registered (auto-register, auto.register.schemas)")
	fs.BoolVar(&r.findLatest, p+"find-latest", false, part+" converter avro, apicurio, auto-register false: the subject's latest version (apicurio.registry.find-latest)")
	fs.StringVar(&r.user, p+"user", "", part+" converter avro: the registry's basic auth user")
	fs.StringVar(&r.password, p+"password", "", part+" converter avro: the registry's basic auth password")
	fs.StringVar(&r.ca, p+"ca-file", "", part+" converter avro: PEM file of the CAs of the registry's https certificate")
	return r
}

// config is the registry's configuration, nil without --PART-registry-url.
func (r *registryFlags) config() (*registry.Config, error) {
	if r.url == "" {
		return nil, nil
	}
	c := &registry.Config{URL: r.url, API: registry.API(r.api), Headers: r.headers, IDSize: r.idSize,
		NoAutoRegister: !r.autoReg, FindLatest: r.findLatest, Username: r.user, Password: r.password, CAFile: r.ca}
	switch r.useID {
	case "globalId":
	case "contentId":
		c.ContentID = true
	default:
		return nil, fmt.Errorf("--%s-registry-use-id %q: use globalId or contentId", r.part, r.useID)
	}
	if c.API == registry.Confluent {
		c.Headers = false
	}
	c.Defaults()
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("--%s-registry-*: %w", r.part, err)
	}
	return c, nil
}

// The registry converters pgoutbox implements.
const (
	apicurioAvroConverter  = "io.apicurio.registry.utils.converter.AvroConverter"
	confluentAvroConverter = "io.confluent.connect.avro.AvroConverter"
	binaryDataConverter    = "io.debezium.converters.BinaryDataConverter"
)

// registryOptions maps an avro converter's options (opts, its
// key.converter.* without the prefix) to --PART-registry-* settings; a
// BinaryDataConverter's are its delegate's. name spells an option as the
// configuration does, for ignored and refused. It returns nothing for
// other converters.
func registryOptions(part, class string, opts map[string]string, name func(string) string) (out []setting, ignored, refused []string) {
	if class == binaryDataConverter {
		class = opts["delegate.converter.type"]
		sub := map[string]string{}
		for k, v := range opts {
			if rest, ok := strings.CutPrefix(k, "delegate.converter.type."); ok {
				sub[rest] = v
			}
		}
		opts = sub
		inner := name
		name = func(k string) string { return inner("delegate.converter.type." + k) }
	}
	set := func(flag, v string) { out = append(out, setting{key: part + "-registry-" + flag, value: v}) }
	refuse := func(k, why string) { refused = append(refused, name(k)+": "+why) }
	boolOpt := func(k, flag string) {
		switch v := strings.ToLower(strings.TrimSpace(opts[k])); v {
		case "true", "false":
			set(flag, v)
		default:
			refuse(k, fmt.Sprintf("%q: want true or false", opts[k]))
		}
	}
	switch class {
	case apicurioAvroConverter:
		if _, ok := opts["apicurio.registry.url"]; !ok {
			refuse("apicurio.registry.url", "the converter needs the registry's URL")
		}
		if _, ok := opts["apicurio.registry.auto-register"]; !ok {
			set("auto-register", "false") // Apicurio's default, unlike Confluent's
		}
		for _, k := range sortedKeys(opts) {
			v := strings.TrimSpace(opts[k])
			switch k {
			case "apicurio.registry.url":
				set("url", v)
			case "apicurio.registry.auto-register":
				boolOpt(k, "auto-register")
			case "apicurio.registry.find-latest":
				boolOpt(k, "find-latest")
			case "apicurio.registry.headers.enabled":
				boolOpt(k, "headers")
			case "apicurio.registry.as-confluent":
				if strings.EqualFold(v, "true") {
					set("id-size", "4")
				}
			case "apicurio.registry.id-handler":
				switch v {
				case "io.apicurio.registry.serde.Legacy4ByteIdHandler":
					set("id-size", "4")
				case "io.apicurio.registry.serde.DefaultIdHandler":
				default:
					refuse(k, fmt.Sprintf("%q: pgoutbox implements DefaultIdHandler and Legacy4ByteIdHandler", v))
				}
			case "apicurio.registry.use-id":
				set("use-id", v)
			case "apicurio.auth.username":
				set("user", v)
			case "apicurio.auth.password":
				set("password", v)
			case "apicurio.registry.artifact-resolver-strategy":
				if v != "io.apicurio.registry.serde.strategy.TopicIdStrategy" {
					refuse(k, fmt.Sprintf("%q: pgoutbox implements the default, TopicIdStrategy (<topic>-key, <topic>-value)", v))
				}
			case "apicurio.registry.avro.encoding":
				if !strings.EqualFold(v, "BINARY") {
					refuse(k, fmt.Sprintf("%q: pgoutbox writes Avro's binary encoding only", v))
				}
			default:
				ignored = append(ignored, name(k))
			}
		}
		set("api", string(registry.Apicurio))
	case confluentAvroConverter:
		if _, ok := opts["schema.registry.url"]; !ok {
			refuse("schema.registry.url", "the converter needs the registry's URL")
		}
		for _, k := range sortedKeys(opts) {
			v := strings.TrimSpace(opts[k])
			switch k {
			case "schema.registry.url":
				if strings.Contains(v, ",") {
					refuse(k, "pgoutbox takes one registry URL")
				}
				set("url", v)
			case "auto.register.schemas":
				boolOpt(k, "auto-register")
			case "basic.auth.credentials.source":
				if v != "USER_INFO" {
					refuse(k, fmt.Sprintf("%q: pgoutbox implements USER_INFO (basic.auth.user.info)", v))
				}
			case "basic.auth.user.info":
				user, pass, _ := strings.Cut(v, ":")
				set("user", user)
				set("password", pass)
			case "key.subject.name.strategy", "value.subject.name.strategy":
				if !strings.HasSuffix(v, ".TopicNameStrategy") {
					refuse(k, fmt.Sprintf("%q: pgoutbox implements the default, TopicNameStrategy", v))
				}
			default:
				ignored = append(ignored, name(k))
			}
		}
		set("api", string(registry.Confluent))
	}
	return out, ignored, refused
}
