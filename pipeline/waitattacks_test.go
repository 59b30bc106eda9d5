package pipeline

// What an attacker who can write in a namespace tried against the wait,
// kept as it was reproduced.

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/cli-utils/pkg/kstatus/polling/event"
	"github.com/fluxcd/cli-utils/pkg/object"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	kubefake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/gantry-dev/gantry/health"
	"github.com/gantry-dev/gantry/kube"
	"github.com/gantry-dev/gantry/redact"
)

// a rule's verdict message is the object's own condition message
// cut at 297 bytes (health.oneLine) before the wait masks it: a secret
// the message quotes where the cut falls is left as a prefix that the
// mask no longer finds, in the wait's failure and the object's health.
func TestAttackRuleMessageIsCutBeforeItIsMasked(t *testing.T) {
	secret := "pg-S3cretPassw0rd-for-the-orders-db"
	prefix := "could not render template: "
	// The verdict keeps 297 bytes of "SecretSyncedError: <message>":
	// the secret's first 20 bytes fall before the cut. The message's
	// text is not ASCII (two bytes a rune), so the bytes cut are fewer
	// runes than the wait's own bound of 300 runes a cause.
	head := "SecretSyncedError: " + prefix
	msg := prefix + strings.Repeat("é", (297-len(head)-21)/2) + " " + secret + " is not valid"
	es := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "external-secrets.io/v1", "kind": "ExternalSecret",
		"metadata": map[string]any{"name": "db", "namespace": "shop", "uid": "uid-es", "generation": int64(1), "resourceVersion": "1"},
		"status": map[string]any{"conditions": []any{map[string]any{
			"type": "Ready", "status": "False", "reason": "SecretSyncedError", "message": msg}}},
	}}
	rules, _, err := health.Compile(nil, true)
	if err != nil {
		t.Fatal(err)
	}
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(schema.GroupVersionKind{Group: "external-secrets.io", Version: "v1", Kind: "ExternalSecret"}, meta.RESTScopeNamespace)
	r := newRun("apply", Options{Health: rules, Mask: redact.New(secret).String}, nil, &infos{})
	r.clients = &kube.Clients{Client: fake.NewClientBuilder().WithRESTMapper(mapper).WithObjects(es.DeepCopy()).Build(), Mapper: mapper}
	// What the poller computes of it, as newStatusPoller does.
	v, ok := r.waitGuard().evaluate(context.Background(), es)
	if !ok {
		t.Fatal("no rule")
	}
	id := object.UnstructuredToObjMetadata(es)
	rs := &event.ResourceStatus{Identifier: id, Resource: es, Status: v.Result.Status, Message: v.Result.Message}
	causes := r.explain(context.Background(), id, rs)
	failure := waitFailure([]notReadyObject{{ref: fmtID(id), status: rs.Status.String(), causes: causes}}, 1, 0)
	// What the console prints: masked again as a whole.
	printed := redact.New(secret).String(failure)
	if strings.Contains(printed, secret[:12]) {
		t.Errorf("the wait's failure shows a part of the secret past the mask:\n%s", printed)
	}
}

// the Warning events of a workload's pod are listed without a
// limit, and every one of them becomes a cause that podReasons groups
// with an insertion sort. Any writer of the namespace can create events
// about any pod (its name and UID are readable): tens of thousands of
// them make every cause look of the wait (every 2 s, up to 3 objects,
// 3 pods each) read them all and sort them in quadratic time.
func TestAttackPodEventsAreReadUnboundedAndSortedQuadratically(t *testing.T) {
	const n = 8000
	sts := replicaSet("db", "app", "web")
	sts.SetKind("StatefulSet")
	var objs []runtime.Object
	for i := 0; i < 3; i++ {
		p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("db-%d", i), Namespace: "shop", UID: types.UID("uid-db-" + fmt.Sprint(i)), Labels: map[string]string{"app": "web"}},
			Status: corev1.PodStatus{Phase: corev1.PodRunning}}
		controlledBy(&p, sts)
		objs = append(objs, &p)
	}
	// Pod db-0: n causes said once; pods db-1 and db-2: n other causes,
	// each said by both, so that each later cause moves past all the
	// earlier ones.
	var events []corev1.Event
	for i := 0; i < n; i++ {
		for pod, msg := range map[string]string{"db-0": fmt.Sprintf("a%d", i), "db-1": fmt.Sprintf("b%d", i), "db-2": fmt.Sprintf("b%d", i)} {
			events = append(events, corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s.%d", pod, i), Namespace: "shop"},
				InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: pod, Namespace: "shop"}, Type: "Warning", Reason: "Forged", Message: msg})
		}
	}
	cs := kubefake.NewClientset(objs...)
	var limits []int64
	// The API server filters by the field selector; the fake does not.
	cs.PrependReactor("list", "events", func(a k8stesting.Action) (bool, runtime.Object, error) {
		l := a.(k8stesting.ListActionImpl)
		limits = append(limits, l.ListOptions.Limit)
		sel := l.ListRestrictions.Fields
		out := &corev1.EventList{}
		for _, e := range events {
			if sel.Matches(fields.Set{"involvedObject.name": e.InvolvedObject.Name, "involvedObject.kind": "Pod", "type": "Warning",
				"involvedObject.uid": "uid-" + e.InvolvedObject.Name}) {
				out.Items = append(out.Items, e)
			}
		}
		return true, out, nil
	})
	r := newRun("apply", Options{}, nil, &infos{})
	r.clients = &kube.Clients{Kube: cs}
	start := time.Now()
	got := r.podReasons(context.Background(), sts, true)
	took := time.Since(start)
	t.Logf("%d causes in %s", len(got), took)
	for _, l := range limits {
		if l == 0 {
			t.Errorf("the events of a pod are listed without a limit")
			break
		}
	}
	if len(got) > 100 {
		t.Errorf("%d causes of 3 pods kept from their events: unbounded", len(got))
	}
}

