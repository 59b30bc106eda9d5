package charts

// Bounded rendering. Helm's engine cannot be stopped once a template runs:
// a chart whose templates call themselves, or double a string forty times,
// runs for ever or takes all of a CI runner's memory. RenderBounded renders
// in a process of its own (gantry's own executable, started again as a
// renderer), which gantry kills when it takes longer, or uses more memory,
// than its Limits allow.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gantry-dev/gantry/sources/yamlbound"
)

// Limits bound one rendering.
type Limits struct {
	// Time bounds the rendering from the renderer's start to its answer;
	// zero means DefaultTime.
	Time time.Duration
	// MemoryBytes bounds the renderer's resident memory; zero means
	// DefaultMemoryBytes.
	MemoryBytes uint64
}

// The defaults leave a large chart ample room: kube-prometheus-stack
// (over 300 objects, a dozen subcharts) renders in about two seconds and
// under 300 MiB, and helm template itself takes no more.
const (
	DefaultTime        = 60 * time.Second
	DefaultMemoryBytes = 1 << 30
)

// The renderer is gantry's executable started with exactly this argument
// and this environment variable; nothing of the chart or of the run's
// input is in its command line.
const (
	childArg       = "__gantry-chart-render"
	childEnvMarker = "GANTRY_CHART_RENDER"
	childEnvMemory = "GANTRY_CHART_RENDER_MEMORY"
)

// maxStderr bounds what gantry keeps of what the renderer prints on its
// standard error (the Go runtime's last words, when it dies).
const maxStderr = 16 << 10

// maxStack bounds the renderer's goroutine stacks: a tpl that calls
// itself (which Helm does not count, as it counts include) ends on it
// rather than on all the memory there is.
const maxStack = 128 << 20

// ChildMain is the renderer's main. A program that renders bounded calls
// it first thing in its main, and returns the exit code it gives when it
// says the process is the renderer:
//
//	if child, code := charts.ChildMain(); child {
//		os.Exit(code)
//	}
//
// It costs one look at the environment when the process is not the
// renderer. Tests that call RenderBounded need the same in a TestMain of
// their package, as the test binary is then the renderer.
func ChildMain() (isChild bool, exitCode int) {
	renderer.Store(true)
	if os.Getenv(childEnvMarker) != "1" || len(os.Args) != 2 || os.Args[1] != childArg {
		return false, 0
	}
	// Helm logs through slog's default logger what it skips (a hook's
	// events, which a template may take from any value): nowhere.
	slog.SetDefault(slog.New(slog.DiscardHandler))
	return true, runChild(os.Stdin, os.Stdout, os.Getenv(childEnvMemory))
}

// request is what the renderer reads on its standard input.
type request struct {
	Options Options
}

// answer is what the renderer writes on its standard output: first the
// chart's name, as soon as it is known (so that a renderer killed later
// is still named), the steps it starts as it starts them (so that a
// bound that stops it names what was running), then the rendering or its
// error.
type answer struct {
	Chart    string     `json:",omitempty"`
	Step     string     `json:",omitempty"`
	Rendered *Rendered  `json:",omitempty"`
	Error    *wireError `json:",omitempty"`
}

// The steps a renderer says it starts: the nameTemplate's execution,
// then the chart's rendering. One that says none renders the chart.
const (
	stepNameTemplate = "nameTemplate"
	stepChart        = "chart"
)

// wireError is an *Error as the renderer reports it.
type wireError struct {
	Chart   string
	Message string
}

func runChild(in io.Reader, out io.Writer, memory string) int {
	// Bounds first, before anything of the chart is read.
	mem, err := strconv.ParseUint(memory, 10, 64)
	if err != nil || mem == 0 {
		fmt.Fprintf(os.Stderr, "gantry chart renderer: %s=%q: not a number of bytes\n", childEnvMemory, memory)
		return 2
	}
	debug.SetTraceback("none")
	debug.SetMaxStack(int(min(maxStack, mem/4)))
	// The collector works harder as the heap nears the bound, so that a
	// large chart's garbage does not count against it.
	debug.SetMemoryLimit(int64(mem / 4 * 3))
	if err := limitAddressSpace(mem); err != nil {
		fmt.Fprintf(os.Stderr, "gantry chart renderer: %v\n", err)
		return 2
	}
	var req request
	if err := json.NewDecoder(in).Decode(&req); err != nil {
		fmt.Fprintf(os.Stderr, "gantry chart renderer: reading the request: %v\n", err)
		return 2
	}
	enc := json.NewEncoder(out)
	// The chart's name first: reading it is bounded, rendering it is
	// what may not end.
	if name := chartName(req.Options); name != "" {
		if err := enc.Encode(answer{Chart: name}); err != nil {
			return 2
		}
	}
	var a answer
	r, err := render(context.Background(), req.Options, func(step string) {
		// Lost only with the answer itself, which then says nothing.
		_ = enc.Encode(answer{Step: step})
	})
	if err != nil {
		we := &wireError{Chart: req.Options.Dir, Message: err.Error()}
		var ce *Error
		if errors.As(err, &ce) {
			we = &wireError{Chart: ce.Chart, Message: ce.Err.Error()}
		}
		a.Error = we
	} else {
		a.Rendered = r
	}
	if err := enc.Encode(a); err != nil {
		fmt.Fprintf(os.Stderr, "gantry chart renderer: writing the answer: %v\n", err)
		return 2
	}
	return 0
}

