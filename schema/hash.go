package schema

import (
	"crypto/md5"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha3"
	"crypto/sha512"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash"
	"strings"
	"unicode/utf16"
)

// This file is Debezium's column.mask.hash.<algorithm>.with.salt.<salt>
// and column.mask.hash.v2.<algorithm>.with.salt.<salt> (MaskStrings with a
// HashValueConverter): a string column's value replaced by the lower-case
// hex digest of the salt's bytes followed by the value's bytes, cut to the
// column's declared length. Version 1 hashes the value as Java serializes
// a String (ObjectOutputStream.writeObject), version 2 its UTF-8 bytes.

// hashAlgorithms are the MessageDigest names of the JDK's providers that
// Go's standard library computes, upper-cased: Java looks names up in any
// case. MD2 is the one the JDK has that is left out.
var hashAlgorithms = map[string]func() hash.Hash{
	"MD5":         md5.New,
	"SHA":         sha1.New,
	"SHA1":        sha1.New,
	"SHA-1":       sha1.New,
	"SHA224":      sha256.New224,
	"SHA-224":     sha256.New224,
	"SHA256":      sha256.New,
	"SHA-256":     sha256.New,
	"SHA384":      sha512.New384,
	"SHA-384":     sha512.New384,
	"SHA512":      sha512.New,
	"SHA-512":     sha512.New,
	"SHA512/224":  sha512.New512_224,
	"SHA-512/224": sha512.New512_224,
	"SHA512/256":  sha512.New512_256,
	"SHA-512/256": sha512.New512_256,
	"SHA3-224":    func() hash.Hash { return sha3.New224() },
	"SHA3-256":    func() hash.Hash { return sha3.New256() },
	"SHA3-384":    func() hash.Hash { return sha3.New384() },
	"SHA3-512":    func() hash.Hash { return sha3.New512() },
}

// CheckHashAlgorithm tells whether name is a digest pgoutbox computes as
// Java's MessageDigest.getInstance(name) does.
func CheckHashAlgorithm(name string) error {
	if _, ok := hashAlgorithms[strings.ToUpper(name)]; ok {
		return nil
	}
	if strings.EqualFold(name, "MD2") {
		return fmt.Errorf("hash algorithm %q is not implemented", name)
	}
	return fmt.Errorf("hash algorithm %q: no such MessageDigest in Java (Debezium's task fails when it builds the schema of a table with a string column it matches); use MD5, SHA-1, SHA-224, SHA-256, SHA-384, SHA-512, SHA-512/224, SHA-512/256 or SHA3-224 to SHA3-512", name)
}

// hashString is the masked value of a string column's text: the hex
// digest, cut to length characters when length > 0.
func (m ColumnMapper) hashString(text []byte, length int) []byte {
	h := hashAlgorithms[strings.ToUpper(m.Hash)]()
	h.Write([]byte(m.Salt))
	if m.HashV2 {
		h.Write(text)
	} else {
		h.Write(javaSerializedString(string(text)))
	}
	out := make([]byte, hex.EncodedLen(h.Size()))
	hex.Encode(out, h.Sum(nil))
	if length > 0 && len(out) > length {
		out = out[:length]
	}
	return out
}

// javaSerializedString is what ObjectOutputStream writes for a String:
// the stream header, then TC_STRING with a two-byte length, or
// TC_LONGSTRING with an eight-byte one past 65535 bytes, and the text in
// Java's modified UTF-8 (each UTF-16 unit on its own, NUL in two bytes).
func javaSerializedString(s string) []byte {
	var body []byte
	for _, u := range utf16.Encode([]rune(s)) {
		switch {
		case u >= 0x01 && u <= 0x7f:
			body = append(body, byte(u))
		case u <= 0x7ff:
			body = append(body, 0xc0|byte(u>>6), 0x80|byte(u&0x3f))
		default:
			body = append(body, 0xe0|byte(u>>12), 0x80|byte(u>>6&0x3f), 0x80|byte(u&0x3f))
		}
	}
	out := []byte{0xac, 0xed, 0x00, 0x05}
	if len(body) <= 0xffff {
		out = append(out, 0x74)
		out = binary.BigEndian.AppendUint16(out, uint16(len(body)))
	} else {
		out = append(out, 0x7c)
		out = binary.BigEndian.AppendUint64(out, uint64(len(body)))
	}
	return append(out, body...)
}
