package main

import (
	"bytes"
	"crypto/cipher"
	"crypto/des"
	"crypto/md5"
	"crypto/sha1"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/pem"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"unicode/utf16"

	"software.sslmate.com/src/go-pkcs12"
)

// The connection URL's TLS files are read by pgx, which takes PEM only.
// pgjdbc, which Debezium runs, also takes DER certificates, PKCS-8 DER keys
// (encrypted or not) and PKCS-12 files, so a Debezium configuration may
// name them: applyDBTLS loads those at start and hands pgx their PEM form
// in memory, for every connection of the process. Each error names the
// URL's setting and the Debezium option it comes from; none shows the
// key's password.

// applyDBTLS rewrites the TLS files of a postgres:// URL that pgx cannot
// read as they are; it returns the secrets to mask in the logs.
func (c *common) applyDBTLS() ([]string, error) {
	if !strings.HasPrefix(c.databaseURL, "postgres://") && !strings.HasPrefix(c.databaseURL, "postgresql://") {
		return nil, nil
	}
	u, err := url.Parse(c.databaseURL)
	if err != nil {
		return nil, nil // reported as an invalid URL by the caller
	}
	q := u.Query()
	password := q.Get("sslpassword")
	var secrets []string
	if password != "" {
		secrets = []string{password, url.QueryEscape(password), url.PathEscape(password)}
	}
	changed := false
	if root := q.Get("sslrootcert"); root != "" && root != "system" {
		data, err := readTLSFile("sslrootcert", root)
		if err != nil {
			return secrets, err
		}
		if !hasPEM(data) {
			certs, err := x509.ParseCertificates(data)
			if err != nil || len(certs) == 0 {
				return secrets, fmt.Errorf("sslrootcert (database.sslrootcert) %s: neither PEM nor DER certificates", root)
			}
			path, err := memFile("CA certificates", certsPEM(certs))
			if err != nil {
				return secrets, err
			}
			q.Set("sslrootcert", path)
			changed = true
		}
	}
	if keyFile := q.Get("sslkey"); keyFile != "" {
		certPEM, keyPEM, err := loadClientKey(keyFile, q.Get("sslcert"), password)
		if err != nil {
			return secrets, err
		}
		if keyPEM != nil {
			if _, err := tls.X509KeyPair(certPEM, keyPEM); err != nil {
				return secrets, fmt.Errorf("sslkey (database.sslkey) %s does not go with the certificate of sslcert (database.sslcert): %v", keyFile, err)
			}
			keyPath, err := memFile("client key", keyPEM)
			if err != nil {
				return secrets, err
			}
			certPath, err := memFile("client certificate", certPEM)
			if err != nil {
				return secrets, err
			}
			q.Set("sslkey", keyPath)
			q.Set("sslcert", certPath)
			q.Del("sslpassword") // the key in memory is decrypted
			changed = true
		}
	}
	if changed {
		u.RawQuery = q.Encode()
		c.databaseURL = u.String()
	}
	return secrets, nil
}

