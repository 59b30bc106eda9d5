package pipeline

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gantry-dev/gantry/redact"
)

// A container's log is whatever its image prints: a Secret of its
// namespace the run does not hold, its service account's token, in forms
// no mask recognizes. The wait reads it only when the workflow asks for
// it (PodLogLines), and then only the last lines of a container that
// ended with an error, masked with the run's secrets and with a mask of
// its own: the values of every Secret the pod is given (any container's
// env and envFrom, its secret and projected volumes: containers share
// their volumes), in the forms a program writes them (whole, by line,
// by field, URL-escaped, hex, base64). That mask is the log's alone:
// anyone who can write the namespace's Secrets can make them ordinary
// words, which the rest of the run's output must not lose. A log is not
// shown when the pod may hold a value no mask can know: a Secret gone,
// or changed since the pod started (it may hold the earlier value), one
// that cannot be read, or a CSI or flex volume (a secrets store). What
// the wait says of it is part of the container's cause: "last ended
// Error, exit code 3; last log line: ...".

// Bounds of the log reads of one look at a workload's pods, and of what
// one read takes from the kubelet (a longer last line is not shown, as
// cutting it could cut a secret the mask would then not recognize).
const (
	maxLogReads     = 3
	maxLogBytes     = 64 << 10
	maxLogLines     = 20
	maxSecretsMasks = 20
	maxMaskForms    = 4000
	maxSaidRunes    = 1 << 10
	maxLogsKept     = 512
	logReadTimeout  = 2 * time.Second
)

// crashed is the container of a pod whose last end (previous: before
// its restart, when it runs or waits again) was an error.
type crashed struct {
	container string
	previous  bool
}

// podLogs is what the wait has said of containers' logs, kept for the
// run by instance: a container's earlier instance does not log again,
// and the wait looks every second.
type podLogs struct {
	mu   sync.Mutex
	said map[string]string // by pod UID, container, restart count and instance
}

// logSaid is what the wait adds to the cause of container c of pod p,
// which ended with an error: its last log lines (last log line: ...),
// read when the workflow asks for them (PodLogLines), or why they are
// not shown; "" when there is nothing to say.
func (r *run) logSaid(ctx context.Context, p *corev1.Pod, c crashed) string {
	n := r.opts.PodLogLines
	if n <= 0 || r.clients == nil || r.clients.Kube == nil {
		return ""
	}
	n = min(n, maxLogLines)
	restarts := int32(0)
	for _, cs := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
		if cs.Name == c.container {
			restarts = cs.RestartCount
		}
	}
	key := strings.Join([]string{string(p.UID), c.container, strconv.Itoa(int(restarts)), strconv.FormatBool(c.previous)}, "/")
	r.logs.mu.Lock()
	said, done := r.logs.said[key]
	r.logs.mu.Unlock()
	if done {
		return said
	}
	lctx, cancel := context.WithTimeout(ctx, logReadTimeout)
	defer cancel()
	said, keep := r.readLogSaid(lctx, p, c, n)
	if keep {
		r.logs.mu.Lock()
		if r.logs.said == nil || len(r.logs.said) >= maxLogsKept {
			// Restart counts are any status writer's to change: what
			// is kept is bounded, not what is read again.
			r.logs.said = map[string]string{}
		}
		r.logs.said[key] = said
		r.logs.mu.Unlock()
	}
	return said
}

// readLogSaid reads what logSaid says; keep says it will not change (an
// error of the moment is tried again on the next look).
func (r *run) readLogSaid(ctx context.Context, p *corev1.Pod, c crashed, n int) (said string, keep bool) {
	what := "last log line"
	if n > 1 {
		what = fmt.Sprintf("last %d log lines", n)
	}
	// The mask first: nothing of the log is held before it is.
	mask, err := r.podSecretMask(ctx, p)
	if err != nil {
		var w withheld
		if errors.As(err, &w) {
			return "log not shown: " + string(w), true
		}
		return fmt.Sprintf("log not shown: %s", reasonOf(err)), !transient(err)
	}
	tail, limit := int64(n), int64(maxLogBytes)
	raw, err := r.clients.Kube.CoreV1().Pods(p.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{
		Container: c.container, Previous: c.previous, TailLines: &tail, LimitBytes: &limit,
	}).DoRaw(ctx)
	if err != nil {
		// No kubelet to ask (a simulated node), no right to read logs:
		// the cause is said without them.
		return "", !transient(err)
	}
	text := string(raw)
	if int64(len(raw)) >= limit {
		// Cut at the limit: the last line read is not whole.
		i := strings.LastIndexByte(text, '\n')
		if i < 0 {
			return fmt.Sprintf("%s longer than %d KiB, not shown", what, maxLogBytes>>10), true
		}
		text = text[:i]
	}
	text = strings.TrimRight(text, "\n")
	if strings.TrimSpace(text) == "" {
		return "", true
	}
	// Masked as it was logged (a secret that spans lines whole), then
	// each line kept apart from the next, on one line. What is kept is
	// bounded: no more than a cause line ever says.
	lines := strings.Split(r.mask(mask.String(text)), "\n")
	for i := range lines {
		lines[i] = flat(lines[i])
	}
	return clip(what+": "+strings.Join(lines, " | "), maxSaidRunes), true
}

// withheld is why a log is not shown, in the words the cause says it.
type withheld string

func (w withheld) Error() string { return string(w) }

