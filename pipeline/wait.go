package pipeline

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/fluxcd/cli-utils/pkg/kstatus/polling"
	"github.com/fluxcd/cli-utils/pkg/kstatus/polling/event"
	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	"github.com/fluxcd/cli-utils/pkg/object"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gantry-dev/gantry/health"
	"github.com/gantry-dev/gantry/result"
)

// pollInterval is how often the wait stage reads the objects' status: each
// poll is a LIST per kind and namespace, so a large set is read less often.
// With 200 Deployments the run returns 0.1 to 0.3 s after the last one is
// ready (make bench).
func pollInterval(objects int) time.Duration {
	if objects > 2000 {
		return time.Second
	}
	return 250 * time.Millisecond
}

// healthTargets are the objects the wait checks: the health-checks list
// when given, otherwise every object of the set that was not skipped.
func (r *run) healthTargets() (object.ObjMetadataSet, error) {
	var set object.ObjMetadataSet
	if len(r.opts.HealthChecks) > 0 {
		var errs []error
		for _, hc := range r.opts.HealthChecks {
			found := false
			// Kind or Kind.group, as gantry prints objects.
			kind, group, qualified := strings.Cut(hc.Kind, ".")
			for _, o := range r.objects {
				if strings.EqualFold(o.GetKind(), kind) && (!qualified || o.GroupVersionKind().Group == group) &&
					o.GetNamespace() == hc.Namespace && o.GetName() == hc.Name {
					set = append(set, object.UnstructuredToObjMetadata(o.Unstructured))
					found = true
				}
			}
			if !found {
				errs = append(errs, fmt.Errorf("health check %s: no such object in the set", hc))
			}
		}
		return set, errors.Join(errs...)
	}
	for _, o := range r.objects {
		id := object.UnstructuredToObjMetadata(o.Unstructured)
		if i, ok := r.byID[id.String()]; ok && r.res.Objects[i].Action == result.Skipped {
			continue
		}
		set = append(set, id)
	}
	return set, nil
}

// wait polls kstatus until every target is Current, until nothing is in
// progress any more (some Failed), or until the deadline; then it says, for
// each object that is not ready, why.
func (r *run) wait(ctx context.Context) error {
	targets, err := r.healthTargets()
	if err != nil {
		return err
	}
	// An object the run left unchanged and found ready when it read it
	// for the plan, moments ago, is not polled again: a no-op waits for
	// nothing and sends nothing.
	ready := map[object.ObjMetadata]bool{}
	for _, pl := range r.plans {
		if pl.kind == planUnchanged && pl.current {
			ready[object.UnstructuredToObjMetadata(pl.obj.Unstructured)] = true
		}
	}
	var set object.ObjMetadataSet
	for _, id := range targets {
		if ready[id] {
			if i, ok := r.byID[id.String()]; ok {
				r.res.Objects[i].Health = &result.Health{Status: status.CurrentStatus.String()}
			}
			continue
		}
		set = append(set, id)
	}
	if len(set) == 0 {
		if len(targets) > 0 {
			r.obs.Info(readyMessage(len(targets)))
		}
		return nil
	}
	last, timedOut := r.poll(ctx, set)
	guard := r.waitGuard()

	var failed []notReadyObject
	ectx, cancel := graceContext(ctx, 5*time.Second)
	defer cancel()
	for _, id := range set {
		rs := last[id]
		h := &result.Health{Status: status.UnknownStatus.String()}
		if rs != nil {
			h.Status = rs.Status.String()
		}
		if rs == nil || rs.Status != status.CurrentStatus {
			causes := r.explain(ectx, id, rs)
			h.Message = strings.Join(causes, "\n")
			failed = append(failed, notReadyObject{ref: fmtID(id), status: h.Status, causes: causes})
		}
		if rule := guard.ruleFor(id); rule != nil {
			h.Rule = rule.Name()
		}
		if i, ok := r.byID[id.String()]; ok {
			r.res.Objects[i].Health = h
		}
	}
	if len(failed) == 0 {
		r.obs.Info(readyMessage(len(targets)))
		return nil
	}
	var timeout time.Duration
	if timedOut {
		timeout = r.opts.Timeout
	}
	return errors.New(waitFailure(failed, len(targets), timeout))
}