// loadClientKey reads the client key as pgjdbc does and returns it and its
// certificate as PEM, or nil for a PEM key that pgx reads itself.
func loadClientKey(keyFile, certFile, password string) (certPEM, keyPEM []byte, err error) {
	data, err := readTLSFile("sslkey", keyFile)
	if err != nil {
		return nil, nil, err
	}
	if strings.HasSuffix(keyFile, ".p12") || strings.HasSuffix(keyFile, ".pfx") {
		key, cert, chain, err := pkcs12.DecodeChain(data, password)
		switch {
		case errors.Is(err, pkcs12.ErrIncorrectPassword) && password == "":
			return nil, nil, fmt.Errorf("sslkey (database.sslkey) %s is encrypted: set its password in sslpassword (database.sslpassword)", keyFile)
		case errors.Is(err, pkcs12.ErrIncorrectPassword) || errors.Is(err, pkcs12.ErrDecryption):
			return nil, nil, fmt.Errorf("sslpassword (database.sslpassword) does not decrypt sslkey (database.sslkey) %s", keyFile)
		case err != nil:
			return nil, nil, fmt.Errorf("sslkey (database.sslkey) %s: not a PKCS-12 file with one key and its certificate: %v", keyFile, err)
		}
		keyPEM, err := privatePEM(key)
		if err != nil {
			return nil, nil, fmt.Errorf("sslkey (database.sslkey) %s: %v", keyFile, err)
		}
		return certsPEM(append([]*x509.Certificate{cert}, chain...)), keyPEM, nil
	}
	var key any
	if block, _ := pem.Decode(data); block != nil {
		if block.Type != "ENCRYPTED PRIVATE KEY" {
			return nil, nil, nil // PEM that pgx reads
		}
		data = block.Bytes
	}
	if key, err = x509.ParsePKCS8PrivateKey(data); err != nil {
		var derr error
		key, derr = decryptPKCS8(data, password)
		switch {
		case errors.Is(derr, errNotEncrypted):
			return nil, nil, fmt.Errorf("sslkey (database.sslkey) %s: neither a PEM key, PKCS-12 (a name ending in .p12 or .pfx) nor PKCS-8 DER", keyFile)
		case errors.Is(derr, errNoPassword):
			return nil, nil, fmt.Errorf("sslkey (database.sslkey) %s is encrypted: set its password in sslpassword (database.sslpassword)", keyFile)
		case errors.Is(derr, errWrongPassword):
			return nil, nil, fmt.Errorf("sslpassword (database.sslpassword) does not decrypt sslkey (database.sslkey) %s", keyFile)
		case derr != nil:
			return nil, nil, fmt.Errorf("sslkey (database.sslkey) %s: %v", keyFile, derr)
		}
	}
	if keyPEM, err = privatePEM(key); err != nil {
		return nil, nil, fmt.Errorf("sslkey (database.sslkey) %s: %v", keyFile, err)
	}
	if certFile == "" {
		return nil, nil, fmt.Errorf("sslkey (database.sslkey) %s needs its certificate in sslcert (database.sslcert)", keyFile)
	}
	certData, err := readTLSFile("sslcert", certFile)
	if err != nil {
		return nil, nil, err
	}
	if hasPEM(certData) {
		return certData, keyPEM, nil
	}
	certs, err := x509.ParseCertificates(certData)
	if err != nil || len(certs) == 0 {
		return nil, nil, fmt.Errorf("sslcert (database.sslcert) %s: neither a PEM nor a DER certificate", certFile)
	}
	return certsPEM(certs), keyPEM, nil
}

// readTLSFile reads a file the URL's setting names, saying which when it
// cannot.
func readTLSFile(setting, name string) ([]byte, error) {
	data, err := os.ReadFile(name)
	if err != nil {
		return nil, fmt.Errorf("%s (database.%s): %w", setting, setting, err)
	}
	return data, nil
}

func hasPEM(data []byte) bool {
	block, _ := pem.Decode(data)
	return block != nil
}

func certsPEM(certs []*x509.Certificate) []byte {
	var b bytes.Buffer
	for _, c := range certs {
		_ = pem.Encode(&b, &pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
	}
	return b.Bytes()
}

func privatePEM(key any) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

var (
	errNotEncrypted  = errors.New("not an encrypted PKCS-8 key")
	errNoPassword    = errors.New("no password")
	errWrongPassword = errors.New("wrong password")
)

// PKCS-8 encryption as pgjdbc decrypts it: with a cipher Java names by the
// key's algorithm, which it has for the password-based encryptions of
// PKCS #5 v1.5 and PKCS #12 but not for PBES2 ("Cannot find any provider
// supporting PBES2", seen with Debezium 3.6.1), openssl's default.
var (
	oidPBEMD5DES   = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 5, 3}     // openssl pkcs8 -v1 PBE-MD5-DES
	oidPBESHA13DES = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 12, 1, 3} // openssl pkcs8 -v1 PBE-SHA1-3DES
	oidPBES2       = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 5, 13}
)

type encryptedKeyInfo struct {
	Algorithm pkix.AlgorithmIdentifier
	Data      []byte
}

type pbeParams struct {
	Salt       []byte
	Iterations int
}

