package loop

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestEncodeJSONValueFastPaths: the int and plain-string fast paths write
// exactly what the JSON encoder (HTML escaping off) writes.
func TestEncodeJSONValueFastPaths(t *testing.T) {
	for _, v := range []any{
		0, -7, 1 << 40, "", "issue_comment", "github:Codertocat/Hello-World#1",
		"a<b>&c", "quote\"d", `back\slash`, "tab\there", "del\x7f", "é", "\u2028",
	} {
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		require.NoError(t, enc.Encode(v))
		require.Equal(t, string(bytes.TrimRight(b.Bytes(), "\n")), string(encodeJSONValue(v)), "%#v", v)
	}
}