func readyMessage(n int) string {
	if n == 1 {
		return "1 object ready"
	}
	return fmt.Sprintf("%d objects ready", n)
}

// poll returns the last status seen per object, and whether the deadline
// passed before the objects settled. Every progressEvery (default
// defaultProgressEvery) until they settle, it says which objects are not
// ready yet, and why.
func (r *run) poll(ctx context.Context, set object.ObjMetadataSet) (map[object.ObjMetadata]*event.ResourceStatus, bool) {
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	poller := r.statusPoller()
	guard := r.waitGuard()
	events := poller.Poll(pctx, set, polling.PollOptions{PollInterval: pollInterval(len(set))})
	last := map[object.ObjMetadata]*event.ResourceStatus{}
	settled := false
	start := time.Now()
	every := cmp.Or(r.progressEvery, defaultProgressEvery)
	tick := time.NewTicker(every)
	defer tick.Stop()
	// Between two progress lines, what the objects' pods and the objects
	// their controllers made say is read every causeEvery: a new cause
	// is said at once, in a line of its own.
	var causeTick <-chan time.Time
	if causeEvery < every {
		t := time.NewTicker(causeEvery)
		defer t.Stop()
		causeTick = t.C
	}
	said := map[object.ObjMetadata]string{}
	// Objects that name another they cannot become ready without (a
	// Certificate its Issuer) are looked at every needsEvery: one whose
	// need is neither in the set nor on the cluster, and whose
	// controller says why it waits, will not become ready in this run.
	var needsTick <-chan time.Time
	if slices.ContainsFunc(set, func(id object.ObjMetadata) bool { return health.HasNeeds(id.GroupKind) }) {
		t := time.NewTicker(needsEvery)
		defer t.Stop()
		needsTick = t.C
	}
	for {
		var e event.Event
		var ok bool
		select {
		case e, ok = <-events:
		case <-tick.C:
			if !settled && pctx.Err() == nil {
				r.progress(pctx, set, last, time.Since(start), said, false)
			}
			continue
		case <-causeTick:
			if !settled && pctx.Err() == nil && r.progress(pctx, set, last, time.Since(start), said, true) {
				tick.Reset(every)
			}
			continue
		case <-needsTick:
			if !settled && pctx.Err() == nil {
				if id, rs := r.unmetNeed(pctx, set, last); rs != nil {
					last[id] = rs
					settled = true
					cancel()
				}
			}
			continue
		}
		if !ok {
			break
		}
		if e.Type != event.ResourceUpdateEvent || e.Resource == nil {
			continue
		}
		last[e.Resource.Identifier] = e.Resource
		if !settled && e.Resource.Status == status.FailedStatus && guard.ruleFor(e.Resource.Identifier) != nil {
			// A rule's failed is the controller's verdict: waiting
			// longer changes nothing.
			settled = true
			cancel()
			continue
		}
		if settled || len(last) < len(set) {
			continue
		}
		current, failed := 0, 0
		for _, rs := range last {
			switch rs.Status {
			case status.CurrentStatus:
				current++
			case status.FailedStatus:
				failed++
			}
		}
		if current+failed == len(set) {
			settled = true
			cancel()
		}
	}
	return last, !settled && ctx.Err() != nil
}

// needsEvery is how often the wait looks for an object whose need is
// missing; maxNeedsRead bounds the reads of one look.
const (
	needsEvery   = 2 * time.Second
	maxNeedsRead = 20
)