// chartName is the name in the Chart.yaml of the chart of opts, read
// through the reader the chart is loaded with, bounded as load bounds a
// file; "" when there is none. Only that file is read: Render loads the whole
// chart (its values files parsed, its subcharts' too), once.
func chartName(opts Options) string {
	b, err := chartReader(opts).ReadFile(filepath.Join(opts.Dir, "Chart.yaml"))
	if err != nil {
		return ""
	}
	var meta struct {
		Name string `json:"name"`
	}
	if yamlbound.Unmarshal(b, &meta) != nil {
		return ""
	}
	return meta.Name
}

// childEnv is the renderer's whole environment: its marker and its
// memory bound. Nothing of gantry's own environment (tokens, kubeconfig
// paths, cloud credentials) reaches a chart's templates.
func childEnv(lim Limits) []string {
	return []string{childEnvMarker + "=1", childEnvMemory + "=" + strconv.FormatUint(lim.MemoryBytes, 10)}
}

// Hooks for tests: the renderer's process id once started, and whether
// gantry watches the renderer's resident memory (the renderer's own
// address-space bound is then the only one).
var (
	childStarted func(pid int)
	watchMemory  = true
)

// RenderBounded renders as Render does, in a renderer process bounded by
// lim: killed when ctx is done, when it runs longer than lim.Time, or
// when its memory goes over lim.MemoryBytes, with an *Error that names
// the chart and the bound. Errors of the rendering itself are Render's,
// as *Error with the same chart and text (the error inside is a plain
// one: its Go type stays in the renderer).
//
// The renderer is this executable (os.Executable), which must call
// ChildMain first thing in its main.
func RenderBounded(ctx context.Context, opts Options, lim Limits) (*Rendered, error) {
	if lim.Time <= 0 {
		lim.Time = DefaultTime
	}
	if lim.MemoryBytes == 0 {
		lim.MemoryBytes = DefaultMemoryBytes
	}
	fail := func(chart string, err error) (*Rendered, error) { return nil, &Error{Chart: chart, Err: err} }
	exe, err := os.Executable()
	if err != nil {
		return fail(opts.Dir, fmt.Errorf("starting the renderer: %w", err))
	}
	in, err := json.Marshal(request{Options: opts})
	if err != nil {
		return fail(opts.Dir, err)
	}
	tctx, cancel := context.WithTimeout(ctx, lim.Time)
	defer cancel()
	cmd := exec.CommandContext(tctx, exe, childArg)
	cmd.Env = childEnv(lim)
	cmd.Stdin = bytes.NewReader(in)
	// What a rendering prints is held in memory twice over (the JSON
	// here, then the Rendered); a renderer within its memory bound cannot
	// have rendered more than that bound.
	stdout := &cappedBuffer{max: int(min(lim.MemoryBytes, 1<<40))}
	stderr := &cappedBuffer{max: maxStderr}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cmd.SysProcAttr = childSysProcAttr()
	cmd.WaitDelay = time.Second
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return fail(opts.Dir, fmt.Errorf("starting the renderer: %w", err))
	}
	if childStarted != nil {
		childStarted(cmd.Process.Pid)
	}
	var overMemory atomic.Bool
	var wg sync.WaitGroup
	done := make(chan struct{})
	if watchMemory {
		wg.Add(1)
		go func() {
			defer wg.Done()
			watchRSS(cmd.Process, lim.MemoryBytes, done, &overMemory)
		}()
	}
	werr := cmd.Wait()
	close(done)
	wg.Wait()
	elapsed := time.Since(start)

	// The chart's name, when the renderer got as far as saying it, the
	// last step it started, and its answer.
	chart, step := opts.Dir, stepChart
	var result *answer
	dec := json.NewDecoder(bytes.NewReader(stdout.Bytes()))
	for {
		var a answer
		if dec.Decode(&a) != nil {
			break
		}
		if a.Chart != "" {
			chart = a.Chart
		}
		if a.Step != "" {
			step = a.Step
		}
		if a.Rendered != nil || a.Error != nil {
			result = &a
			break
		}
	}
	crash := stderr.String()
	doing, expands := "rendering", "tpl, include or repeat"
	if step == stepNameTemplate {
		doing, expands = "executing nameTemplate", "repeat, or range in range"
	}
	switch {
	case ctx.Err() != nil:
		return fail(chart, fmt.Errorf("%s stopped: %w", doing, context.Cause(ctx)))
	case overMemory.Load() || strings.Contains(crash, "out of memory") || strings.Contains(crash, "cannot allocate memory"):
		return fail(chart, fmt.Errorf("%s used more than %s; a template may expand without end (%s)", doing, bytesString(lim.MemoryBytes), expands))
	case tctx.Err() != nil:
		return fail(chart, fmt.Errorf("%s took longer than %s; a template may loop without end", doing, lim.Time))
	case strings.Contains(crash, "stack overflow") || strings.Contains(crash, "stack exceeds"):
		return fail(chart, fmt.Errorf("templates nested deeper than the renderer's stack of %s allows: a tpl or include that calls itself without end", bytesString(min(maxStack, lim.MemoryBytes/4))))
	case stdout.over:
		return fail(chart, fmt.Errorf("the rendering is over %s", bytesString(uint64(stdout.max))))
	case werr != nil || result == nil:
		msg := strings.TrimSpace(crash)
		if i := strings.IndexByte(msg, '\n'); i >= 0 {
			msg = msg[:i]
		}
		if msg == "" {
			msg = "no answer"
		}
		return fail(chart, fmt.Errorf("the renderer failed after %s (%v): %s", elapsed.Round(time.Millisecond), werr, msg))
	case result.Error != nil:
		return fail(result.Error.Chart, errors.New(compactRepeats(result.Error.Message)))
	}
	return result.Rendered, nil
}

