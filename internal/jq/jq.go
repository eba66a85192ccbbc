// Package jq evaluates a --jq expression over a command's JSON output, the
// way gh's --jq does: top-level strings, numbers, booleans and null print
// raw (like jq --raw-output), anything else as one line of JSON.
//
// It runs on theloop's copy of gojq (internal/third_party/gojq), which
// builds jq's builtin table on the first compile rather than in package
// init: loopctl links --jq into every verb, and the agent runs loopctl on
// every claim, so the table must cost nothing to a process that never
// filters. That is also why this is not go-gh's pkg/jq, which imports the
// upstream module.
package jq

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"

	"github.com/theloop-dev/theloop/internal/third_party/gojq"
)

// Evaluate runs expr over the JSON document in input and writes each
// result to w on its own line. A parse error names the line and column
// with a caret under it.
func Evaluate(input []byte, w io.Writer, expr string) error {
	query, err := gojq.Parse(expr)
	if err != nil {
		var pe *gojq.ParseError
		if errors.As(err, &pe) {
			line, lineNo, col := lineColumn(expr, pe.Offset-len(pe.Token))
			return fmt.Errorf("failed to parse jq expression (line %d, column %d)\n    %s\n    %*c  %w", lineNo, col, line, col, '^', err)
		}
		return err
	}
	// $ENV and env read the environment of the person running the
	// command, as in jq and gh.
	code, err := gojq.Compile(query, gojq.WithEnvironLoader(os.Environ))
	if err != nil {
		return err
	}
	var data any
	if err := json.Unmarshal(input, &data); err != nil {
		return err
	}
	iter := code.Run(data)
	for {
		v, ok := iter.Next()
		if !ok {
			return nil
		}
		if err, isErr := v.(error); isErr {
			var he *gojq.HaltError
			if errors.As(err, &he) && he.Value() == nil {
				return nil
			}
			return err
		}
		if err := writeValue(w, v); err != nil {
			return err
		}
	}
}

// writeValue prints a scalar raw and anything else as compact JSON.
func writeValue(w io.Writer, v any) error {
	var line string
	switch t := v.(type) {
	case string:
		line = t
	case nil:
		line = ""
	case bool:
		line = strconv.FormatBool(t)
	case float64:
		if math.Trunc(t) == t {
			line = strconv.FormatFloat(t, 'f', 0, 64)
		} else {
			line = strconv.FormatFloat(t, 'f', 2, 64)
		}
	case int:
		line = strconv.Itoa(t)
	default:
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		line = string(b)
	}
	_, err := io.WriteString(w, line+"\n")
	return err
}

// lineColumn finds the line holding byte offset in expr and the 1-based
// line and column of the offset within it.
func lineColumn(expr string, offset int) (string, int, int) {
	for lineNo := 1; ; lineNo++ {
		i := strings.IndexByte(expr, '\n')
		if i < 0 || i >= offset {
			if i < 0 {
				return expr, lineNo, offset + 1
			}
			return expr[:i], lineNo, offset + 1
		}
		expr = expr[i+1:]
		offset -= i + 1
	}
}