// unmetNeed is the first object of set, in progress by its rule, that
// needs an object neither in set nor on the cluster while what its
// controller made for it says why it waits: its status, failed, naming
// both. Each need is read once a look, at most maxNeedsRead of them, and
// what the controller made for at most maxNeedsRead objects.
func (r *run) unmetNeed(ctx context.Context, set object.ObjMetadataSet, last map[object.ObjMetadata]*event.ResourceStatus) (object.ObjMetadata, *event.ResourceStatus) {
	guard := r.waitGuard()
	absent := map[health.Reference]bool{}
	relatedReads := 0
	for _, id := range set {
		rs := last[id]
		if rs == nil || rs.Resource == nil || rs.Status != status.InProgressStatus || !health.HasNeeds(id.GroupKind) || guard.ruleFor(id) == nil {
			continue
		}
		for _, need := range health.Needs(rs.Resource) {
			gone, seen := absent[need]
			if !seen {
				if len(absent) >= maxNeedsRead {
					return object.ObjMetadata{}, nil
				}
				gone = r.needAbsent(ctx, set, need)
				absent[need] = gone
			}
			if !gone {
				continue
			}
			// What the controller made is read at most maxNeedsRead
			// times a look too (a LIST each).
			if relatedReads++; relatedReads > maxNeedsRead {
				return object.ObjMetadata{}, nil
			}
			related := r.relatedReasons(ctx, rs.Resource)
			if len(related) == 0 {
				continue
			}
			failed := *rs
			failed.Status = status.FailedStatus
			failed.Message = fmt.Sprintf("its %s %s is neither in this run nor on the cluster; %s", need.Kind, need.Name, related[0])
			return id, &failed
		}
	}
	return object.ObjMetadata{}, nil
}

