// Package id makes errand's identifiers: a kind prefix and a UUIDv7 written
// in Crockford base32 (26 characters, as a ULID is), so ids sort by creation
// time as strings and read well in logs.
package id

import (
	"github.com/google/uuid"
)

// Kind is an id's prefix.
type Kind string

const (
	Task     Kind = "tsk_"
	Run      Kind = "run_"
	Input    Kind = "inp_"
	Schedule Kind = "sch_"
	Memory   Kind = "mem_"
)

const alphabet = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

const encodedLen = 26

// New returns a new id of the given kind.
func New(kind Kind) string {
	u, err := uuid.NewV7()
	if err != nil {
		// NewV7 fails only when the system's random source does.
		panic("errand: read random bytes for an id: " + err.Error())
	}
	return string(kind) + encode(u)
}

// encode writes 128 bits as 26 base32 digits, most significant first; the
// first digit carries the top 3 bits.
func encode(u uuid.UUID) string {
	var out [encodedLen]byte
	var acc uint64
	var bits uint
	i := encodedLen - 1
	for j := len(u) - 1; j >= 0; j-- {
		acc |= uint64(u[j]) << bits
		bits += 8
		for bits >= 5 {
			out[i] = alphabet[acc&31]
			i--
			acc >>= 5
			bits -= 5
		}
	}
	out[0] = alphabet[acc&31] // the remaining 3 bits
	return string(out[:])
}

// Valid reports whether s looks like an id of the given kind.
func Valid(kind Kind, s string) bool {
	if len(s) != len(kind)+encodedLen || s[:len(kind)] != string(kind) {
		return false
	}
	for i := len(kind); i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'A' <= c && c <= 'Z') || c == 'I' || c == 'L' || c == 'O' || c == 'U' {
			return false
		}
	}
	return s[len(kind)] <= '7'
}
