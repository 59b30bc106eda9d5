package pipeline

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A container's log is whatever its image prints: a Secret of its
// namespace the run does not hold, its service account's token, in forms
// no mask recognizes. The wait reads it only when the workflow asks for
// it (PodLogLines), and then only the last lines of a container that
// ended with an error, masked with the run's secrets and with the values
// of every Secret the container is given (its env, envFrom and the
// volumes it mounts). A log whose Secrets cannot all be read is not
// shown.

// Bounds of the log reads of one look at a workload's pods, and of what
// one read takes from the kubelet (a longer last line is not shown, as
// cutting it could cut a secret the mask would then not recognize).
const (
	maxLogReads     = 3
	maxLogBytes     = 64 << 10
	maxLogLines     = 20
	maxSecretsMasks = 20
	logReadTimeout  = 2 * time.Second
)

// crashed is the container of a pod whose last end (previous: before
// its restart, when it runs or waits again) was an error.
type crashed struct {
	container string
	previous  bool
}

// podLogs is what the wait has read of containers' logs and of the
// Secrets that mask them, kept for the run: a container's earlier
// instance does not log again, and the wait looks every second.
type podLogs struct {
	mu      sync.Mutex
	said    map[string]podCause // by pod UID, container, restart count and instance
	secrets map[string]error    // by namespace/name: read and masked, or why not
}