// needAbsent: need is not in set, and the cluster answers that it does
// not exist (or that its kind does not).
func (r *run) needAbsent(ctx context.Context, set object.ObjMetadataSet, need health.Reference) bool {
	gk := schema.GroupKind{Group: need.Group, Kind: need.Kind}
	if slices.ContainsFunc(set, func(id object.ObjMetadata) bool {
		return id.GroupKind == gk && id.Namespace == need.Namespace && id.Name == need.Name
	}) {
		return false
	}
	mapping, err := r.clients.Client.RESTMapper().RESTMapping(gk)
	if err != nil {
		return meta.IsNoMatchError(err)
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(mapping.GroupVersionKind)
	err = r.clients.Client.Get(ctx, client.ObjectKey{Namespace: need.Namespace, Name: need.Name}, u)
	return apierrors.IsNotFound(err)
}

// progress says which objects of set are not ready yet, after elapsed:
// one line, naming the first few with a short why (their status, and for
// a workload what its pods say, from one LIST of them, and the Warning
// events of the few whose status says nothing: a failing readiness probe
// says why only there). said holds the cause each named object was last
// said with; onlyNew, the line is said only when one of them has a cause
// it was not said with. It reports whether it said the line.
func (r *run) progress(ctx context.Context, set object.ObjMetadataSet, last map[object.ObjMetadata]*event.ResourceStatus, elapsed time.Duration, said map[object.ObjMetadata]string, onlyNew bool) bool {
	var waiting []waitingObject
	changed := false
	causes := map[object.ObjMetadata]string{}
	for _, id := range set {
		rs := last[id]
		if rs != nil && rs.Status == status.CurrentStatus {
			continue
		}
		w := waitingObject{ref: fmtID(id)}
		if len(waiting) < maxProgressNamed {
			var cause string
			w.why, cause = r.shortWhy(ctx, id, rs)
			causes[id] = cause
			changed = changed || (cause != "" && cause != said[id])
		}
		waiting = append(waiting, w)
	}
	if len(waiting) == 0 || (onlyNew && !changed) {
		return false
	}
	clear(said)
	maps.Copy(said, causes)
	var left time.Duration
	if d, ok := ctx.Deadline(); ok {
		left = time.Until(d)
	}
	r.obs.Info(progressLine(waiting, len(set), elapsed, left))
	return true
}

// shortWhy is why an object is not ready, as a progress line says it:
// its status and kstatus's message, and its pods' most common cause (or
// what its controller made for it says), which it returns as cause too.
// Both are put on one line and masked: a progress line cuts them, a
// secret cut in two is not found by the mask, and one the message held
// across a line break is the secret only once on one line.
func (r *run) shortWhy(ctx context.Context, id object.ObjMetadata, rs *event.ResourceStatus) (why, cause string) {
	if rs == nil {
		return "not read yet", ""
	}
	var parts, causes []string
	if rs.Status != status.InProgressStatus {
		parts = append(parts, rs.Status.String())
	}
	if rs.Message != "" {
		parts = append(parts, rs.Message)
	}
	if rs.Resource != nil {
		if isWorkload(rs.Resource) {
			lctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			pods := r.podReasons(lctx, rs.Resource, true)
			cancel()
			switch {
			case len(pods) == 0:
			case saysNoCause(pods[0]) || isNote(pods[0]):
				// Said, but not a cause: it does not make a line of
				// its own.
				parts = append(parts, pods[0])
			default:
				causes = append(causes, pods[0])
			}
		}
		lctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		if related := r.relatedReasons(lctx, rs.Resource); len(related) > 0 {
			causes = append(causes, related[0])
		}
		cancel()
	}
	return r.mask(flat(strings.Join(append(parts, causes...), ", "))), r.mask(flat(strings.Join(causes, ", ")))
}

// mask masks the secret values s holds, as output masks them.
func (r *run) mask(s string) string {
	if r.opts.Mask == nil {
		return s
	}
	return r.opts.Mask(s)
}

// explain says why an object is not ready, one cause per line: kstatus's
// message and failing conditions, and for workloads what is wrong with
// their pods, each cause once with the number of pods that give it.
func (r *run) explain(ctx context.Context, id object.ObjMetadata, rs *event.ResourceStatus) []string {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var parts []string
	if rs == nil {
		return []string{"its status could not be read"}
	}
	if rs.Message != "" {
		parts = append(parts, rs.Message)
	}
	if rs.Error != nil {
		parts = append(parts, rs.Error.Error())
	}
	if rs.Resource != nil {
		// The poller keeps the object as it was when its status last
		// changed; conditions set since (a ReplicaSet that cannot create
		// pods) are only in the object as it is now.
		obj := rs.Resource
		now := &unstructured.Unstructured{}
		now.SetGroupVersionKind(obj.GroupVersionKind())
		if err := r.clients.Client.Get(ctx, client.ObjectKeyFromObject(obj), now); err == nil {
			obj = now
		}
		parts = append(parts, failingConditions(obj)...)
		for _, why := range r.relatedReasons(ctx, obj) {
			// A status the wait failed for a missing need names it.
			if !strings.Contains(rs.Message, why) {
				parts = append(parts, why)
			}
		}
		if isWorkload(obj) {
			parts = append(parts, r.podReasons(ctx, obj, true)...)
		}
	}
	// Put on one line and masked before boundCauses cuts them: a secret
	// cut in two is not found by the mask, and one the message held
	// across a line break is the secret only once on one line.
	for i := range parts {
		parts[i] = r.mask(flat(parts[i]))
	}
	return boundCauses(parts)
}

// failingConditions lists conditions that say something is wrong.
func failingConditions(u *unstructured.Unstructured) []string {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	var out []string
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if !ok {
			continue
		}
		typ, _ := m["type"].(string)
		st, _ := m["status"].(string)
		reason, _ := m["reason"].(string)
		msg, _ := m["message"].(string)
		bad := (st == "False" && typ != "Stalled" && typ != "Reconciling") || ((typ == "Stalled" || typ == "ReplicaFailure" || typ == "Failed") && st == "True")
		if bad {
			out = append(out, fmt.Sprintf("condition %s=%s (%s): %s", typ, st, reason, msg))
		}
	}
	return out
}

// workloads are the kinds whose pods the wait reads.
var workloads = map[schema.GroupKind]bool{
	{Group: "apps", Kind: "Deployment"}: true, {Group: "apps", Kind: "StatefulSet"}: true,
	{Group: "apps", Kind: "DaemonSet"}: true, {Group: "apps", Kind: "ReplicaSet"}: true,
	{Group: "batch", Kind: "Job"}: true,
}

// isWorkload: u is a kind whose pods the wait reads.
func isWorkload(u *unstructured.Unstructured) bool {
	return workloads[u.GroupVersionKind().GroupKind()]
}