// podSecretMask is the mask of p's log: the values of every Secret p is
// given, read now. A withheld error says why no mask can be made.
func (r *run) podSecretMask(ctx context.Context, p *corev1.Pod) (*redact.Redactor, error) {
	for _, v := range p.Spec.Volumes {
		if v.CSI != nil || v.FlexVolume != nil {
			return nil, withheld(fmt.Sprintf("the pod mounts volume %s through a driver (%s), whose secrets no mask knows", flat(v.Name), volumeDriver(v)))
		}
	}
	names := podSecrets(p)
	if len(names) > maxSecretsMasks {
		return nil, withheld(fmt.Sprintf("the pod is given more than %d Secrets", maxSecretsMasks))
	}
	started := p.CreationTimestamp.Time
	if p.Status.StartTime != nil && p.Status.StartTime.After(started) {
		started = p.Status.StartTime.Time
	}
	var forms []string
	for _, name := range names {
		sec, err := r.clients.Kube.CoreV1().Secrets(p.Namespace).Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			// Deleted since it was given (pruned, say), or never there:
			// what the pod holds of it is not known.
			return nil, withheld(fmt.Sprintf("Secret %s, which the pod is given, is not there to mask its values", flat(name)))
		case err != nil && !transient(err):
			return nil, withheld(fmt.Sprintf("Secret %s, which the pod is given, could not be read to mask its values (%s)", flat(name), reasonOf(err)))
		case err != nil:
			return nil, err
		}
		if changed := lastWritten(sec); changed.After(started) {
			return nil, withheld(fmt.Sprintf("Secret %s changed after the pod started, which may hold its earlier values", flat(name)))
		}
		for _, v := range sec.Data {
			forms = append(forms, maskForms(string(v))...)
		}
		if len(forms) > maxMaskForms {
			return nil, withheld("the pod's Secrets hold more values than a mask is made of")
		}
	}
	return redact.New(forms...), nil
}

// lastWritten is when s was last written, as far as the API server
// says: its creation, or the newest of its managed fields' times.
func lastWritten(s *corev1.Secret) time.Time {
	t := s.CreationTimestamp.Time
	for _, m := range s.ManagedFields {
		if m.Time != nil && m.Time.After(t) {
			t = m.Time.Time
		}
	}
	return t
}

// volumeDriver names the driver of a CSI or flex volume.
func volumeDriver(v corev1.Volume) string {
	if v.CSI != nil {
		return flat(v.CSI.Driver)
	}
	return flat(v.FlexVolume.Driver)
}

// maskForms are the forms a program writes a secret value in, beyond
// those the Redactor knows of every value: hex, URL-escaped (a DSN's
// password), and each field of a value that is a file (a password in an
// application.yaml, a registry token in a .dockerconfigjson, base64 or
// not, "user:token" or not).
func maskForms(v string) []string {
	forms := []string{v}
	add := func(s string) {
		forms = append(forms, s, hex.EncodeToString([]byte(s)), strings.ToUpper(hex.EncodeToString([]byte(s))),
			url.QueryEscape(s), url.PathEscape(s), strings.TrimPrefix(url.UserPassword("", s).String(), ":"))
	}
	add(v)
	for _, f := range valueFields(v) {
		add(f)
		for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
			if b, err := enc.DecodeString(f); err == nil && utf8.Valid(b) {
				add(string(b))
				for _, g := range valueFields(string(b)) {
					add(g)
				}
				break
			}
		}
	}
	return forms
}

// valueFields are the parts of v between the characters that separate a
// file's keys and values (space, quotes, =, :, commas, brackets), of at
// least 6 bytes: shorter ones would mask words.
func valueFields(v string) []string {
	var out []string
	for _, f := range strings.FieldsFunc(v, func(r rune) bool {
		return r <= ' ' || strings.ContainsRune(`"'=:,;{}[]()<>`+"`", r)
	}) {
		if len(f) >= 6 && f != v {
			out = append(out, f)
		}
	}
	return out
}

// podSecrets names, sorted, the Secrets p's containers are given: their
// env and envFrom, and its secret and projected volumes (mounted or not:
// a pod's containers share them).
func podSecrets(p *corev1.Pod) []string {
	set := map[string]bool{}
	containers := append(append([]corev1.Container(nil), p.Spec.InitContainers...), p.Spec.Containers...)
	for _, e := range p.Spec.EphemeralContainers {
		containers = append(containers, corev1.Container{Env: e.Env, EnvFrom: e.EnvFrom})
	}
	for _, c := range containers {
		for _, e := range c.Env {
			if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
				set[e.ValueFrom.SecretKeyRef.Name] = true
			}
		}
		for _, e := range c.EnvFrom {
			if e.SecretRef != nil {
				set[e.SecretRef.Name] = true
			}
		}
	}
	for _, v := range p.Spec.Volumes {
		if v.Secret != nil {
			set[v.Secret.SecretName] = true
		}
		if v.Projected != nil {
			for _, s := range v.Projected.Sources {
				if s.Secret != nil {
					set[s.Secret.Name] = true
				}
			}
		}
	}
	delete(set, "")
	out := make([]string, 0, len(set))
	for s := range set {
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

// transient: err may not be the answer next time (a timeout, the server
// busy), so it is not kept.
func transient(err error) bool {
	return apierrors.IsTimeout(err) || apierrors.IsServerTimeout(err) || apierrors.IsTooManyRequests(err) ||
		apierrors.IsServiceUnavailable(err) || apierrors.IsInternalError(err) ||
		errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)
}

// reasonOf names why a read failed in a few words: not its whole text,
// which is the server's.
func reasonOf(err error) string {
	switch {
	case apierrors.IsForbidden(err):
		return "forbidden"
	case apierrors.IsUnauthorized(err):
		return "unauthorized"
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled):
		return "timed out"
	}
	if s := apierrors.ReasonForError(err); s != metav1.StatusReasonUnknown {
		return strings.ToLower(string(s))
	}
	return "failed"
}
