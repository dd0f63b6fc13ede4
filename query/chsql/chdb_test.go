//go:build chdb

package chsql

import (
	"encoding/hex"
	"math/rand/v2"
	"strings"
	"testing"

	"flowzero/store/chdb"
)

// TestStringInEngine checks with the real engine that each literal String writes decodes to
// the bytes it was given: every single byte, the seeds of FuzzString, and random strings
// heavy in quotes, backslashes and control bytes.
func TestStringInEngine(t *testing.T) {
	c, err := chdb.Open("", "--max_threads=1")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var inputs []string
	for b := 0; b < 256; b++ {
		inputs = append(inputs, string([]byte{byte(b)}), "a"+string([]byte{byte(b)})+"'")
	}
	inputs = append(inputs, "", `\'`, `''`, `\\x41`, "100\\%", "' OR 1=1 --", "é\xffü")
	r := rand.New(rand.NewPCG(1, 2))
	alphabet := []byte("'\\x0aA\x00\n\"`%_\xc3\xa9\xff#-/*")
	for range 200 {
		b := make([]byte, r.IntN(12))
		for i := range b {
			b[i] = alphabet[r.IntN(len(alphabet))]
		}
		inputs = append(inputs, string(b))
	}
	// One statement for all: each row is the hex of one literal.
	var sql strings.Builder
	sql.WriteString("SELECT hex(s) FROM (")
	for i, s := range inputs {
		if i > 0 {
			sql.WriteString(" UNION ALL ")
		}
		sql.WriteString("SELECT " + Int(int64(i)) + " AS i, " + String(s) + " AS s")
	}
	sql.WriteString(") ORDER BY i FORMAT TSVRaw")
	out, err := c.Query(sql.String(), "TSVRaw")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(lines) != len(inputs) {
		t.Fatalf("%d rows for %d literals", len(lines), len(inputs))
	}
	for i, s := range inputs {
		if want := strings.ToUpper(hex.EncodeToString([]byte(s))); lines[i] != want {
			t.Errorf("%s decoded to %s, want %s", String(s), lines[i], want)
		}
	}
}