// podSelector is the label selector of a workload's pods, all of it
// (matchLabels and matchExpressions); nil when it has none or it does
// not parse.
func podSelector(u *unstructured.Unstructured) labels.Selector {
	raw, found, err := unstructured.NestedMap(u.Object, "spec", "selector")
	if !found || err != nil {
		return nil
	}
	var ls metav1.LabelSelector
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw, &ls); err != nil {
		return nil
	}
	sel, err := metav1.LabelSelectorAsSelector(&ls)
	if err != nil || sel.Empty() {
		return nil
	}
	return sel
}

// maxPodsListed bounds the pods of one workload whose causes are read,
// maxPodsRead the pods its selector matches that are read to find them
// (a pod of the namespace can carry any labels); maxEventReads the pods
// whose events are read, one LIST each, for want of a cause in their
// status.
const (
	maxPodsListed = 50
	maxPodsRead   = 500
	maxEventReads = 3
)

// readPages reads a LIST in pages of maxPodsListed items: page reads the
// one that cont names and returns the next one's continue. It stops
// after the last page, when page says stop (it has what it keeps, and
// more), or after maxPodsRead items' worth of pages; more says that
// items were left unread. Anyone who may write in the namespace can add
// objects to any LIST the wait makes.
func readPages(page func(cont string) (next string, stop bool, err error)) (more bool, err error) {
	cont := ""
	for pages := 1; ; pages++ {
		next, stop, err := page(cont)
		switch {
		case err != nil:
			return false, err
		case stop:
			return true, nil
		case next == "":
			return false, nil
		case pages*maxPodsListed >= maxPodsRead:
			return true, nil
		}
		cont = next
	}
}

// podOwners is who may own workload's pods: workload itself, or for a
// Deployment the ReplicaSets it controls. A label is anyone's to set;
// the controller reference is set by the workload's controller.
// more says that not every ReplicaSet the selector matches was read.
func (r *run) podOwners(ctx context.Context, workload *unstructured.Unstructured, sel labels.Selector) (owners map[types.UID]bool, more bool, err error) {
	uid := workload.GetUID()
	if uid == "" {
		return nil, false, nil
	}
	if workload.GetKind() != "Deployment" {
		return map[types.UID]bool{uid: true}, false, nil
	}
	owners = map[types.UID]bool{}
	more, err = readPages(func(cont string) (string, bool, error) {
		list, err := r.clients.Kube.AppsV1().ReplicaSets(workload.GetNamespace()).List(ctx, metav1.ListOptions{LabelSelector: sel.String(), Limit: maxPodsListed, Continue: cont})
		if err != nil {
			return "", false, err
		}
		for i := range list.Items {
			if c := metav1.GetControllerOfNoCopy(&list.Items[i]); c != nil && c.UID == uid {
				owners[list.Items[i].UID] = true
			}
		}
		return list.Continue, false, nil
	})
	return owners, more, err
}