// decryptPKCS8 decrypts an EncryptedPrivateKeyInfo.
func decryptPKCS8(der []byte, password string) (any, error) {
	var info encryptedKeyInfo
	if rest, err := asn1.Unmarshal(der, &info); err != nil || len(rest) > 0 {
		return nil, errNotEncrypted
	}
	alg := info.Algorithm.Algorithm
	switch {
	case alg.Equal(oidPBES2):
		return nil, errors.New("encrypted with PBES2 (openssl pkcs8's default), which pgjdbc, the driver Debezium runs, cannot read (\"Cannot find any provider supporting PBES2\"): " +
			"encrypt it with openssl pkcs8 -topk8 -outform DER -v1 PBE-SHA1-3DES, or use PKCS-12")
	case !alg.Equal(oidPBEMD5DES) && !alg.Equal(oidPBESHA13DES):
		return nil, fmt.Errorf("encrypted with %v: pgoutbox decrypts pbeWithMD5AndDES-CBC and pbeWithSHAAnd3-KeyTripleDES-CBC (openssl pkcs8 -topk8 -v1 PBE-MD5-DES or PBE-SHA1-3DES)", alg)
	}
	if password == "" {
		return nil, errNoPassword
	}
	var params pbeParams
	if _, err := asn1.Unmarshal(info.Algorithm.Parameters.FullBytes, &params); err != nil || params.Iterations <= 0 {
		return nil, errors.New("its encryption's parameters do not parse")
	}
	var block cipher.Block
	var iv []byte
	if alg.Equal(oidPBEMD5DES) {
		// PBKDF1 with MD5: the first 8 bytes key DES, the next 8 are the IV.
		dk := append([]byte(password), params.Salt...)
		for range params.Iterations {
			sum := md5.Sum(dk)
			dk = sum[:]
		}
		block, _ = des.NewCipher(dk[:8])
		iv = dk[8:16]
	} else {
		var err error
		if block, err = des.NewTripleDESCipher(pkcs12KDF(password, params.Salt, params.Iterations, 1, 24)); err != nil {
			return nil, err
		}
		iv = pkcs12KDF(password, params.Salt, params.Iterations, 2, 8)
	}
	if len(info.Data) == 0 || len(info.Data)%block.BlockSize() != 0 {
		return nil, errors.New("its encrypted data does not fit its cipher")
	}
	plain := make([]byte, len(info.Data))
	cipher.NewCBCDecrypter(block, iv).CryptBlocks(plain, info.Data)
	// A wrong password shows as bad padding or as bytes that are no key.
	pad := int(plain[len(plain)-1])
	if pad == 0 || pad > block.BlockSize() || !bytes.Equal(plain[len(plain)-pad:], bytes.Repeat([]byte{byte(pad)}, pad)) {
		return nil, errWrongPassword
	}
	key, err := x509.ParsePKCS8PrivateKey(plain[:len(plain)-pad])
	if err != nil {
		return nil, errWrongPassword
	}
	return key, nil
}

// pkcs12KDF derives n bytes of key material of purpose id (1: a key, 2: an
// IV) from the password with SHA-1, as PKCS #12 (RFC 7292, appendix B.2)
// defines: the password is read as UTF-16 with a final zero.
func pkcs12KDF(password string, salt []byte, iterations int, id byte, n int) []byte {
	const u, v = sha1.Size, 64
	var pw []byte
	for _, r := range utf16.Encode([]rune(password)) {
		pw = append(pw, byte(r>>8), byte(r))
	}
	pw = append(pw, 0, 0)
	fill := func(b []byte) []byte {
		if len(b) == 0 {
			return nil
		}
		out := make([]byte, v*((len(b)+v-1)/v))
		for i := range out {
			out[i] = b[i%len(b)]
		}
		return out
	}
	in := append(fill(salt), fill(pw)...)
	d := bytes.Repeat([]byte{id}, v)
	var out []byte
	for len(out) < n {
		h := sha1.Sum(append(append([]byte{}, d...), in...))
		a := h[:]
		for i := 1; i < iterations; i++ {
			h = sha1.Sum(a)
			a = h[:]
		}
		out = append(out, a...)
		if len(out) >= n {
			break
		}
		// Each v-byte block of in becomes in + B + 1, B being a repeated.
		b := make([]byte, v)
		for i := range b {
			b[i] = a[i%u]
		}
		for j := 0; j < len(in); j += v {
			carry := 1
			for k := v - 1; k >= 0; k-- {
				sum := int(in[j+k]) + int(b[k]) + carry
				in[j+k] = byte(sum)
				carry = sum >> 8
			}
		}
	}
	return out[:n]
}
