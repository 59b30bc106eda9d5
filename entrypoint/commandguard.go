package entrypoint

import (
	"bytes"
	"io"
	"sync"
)

// commandGuard is GitHub's log as gantry writes to it: the runner reads a
// line that starts with :: (after any spaces, which it trims) as a
// workflow command, and ##[ anywhere in a line as one too. Every line
// that passes through the guard (object names, error messages, anything
// the configuration or the cluster brought) is written so that neither
// reads as a command: a zero-width space before a leading ::, and inside
// ##[. Gantry's own commands (groups, masks, annotations, warnings) are
// written to the log beside the guard, never through it.
type commandGuard struct {
	mu        sync.Mutex
	w         io.Writer
	lineStart bool
}

func newCommandGuard(w io.Writer) *commandGuard { return &commandGuard{w: w, lineStart: true} }

const zeroWidthSpace = "\u200b"

func (g *commandGuard) Write(p []byte) (int, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := neutralizeCommands(p, g.lineStart)
	if len(p) > 0 {
		g.lineStart = p[len(p)-1] == '\n'
	}
	if _, err := g.w.Write(out); err != nil {
		return 0, err
	}
	return len(p), nil
}

// neutralizeCommands returns p with no line that the runner would read
// as a workflow command; atStart says p begins a line.
func neutralizeCommands(p []byte, atStart bool) []byte {
	var b bytes.Buffer
	b.Grow(len(p) + 8)
	for i, line := range bytes.SplitAfter(p, []byte("\n")) {
		if i > 0 || atStart {
			trimmed := bytes.TrimLeft(line, " \t\r\v\f")
			if bytes.HasPrefix(trimmed, []byte("::")) {
				b.WriteString(zeroWidthSpace)
			}
		}
		b.Write(bytes.ReplaceAll(line, []byte("##["), []byte("##"+zeroWidthSpace+"[")))
	}
	return b.Bytes()
}