// podReasons reads why a workload's pods are not ready (unschedulable,
// image pull failures, crash loops), grouped: one line per distinct
// cause, with the number of pods that give it, most pods first. A pod's
// status says it; withEvents, the Warning events of a pod whose status
// does not are read too (a failing probe is said only by an event).
//
// Only the workload's own pods are read: those its selector matches
// whose controller is the workload (or one of its ReplicaSets). Any
// writer of the namespace can make a pod with the same labels and write
// its status; that pod's word is not the workload's.
//
// What a container logged is read only when the workflow asks for it
// (PodLogLines; logCause says how it is masked): a pod's log is whatever
// its image prints, Secrets of its namespace included, and the job
// summary and the pull request's comment would publish it.
func (r *run) podReasons(ctx context.Context, workload *unstructured.Unstructured, withEvents bool) []string {
	sel := podSelector(workload)
	if sel == nil {
		return nil
	}
	namespace := workload.GetNamespace()
	owners, cut, err := r.podOwners(ctx, workload, sel)
	if err != nil {
		return []string{"its ReplicaSets could not be listed: " + err.Error()}
	}
	if len(owners) == 0 {
		if cut {
			// Objects that only carry its labels can crowd its own
			// out of what is read: said, not silently nothing.
			return []string{fmt.Sprintf("(none of its ReplicaSets among the first %d its selector matches)", maxPodsRead)}
		}
		return nil
	}
	var pods []*corev1.Pod
	more, err := readPages(func(cont string) (string, bool, error) {
		list, err := r.clients.Kube.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: sel.String(), Limit: maxPodsListed, Continue: cont})
		if err != nil {
			return "", false, err
		}
		for i := range list.Items {
			p := &list.Items[i]
			if c := metav1.GetControllerOfNoCopy(p); c == nil || !owners[c.UID] {
				continue
			}
			if len(pods) == maxPodsListed {
				return "", true, nil
			}
			pods = append(pods, p)
		}
		return list.Continue, false, nil
	})
	if err != nil {
		return []string{"its pods could not be listed: " + err.Error()}
	}
	var groups causeGroups
	eventReads, logReads := 0, 0
	for _, p := range pods {
		causes := statusCauses(p)
		for i, c := range causes {
			if c.crash.container == "" || logReads == maxLogReads {
				continue
			}
			logReads++
			if said := r.logSaid(ctx, p, c.crash); said != "" {
				causes[i].msg = strings.TrimPrefix(causes[i].msg+"; "+said, "; ")
			}
		}
		if isPodReady(p) && len(causes) == 0 {
			continue
		}
		if len(causes) == 0 && withEvents && eventReads < maxEventReads {
			eventReads++
			events, err := r.clients.Kube.CoreV1().Events(namespace).List(ctx, metav1.ListOptions{
				Limit: maxEventsRead,
				FieldSelector: fields.AndSelectors(
					fields.OneTermEqualSelector("involvedObject.kind", "Pod"),
					fields.OneTermEqualSelector("involvedObject.name", p.Name),
					fields.OneTermEqualSelector("involvedObject.uid", string(p.UID)),
					fields.OneTermEqualSelector("type", corev1.EventTypeWarning),
				).String(),
			})
			if err == nil {
				causes = eventCauses(events.Items)
			}
		}
		groups.add(causes)
	}
	out := groups.lines()
	switch {
	case more && len(pods) == 0:
		out = append(out, fmt.Sprintf("(none of its pods among the first %d its selector matches)", maxPodsRead))
	case more:
		out = append(out, fmt.Sprintf("(of the first %d pods)", len(pods)))
	}
	return out
}

func isPodReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// fmtID names an object like ssa does: Kind/namespace/name.
func fmtID(id object.ObjMetadata) string {
	return result.Ref(id.GroupKind.Group, id.GroupKind.Kind, id.Namespace, id.Name)
}

// relatedReasons is what the objects obj's controller made for it (a
// Certificate's CertificateRequests) say of why they are not ready, each
// as "Kind/name: message".
func (r *run) relatedReasons(ctx context.Context, obj *unstructured.Unstructured) []string {
	gvk, ok := health.Related(obj.GroupVersionKind().GroupKind())
	guard := r.waitGuard()
	if !ok || guard.ruleFor(object.UnstructuredToObjMetadata(obj)) == nil || obj.GetUID() == "" {
		return nil
	}
	var out []string
	_, _ = readPages(func(cont string) (string, bool, error) {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		if err := r.clients.Client.List(ctx, list, client.InNamespace(obj.GetNamespace()), client.Limit(maxPodsListed), client.Continue(cont)); err != nil {
			return "", false, err
		}
		for i := range list.Items {
			item := &list.Items[i]
			// Made by obj's controller: any writer of the namespace can
			// name obj as an owner; the controller reference is the
			// controller's.
			if c := metav1.GetControllerOfNoCopy(item); c == nil || c.UID != obj.GetUID() || guard.ruleFor(object.UnstructuredToObjMetadata(item)) == nil {
				continue
			}
			if msg := health.ObjectMessage(item, false); msg != "" && !guard.currentNow(ctx, item) {
				out = append(out, gvk.Kind+"/"+item.GetName()+": "+msg)
			}
			if len(out) == maxRelatedSaid {
				return "", true, nil
			}
		}
		return list.GetContinue(), false, nil
	})
	return out
}

// maxRelatedSaid bounds the objects a controller made for one object
// whose messages are said; they are read as a workload's pods are
// (readPages).
const maxRelatedSaid = 5
