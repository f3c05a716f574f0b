package replbuf

import (
	"encoding/binary"
	"testing"
)

// FuzzStream drives the producer/cursor API with decisions taken from the
// fuzzer's bytes (read sizes, cursor progress, attach offsets, backlog sizes,
// closes, resets) and checks it against the reference model after every step,
// as TestStreamAgainstModel does with a PRNG.
func FuzzStream(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0, 0, 1, 0, 10, 0, 50, 0, 0, 80, 1, 2, 3, 90, 4, 5})
	seed := make([]byte, 0, 600)
	for i := range 200 {
		seed = binary.BigEndian.AppendUint16(seed, uint16(i*7919))
		seed = append(seed, byte(i*31))
	}
	f.Add(seed)
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 1500 {
			data = data[:1500]
		}
		runModel(t, 0, &fuzzChoices{data: data}, len(data)/3+1)
	})
}