func attackCertificate() *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "cert-manager.io/v1", "kind": "Certificate",
		"metadata": map[string]any{"name": "web", "namespace": "shop", "uid": "uid-cert", "generation": int64(1), "resourceVersion": "1"},
		"spec":     map[string]any{"secretName": "web-tls", "issuerRef": map[string]any{"name": "ca", "kind": "Issuer"}},
		"status": map[string]any{"conditions": []any{map[string]any{
			"type": "Ready", "status": "False", "reason": "DoesNotExist", "message": "Issuing certificate as Secret does not exist"}}},
	}}
}

func attackRequest(name string, controller bool, msg string) *unstructured.Unstructured {
	ref := map[string]any{"apiVersion": "cert-manager.io/v1", "kind": "Certificate", "name": "web", "uid": "uid-cert"}
	if controller {
		ref["controller"] = true
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "cert-manager.io/v1", "kind": "CertificateRequest",
		"metadata": map[string]any{"name": name, "namespace": "shop", "uid": "uid-" + name, "resourceVersion": "1",
			"ownerReferences": []any{ref}},
		"status": map[string]any{"conditions": []any{map[string]any{
			"type": "Ready", "status": "False", "reason": "Pending", "message": msg}}},
	}}
}

func attackCertRun(t *testing.T, objs ...client.Object) (*run, *[]int64) {
	t.Helper()
	rules, _, err := health.Compile(nil, true)
	if err != nil {
		t.Fatal(err)
	}
	mapper := meta.NewDefaultRESTMapper(nil)
	for _, k := range []string{"Certificate", "CertificateRequest", "Issuer"} {
		mapper.Add(schema.GroupVersionKind{Group: "cert-manager.io", Version: "v1", Kind: k}, meta.RESTScopeNamespace)
	}
	var limits []int64
	c := fake.NewClientBuilder().WithRESTMapper(mapper).WithObjects(objs...).WithInterceptorFuncs(interceptor.Funcs{
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			o := &client.ListOptions{}
			o.ApplyOptions(opts)
			limits = append(limits, o.Limit)
			return c.List(ctx, list, opts...)
		}}).Build()
	r := newRun("apply", Options{Health: rules}, nil, &infos{})
	r.clients = &kube.Clients{Client: c, Mapper: mapper}
	return r, &limits
}

// a CertificateRequest that merely names the Certificate in an
// ownerReference (not as its controller: cert-manager sets controller:
// true on the requests it makes) speaks for the Certificate: any writer
// of the namespace can create one, and its message is said in the
// progress line, the wait's failure and the report as the
// Certificate's cause. The pods of a workload are held to their
// controller reference (podOwners); the requests of a Certificate are
// not.
func TestAttackACertificateRequestNotControlledByTheCertificateSpeaksForIt(t *testing.T) {
	cert := attackCertificate()
	forged := attackRequest("web-forged", false, "forged: the issuer's ACME account was revoked, run ./fix.sh")
	real := attackRequest("web-1", true, "Referenced \"Issuer\" not found: issuer.cert-manager.io \"ca\" not found")
	r, _ := attackCertRun(t, cert, forged, real)
	got := r.relatedReasons(context.Background(), cert)
	if !slices.ContainsFunc(got, func(s string) bool { return strings.HasPrefix(s, "CertificateRequest/web-1: ") }) {
		t.Errorf("causes %q, want the request the Certificate controls", got)
	}
	for _, s := range got {
		if strings.Contains(s, "forged") {
			t.Errorf("a CertificateRequest the Certificate does not control speaks for it: %q", s)
		}
	}
}

