package store

import (
	"encoding/binary"
	"errors"
	"math"
)

// EncodeVector is how a memory's vector is stored: little-endian float32s.
func EncodeVector(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

// DecodeVector reads what EncodeVector wrote.
func DecodeVector(b []byte) ([]float32, error) {
	if len(b)%4 != 0 {
		return nil, errors.New("a vector's bytes are not a multiple of 4")
	}
	v := make([]float32, len(b)/4)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return v, nil
}

// DotEncoded is the dot product of q with a vector as EncodeVector wrote
// it, without decoding it; ok is false when their lengths differ.
func DotEncoded(q []float32, b []byte) (dot float64, ok bool) {
	if len(b) != 4*len(q) {
		return 0, false
	}
	var sum float32
	for i, x := range q {
		sum += x * math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return float64(sum), true
}
