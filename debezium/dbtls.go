package debezium

import (
	"crypto/ecdsa"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
)

// pgjdbcHome is where pgjdbc looks for the files a configuration does not
// name: ~/.postgresql (Java's user.home).
func pgjdbcHome(name string) string {
	home, err := os.UserHomeDir()
	if err != nil {
		return ""
	}
	return filepath.Join(home, ".postgresql", name)
}

// pkcs12Key tells whether pgjdbc reads the key file as PKCS-12, which holds
// the certificate too: by its name, as pgjdbc's LibPQFactory decides.
func pkcs12Key(name string) bool {
	return strings.HasSuffix(name, ".p12") || strings.HasSuffix(name, ".pfx")
}

// tlsParams are the connection URL's settings of the database.ssl* options,
// read as pgjdbc (the driver Debezium runs) reads them; the key formats pgx
// does not read are loaded at start (cmd/pgoutbox's dbtls.go).
func (d dbOptions) tlsParams() url.Values {
	q := url.Values{}
	if d.sslmode != "" {
		q.Set("sslmode", d.sslmode)
	}
	if d.sslmode == "disable" {
		return q
	}
	switch d.sslmode {
	case "verify-ca", "verify-full":
		// pgjdbc checks the server against sslrootcert or its default
		// file only, never the system's roots.
		root := d.rootCert
		if root == "" {
			root = pgjdbcHome("root.crt")
		}
		q.Set("sslrootcert", root)
	case "require":
		// pgjdbc does not check the server's certificate under require,
		// where pgx (as libpq) checks it against any root certificate,
		// its default file included: none is given.
		q.Set("sslrootcert", "")
	}
	if d.nonValidating != "" {
		// pgjdbc's NonValidatingFactory has no client certificate.
		return q
	}
	key, cert := d.key, d.cert
	switch {
	case key != "" && pkcs12Key(key):
		cert = ""
	case key != "" && cert == "":
		cert = pgjdbcHome("postgresql.crt")
	case key == "" && cert != "":
		// pgjdbc's default key file; without it, no client certificate.
		key = pgjdbcHome("postgresql.pk8")
		if _, err := os.Stat(key); err != nil {
			key, cert = "", ""
		}
	}
	if key != "" {
		q.Set("sslkey", key)
		if cert != "" {
			q.Set("sslcert", cert)
		}
		if d.keyPassword != "" {
			q.Set("sslpassword", d.keyPassword)
		}
	}
	return q
}

// checkKey refuses a client key that pgjdbc cannot read as the name of its
// file makes it read it: a .key or .pem file as an unencrypted PKCS-8 PEM
// key of database.pemKeyAlgorithm, any other name but .p12 and .pfx as
// PKCS-8 DER. A file it cannot read is left to the start, which names it.
func (d dbOptions) checkKey(r *reading) {
	if d.key == "" || d.nonValidating != "" || d.sslmode == "disable" || pkcs12Key(d.key) {
		return
	}
	data, err := os.ReadFile(d.key)
	if err != nil {
		return
	}
	block, _ := pem.Decode(data)
	if !strings.HasSuffix(d.key, ".key") && !strings.HasSuffix(d.key, ".pem") {
		if block != nil {
			r.refuse(d.keyOption, d.key+": a PEM key, which pgjdbc reads as PKCS-8 DER by its name (Debezium's connector fails); name it .key or .pem, or convert it: openssl pkcs8 -topk8 -outform DER")
		}
		return
	}
	if block == nil || block.Type != "PRIVATE KEY" {
		r.refuse(d.keyOption, d.key+": pgjdbc reads a key named .key or .pem as an unencrypted PKCS-8 PEM key (BEGIN PRIVATE KEY), and Debezium's connector fails on this one (Could not load the private key); convert it: openssl pkcs8 -topk8 -nocrypt")
		return
	}
	key, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		r.refuse(d.keyOption, d.key+": not a PKCS-8 key")
		return
	}
	var alg string
	switch key.(type) {
	case *rsa.PrivateKey:
		alg = "RSA"
	case *ecdsa.PrivateKey:
		alg = "EC"
	default:
		alg = fmt.Sprintf("%T", key)
	}
	want := d.pemAlgorithm
	if want == "" {
		want = "RSA"
	}
	if !strings.EqualFold(alg, want) {
		r.refuse(d.keyOption, fmt.Sprintf("%s: an %s key, which pgjdbc reads as %s (database.pemKeyAlgorithm), and Debezium's connector fails (Could not load the private key); set database.pemKeyAlgorithm=%s", d.key, alg, want, alg))
	}
}

// checkTLS refuses the combinations of the database.ssl* options pgoutbox
// cannot honour.
func (d dbOptions) checkTLS(r *reading) {
	d.checkKey(r)
	if d.nonValidating != "" && (d.sslmode == "verify-ca" || d.sslmode == "verify-full") {
		r.refuse(d.nonValidating, nonValidatingFactory+" with sslmode="+d.sslmode+
			": pgjdbc then checks the server's host name but not its certificate's CA, a check pgoutbox does not make; use org.postgresql.ssl.LibPQFactory with database.sslrootcert, or sslmode=require")
	}
}
