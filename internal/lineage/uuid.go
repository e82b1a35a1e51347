package lineage

import (
	"crypto/sha1"
	"encoding/binary"
	"encoding/hex"
)

// Namespace is the UUID namespace of cairn's run ids: the name-based UUID (version 5)
// of the URL "https://cairn.dev/lineage" in RFC 9562's URL namespace.
const Namespace = "d9d0796f-62f9-5d41-a43e-2a5b4c75fca9"

// urlNamespace is RFC 9562's namespace for URLs (6ba7b811-9dad-11d1-80b4-00c04fd430c8).
var urlNamespace = [16]byte{0x6b, 0xa7, 0xb8, 0x11, 0x9d, 0xad, 0x11, 0xd1, 0x80, 0xb4, 0x00, 0xc0, 0x4f, 0xd4, 0x30, 0xc8}

// uuid5 is the name-based UUID of name in namespace ns (RFC 9562 section 5.5): the
// first 16 bytes of SHA-1(ns || name), version 5 in the high nibble of byte 6, variant
// 10 in the high bits of byte 8. (SHA-1 is RFC 9562's choice for version 5; the id
// names a run, it authenticates nothing.)
func uuid5(ns [16]byte, name []byte) [16]byte {
	h := sha1.New()
	h.Write(ns[:])
	h.Write(name)
	var u [16]byte
	copy(u[:], h.Sum(nil))
	u[6] = u[6]&0x0f | 0x50
	u[8] = u[8]&0x3f | 0x80
	return u
}

// formatUUID writes u in the 8-4-4-4-12 lower-case hex form.
func formatUUID(u [16]byte) string {
	var b [36]byte
	hex.Encode(b[0:8], u[0:4])
	b[8] = '-'
	hex.Encode(b[9:13], u[4:6])
	b[13] = '-'
	hex.Encode(b[14:18], u[6:8])
	b[18] = '-'
	hex.Encode(b[19:23], u[8:10])
	b[23] = '-'
	hex.Encode(b[24:36], u[10:16])
	return string(b[:])
}

// namespace is Namespace as bytes.
var namespace = uuid5(urlNamespace, []byte("https://cairn.dev/lineage"))

// runName builds the name a run id hashes: each part preceded by its length (uvarint),
// so that no two lists of parts give the same bytes.
type runName []byte

func (n runName) str(s string) runName {
	n = binary.AppendUvarint(n, uint64(len(s)))
	return append(n, s...)
}

func (n runName) num(v uint64) runName { return binary.AppendUvarint(n, v) }

// runID is the run id of name: formatUUID(uuid5(namespace, name)).
func runID(name runName) string { return formatUUID(uuid5(namespace, name)) }