// cappedBuffer keeps the first max bytes written to it and says whether
// more came; it never fails a write, so the renderer is not stopped by a
// full pipe, only by its bounds.
type cappedBuffer struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	max  int
	over bool
}

func (b *cappedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if room := b.max - b.buf.Len(); len(p) > room {
		b.over = true
		b.buf.Write(p[:max(room, 0)])
	} else {
		b.buf.Write(p)
	}
	return len(p), nil
}

func (b *cappedBuffer) Bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Bytes()
}

func (b *cappedBuffer) String() string { return string(b.Bytes()) }

// bytesString is n in the largest binary unit it is a whole number of
// (1 GiB, 256 MiB), else in bytes.
func bytesString(n uint64) string {
	for _, u := range []struct {
		shift uint
		name  string
	}{{30, "GiB"}, {20, "MiB"}, {10, "KiB"}} {
		if n >= 1<<u.shift && n%(1<<u.shift) == 0 {
			return fmt.Sprintf("%d %s", n>>u.shift, u.name)
		}
	}
	return fmt.Sprintf("%d bytes", n)
}

// compactRepeats shortens Helm's error for an include loop, which says
// each of its thousand levels, alike: a level said again and again is
// said once, with how many times more.
func compactRepeats(msg string) string {
	const sep = ": error calling include: "
	parts := strings.Split(msg, sep)
	var out []string
	for i := 0; i < len(parts); {
		j := i
		for j+1 < len(parts) && parts[j+1] == parts[i] {
			j++
		}
		if j-i >= 2 {
			out = append(out, fmt.Sprintf("%s (the same %d times more)", parts[i], j-i))
		} else {
			out = append(out, parts[i:j+1]...)
		}
		i = j + 1
	}
	return strings.Join(out, sep)
}

// renderer says this executable's main called ChildMain, so that it can
// be started again as the renderer. It is set once, at start, and only
// read after.
var renderer atomic.Bool

// RenderIsolated renders with RenderBounded when this executable can be
// its own renderer (its main, or its tests' TestMain, called ChildMain),
// and in this process otherwise (Render), where nothing bounds a chart
// but the caller's context.
func RenderIsolated(lim Limits) func(context.Context, Options) (*Rendered, error) {
	return func(ctx context.Context, opts Options) (*Rendered, error) {
		if renderer.Load() {
			return RenderBounded(ctx, opts, lim)
		}
		return Render(ctx, opts)
	}
}