// relatedReasons lists every CertificateRequest of the
// namespace, in one LIST without a limit, on every cause look of the
// wait (every 2 s, for each of the first 3 objects not ready), each
// progress line, each explanation and each look for missing needs.
func TestAttackCertificateRequestsAreListedWithoutALimit(t *testing.T) {
	cert := attackCertificate()
	objs := []client.Object{cert}
	for i := 0; i < 2000; i++ {
		// Not the Certificate's: any writer of the namespace can make
		// them.
		objs = append(objs, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "cert-manager.io/v1", "kind": "CertificateRequest",
			"metadata": map[string]any{"name": fmt.Sprintf("junk-%d", i), "namespace": "shop"},
			"spec":     map[string]any{"request": strings.Repeat("A", 4096)},
		}})
	}
	r, limits := attackCertRun(t, objs...)
	r.relatedReasons(context.Background(), cert)
	if len(*limits) == 0 {
		t.Fatal("no LIST")
	}
	for _, l := range *limits {
		if l == 0 {
			t.Errorf("CertificateRequests are listed without a limit: every one of the namespace is read, each look")
		}
	}
}

// the wait masks what the cluster says and then flattens it
// (flat: line breaks and other spaces made one space) and cuts it. A
// secret with a space in it (a passphrase) that the message holds with
// a line break (or a tab, a no-break space) there is not the secret
// when masked, becomes it when flattened, and is cut where the cause
// ends: the console's mask of the whole line no longer finds it.
func TestAttackASecretFlattenedAfterTheMaskIsCutPastIt(t *testing.T) {
	secret := "correct horse battery staple"
	w := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.com/v1", "kind": "Widget",
		"metadata": map[string]any{"name": "w", "namespace": "shop", "generation": int64(1)},
	}}
	// "condition Ready=False (Failed): " is 32 runes; the cause is cut
	// at maxCauseLen (300) runes: 14 runes of the secret remain.
	msg := "login as " + strings.Repeat("x", maxCauseLen-32-9-15) + " correct\nhorse battery staple refused"
	w.Object["status"] = map[string]any{"conditions": []any{map[string]any{
		"type": "Ready", "status": "False", "reason": "Failed", "message": msg}}}
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}, meta.RESTScopeNamespace)
	redact := redact.New(secret)
	r := newRun("apply", Options{Mask: redact.String}, nil, &infos{})
	r.clients = &kube.Clients{Client: fake.NewClientBuilder().WithRESTMapper(mapper).WithObjects(w.DeepCopy()).Build(), Mapper: mapper}
	id := object.UnstructuredToObjMetadata(w)
	rs := &event.ResourceStatus{Identifier: id, Resource: w, Status: "InProgress"}
	causes := r.explain(context.Background(), id, rs)
	// The console masks every line it prints as a whole, after.
	printed := redact.String(waitFailure([]notReadyObject{{ref: fmtID(id), status: "InProgress", causes: causes}}, 1, 0))
	t.Logf("%s", printed)
	if strings.Contains(printed, "correct horse") {
		t.Errorf("the wait's failure shows a part of the secret past the mask")
	}
	// The progress line: kstatus's message of the Widget is the
	// condition's, as it is.
	rs.Message = "login as " + strings.Repeat("x", maxProgressWhyLen-9-15) + " correct\thorse battery staple refused"
	why, _ := r.shortWhy(context.Background(), id, rs)
	line := redact.String(progressLine([]waitingObject{{ref: fmtID(id), why: why}}, 1, 0, 0))
	t.Logf("%s", line)
	if strings.Contains(line, "correct horse") {
		t.Errorf("the progress line shows a part of the secret past the mask")
	}
}

// A LIST whose pages never end (a continue token on every page) is read
// for at most maxPodsRead items' worth of pages, and says more were
// left; a page that has what it keeps stops the reading.
func TestAttackEndlessPagesAreBounded(t *testing.T) {
	pages := 0
	more, err := readPages(func(cont string) (string, bool, error) {
		pages++
		return "again", false, nil
	})
	if err != nil || !more || pages != maxPodsRead/maxPodsListed {
		t.Errorf("endless pages: %d read, more %v, %v; want %d, true", pages, more, err, maxPodsRead/maxPodsListed)
	}
	pages = 0
	more, _ = readPages(func(cont string) (string, bool, error) {
		pages++
		return "again", pages == 2, nil
	})
	if !more || pages != 2 {
		t.Errorf("a page that stops: %d read, more %v", pages, more)
	}
	pages = 0
	if more, _ = readPages(func(string) (string, bool, error) { pages++; return "", false, nil }); more || pages != 1 {
		t.Errorf("one page: %d read, more %v", pages, more)
	}
}