// logCause is the cause that says the last lines container c of pod p
// logged, read when the workflow asks for them (PodLogLines); ok false
// when there is nothing to say.
func (r *run) logCause(ctx context.Context, p *corev1.Pod, c crashed) (podCause, bool) {
	n := r.opts.PodLogLines
	if n <= 0 || r.clients == nil || r.clients.Kube == nil {
		return podCause{}, false
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
	if r.logs.said == nil {
		r.logs.said, r.logs.secrets = map[string]podCause{}, map[string]error{}
	}
	cause, done := r.logs.said[key]
	r.logs.mu.Unlock()
	if done {
		return cause, cause.what != ""
	}
	lctx, cancel := context.WithTimeout(ctx, logReadTimeout)
	defer cancel()
	cause, keep := r.readLogCause(lctx, p, c, n)
	if keep {
		r.logs.mu.Lock()
		r.logs.said[key] = cause
		r.logs.mu.Unlock()
	}
	return cause, cause.what != ""
}

// readLogCause reads what logCause says; keep says it will not change
// (an error of the moment is tried again on the next look).
func (r *run) readLogCause(ctx context.Context, p *corev1.Pod, c crashed, n int) (cause podCause, keep bool) {
	what := fmt.Sprintf("with container %s's last log line", flat(c.container))
	if n > 1 {
		what = fmt.Sprintf("with container %s's last log lines", flat(c.container))
	}
	// The Secrets first: nothing of the log is held before its mask is.
	if name, err := r.maskContainerSecrets(ctx, p, c.container); err != nil {
		return podCause{what: fmt.Sprintf("with container %s's log not shown", flat(c.container)),
			msg: fmt.Sprintf("Secret %s, which it is given, could not be read to mask its values (%s)", flat(name), reasonOf(err))}, !transient(err)
	}
	tail, limit := int64(n), int64(maxLogBytes)
	raw, err := r.clients.Kube.CoreV1().Pods(p.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{
		Container: c.container, Previous: c.previous, TailLines: &tail, LimitBytes: &limit,
	}).DoRaw(ctx)
	if err != nil {
		// No kubelet to ask (a simulated node), no right to read logs:
		// the cause is said without them.
		return podCause{}, !transient(err)
	}
	text := string(raw)
	if int64(len(raw)) >= limit {
		// Cut at the limit: the last line read is not whole.
		i := strings.LastIndexByte(text, '\n')
		if i < 0 {
			return podCause{what: what, msg: fmt.Sprintf("(longer than %d KiB, not shown)", maxLogBytes>>10)}, true
		}
		text = text[:i]
	}
	text = strings.TrimRight(text, "\n")
	if strings.TrimSpace(text) == "" {
		return podCause{}, true
	}
	// Masked whole, then made one line: a secret that spans lines is
	// masked as it was logged, and in its one-line form.
	return podCause{what: what, msg: flat(r.mask(text))}, true
}

// maskContainerSecrets adds to the run's mask the values of every Secret
// container of p is given: env's secretKeyRef, envFrom's secretRef, and
// the secret and projected volumes it mounts. name is the Secret that
// could not be read, with why.
func (r *run) maskContainerSecrets(ctx context.Context, p *corev1.Pod, container string) (name string, err error) {
	names := containerSecrets(p, container)
	if len(names) > maxSecretsMasks {
		return names[maxSecretsMasks], fmt.Errorf("more than %d Secrets", maxSecretsMasks)
	}
	for _, s := range names {
		key := p.Namespace + "/" + s
		r.logs.mu.Lock()
		known, seen := r.logs.secrets[key]
		r.logs.mu.Unlock()
		if seen {
			if known != nil {
				return s, known
			}
			continue
		}
		sec, err := r.clients.Kube.CoreV1().Secrets(p.Namespace).Get(ctx, s, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			// None to be given: the container could not have read it.
			err = nil
		case err == nil && r.opts.Secrets != nil:
			var values []string
			for _, v := range sec.Data {
				values = append(values, string(v))
			}
			for _, v := range sec.StringData {
				values = append(values, v)
			}
			r.opts.Secrets(values)
		case err == nil:
			err = fmt.Errorf("nothing masks its values")
		}
		if err != nil && transient(err) {
			return s, err
		}
		r.logs.mu.Lock()
		r.logs.secrets[key] = err
		r.logs.mu.Unlock()
		if err != nil {
			return s, err
		}
	}
	return "", nil
}

// containerSecrets names, sorted, the Secrets a container of p is given.
func containerSecrets(p *corev1.Pod, container string) []string {
	set := map[string]bool{}
	for _, c := range append(append(append([]corev1.Container(nil), p.Spec.InitContainers...), p.Spec.Containers...), ephemeral(p)...) {
		if c.Name != container {
			continue
		}
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
		mounted := map[string]bool{}
		for _, m := range c.VolumeMounts {
			mounted[m.Name] = true
		}
		for _, v := range p.Spec.Volumes {
			if !mounted[v.Name] {
				continue
			}
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
	}
	delete(set, "")
	out := make([]string, 0, len(set))
	for s := range set {
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

// ephemeral is p's ephemeral containers as containers, for the fields
// containerSecrets reads.
func ephemeral(p *corev1.Pod) []corev1.Container {
	var out []corev1.Container
	for _, e := range p.Spec.EphemeralContainers {
		out = append(out, corev1.Container{Name: e.Name, Env: e.Env, EnvFrom: e.EnvFrom, VolumeMounts: e.VolumeMounts})
	}
	return out
}

// transient: err may not be the answer next time (a timeout, the server
// busy), so it is not kept.
func transient(err error) bool {
	return apierrors.IsTimeout(err) || apierrors.IsServerTimeout(err) || apierrors.IsTooManyRequests(err) ||
		apierrors.IsServiceUnavailable(err) || apierrors.IsInternalError(err) || ctxDone(err)
}

func ctxDone(err error) bool {
	return err == context.DeadlineExceeded || err == context.Canceled ||
		strings.Contains(err.Error(), context.DeadlineExceeded.Error()) || strings.Contains(err.Error(), context.Canceled.Error())
}

// reasonOf names why a read failed in a few words: not its whole text,
// which is the server's.
func reasonOf(err error) string {
	switch {
	case apierrors.IsForbidden(err):
		return "forbidden"
	case apierrors.IsUnauthorized(err):
		return "unauthorized"
	case ctxDone(err):
		return "timed out"
	}
	if s := apierrors.ReasonForError(err); s != metav1.StatusReasonUnknown {
		return strings.ToLower(string(s))
	}
	return err.Error()
}
