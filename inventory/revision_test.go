package inventory

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

func configMap(name, value string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": name, "namespace": "shop"},
		"data":     map[string]any{"k": value},
	}}
}

// save saves inv as a run does. The fake client gives no resource
// version: the stored one is read back.
func save(t *testing.T, s *Store, inv *Inventory) {
	t.Helper()
	if err := s.Save(context.Background(), inv); err != nil {
		t.Fatal(err)
	}
	if inv.resourceVersion == "" {
		inv.resourceVersion = "1"
	}
}

// record begins a revision of objs and finishes it with outcome, saving
// the inventory as a run does.
func record(t *testing.T, s *Store, inv *Inventory, objs []*unstructured.Unstructured, outcome string, history int) *Revision {
	t.Helper()
	ctx := context.Background()
	rv, err := NewRevision(inv.Namespace, inv.Name, objs, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Begin(ctx, inv, rv, history); err != nil {
		t.Fatal(err)
	}
	save(t, s, inv)
	trimmed := inv.Finish(rv.Number, outcome)
	save(t, s, inv)
	if err := s.DeleteStored(ctx, inv, trimmed); err != nil {
		t.Fatal(err)
	}
	return rv
}

func numbersOf(list []*Revision) []int {
	var out []int
	for _, rv := range list {
		out = append(out, rv.Number)
	}
	return out
}

func TestRevisionsAreNumberedAndBoundedByHistory(t *testing.T) {
	ctx := context.Background()
	client := fake.NewClientset()
	s := &Store{Client: client}
	inv, _ := s.Load(ctx, "shop", "shop")
	for i := 1; i <= 5; i++ {
		rv := record(t, s, inv, []*unstructured.Unstructured{configMap("a", fmt.Sprint(i))}, "ReconciliationSucceeded", 3)
		if rv.Number != i {
			t.Fatalf("revision %d numbered %d", i, rv.Number)
		}
	}
	// What the inventory records, read back as the next run reads it.
	inv, err := s.Load(ctx, "shop", "shop")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]int{5, 4, 3}, numbersOf(inv.Revisions)); diff != "" {
		t.Errorf("kept revisions (-want +got):\n%s", diff)
	}
	secrets, _ := client.CoreV1().Secrets("shop").List(ctx, metav1.ListOptions{})
	if len(secrets.Items) != 3 {
		t.Errorf("%d revision Secrets stored, want the 3 kept", len(secrets.Items))
	}
	rv, err := s.Revision(ctx, inv, 4)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := rv.ObjectsOf()
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 1 || objs[0].Object["data"].(map[string]any)["k"] != "4" {
		t.Errorf("revision 4 holds %v", objs)
	}
	if _, err := s.Revision(ctx, inv, 1); err == nil {
		t.Error("revision 1 should be gone")
	}
}

// Only what the inventory records is a revision. Whoever may write
// Secrets in its namespace can label one as revision 1000 of it, or put
// a ClusterRoleBinding in the payload of a real one: the first is
// ignored (numbers come from the inventory, nothing is trimmed for it),
// named as a stray, and deleted only with the inventory; the second is
// refused when read, as its payload no longer matches the digest
// recorded.
func TestForgedRevisionsAreNotUsed(t *testing.T) {
	ctx := context.Background()
	client := fake.NewClientset()
	s := &Store{Client: client}
	inv, _ := s.Load(ctx, "shop", "shop")
	record(t, s, inv, []*unstructured.Unstructured{configMap("a", "1")}, "ReconciliationSucceeded", 2)
	record(t, s, inv, []*unstructured.Unstructured{configMap("a", "2")}, "ReconciliationSucceeded", 2)

	binding := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
		"metadata": map[string]any{"name": "pwned"},
		"roleRef":  map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
	}}
	forged, err := NewRevision("shop", "shop", []*unstructured.Unstructured{binding}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	forged.Number = 1000
	if err := s.writePayloads(ctx, forged); err != nil {
		t.Fatal(err)
	}
	// The payload of revision 2 replaced by the binding's.
	sec, err := client.CoreV1().Secrets("shop").Get(ctx, RevisionName("shop", 2), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sec.Data[dataObjects] = forged.payloads[""]
	if _, err := client.CoreV1().Secrets("shop").Update(ctx, sec, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	inv, _ = s.Load(ctx, "shop", "shop")
	strays, err := s.Strays(ctx, inv)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"shop/gantry-shop.v1000"}, strays); diff != "" {
		t.Errorf("strays (-want +got):\n%s", diff)
	}
	if _, err := s.Revision(ctx, inv, 1000); err == nil {
		t.Error("a revision the inventory does not record was read")
	}
	rv, err := s.Revision(ctx, inv, 2)
	if err != nil {
		t.Fatal(err)
	}
	if objs, err := rv.ObjectsOf(); err == nil || !strings.Contains(err.Error(), "does not match the digest") {
		t.Errorf("a changed payload was read: %v, %v", objs, err)
	}
	// A Secret of the right name but not gantry's type is not read.
	sec, _ = client.CoreV1().Secrets("shop").Get(ctx, RevisionName("shop", 1), metav1.GetOptions{})
	sec.Type = corev1.SecretTypeOpaque
	_ = client.CoreV1().Secrets("shop").Delete(ctx, sec.Name, metav1.DeleteOptions{})
	sec.ResourceVersion = ""
	if _, err := client.CoreV1().Secrets("shop").Create(ctx, sec, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Revision(ctx, inv, 1); err == nil || !strings.Contains(err.Error(), "not the one gantry wrote") {
		t.Errorf("a Secret of another type was read as a revision: %v", err)
	}
	// The next revision is numbered from the inventory, and trims by its
	// own count: revision 1000 changes neither.
	rv3 := record(t, s, inv, []*unstructured.Unstructured{configMap("a", "3")}, "ReconciliationSucceeded", 2)
	if rv3.Number != 3 {
		t.Errorf("numbered %d after a forged revision 1000, want 3", rv3.Number)
	}
	if diff := cmp.Diff([]int{3, 2}, numbersOf(inv.Revisions)); diff != "" {
		t.Errorf("kept (-want +got):\n%s", diff)
	}
	if _, err := client.CoreV1().Secrets("shop").Get(ctx, "gantry-shop.v1000", metav1.GetOptions{}); err != nil {
		t.Errorf("a stray was deleted by an apply: %v", err)
	}
	// Deleting the inventory's revisions deletes it too: its name and
	// type are gantry's, and it may hold objects.
	if err := s.DeleteRevisions(ctx, inv); err != nil {
		t.Fatal(err)
	}
	left, _ := client.CoreV1().Secrets("shop").List(ctx, metav1.ListOptions{})
	var names []string
	for _, sec := range left.Items {
		names = append(names, sec.Name)
	}
	if len(names) != 0 {
		t.Errorf("left after delete: %v", names)
	}
}

// A Secret of another namespace than the inventory's is kept in a
// revision Secret of its own namespace: who may read Secrets only in the
// inventory's namespace reads none of its value there.
func TestRevisionKeepsSecretsOfOtherNamespacesWhereTheyAre(t *testing.T) {
	ctx := context.Background()
	client := fake.NewClientset()
	s := &Store{Client: client}
	inv, _ := s.Load(ctx, "gantry", "shop")
	secret := func(ns, value string) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "v1", "kind": "Secret",
			"metadata": map[string]any{"name": "db", "namespace": ns},
			"data":     map[string]any{"password": base64.StdEncoding.EncodeToString([]byte(value))},
		}}
	}
	objs := []*unstructured.Unstructured{configMap("a", "1"), secret("payments", "payments-password"), secret("gantry", "own-password")}
	rv := record(t, s, inv, objs, "ReconciliationSucceeded", 5)

	readable := func(ns string) string {
		t.Helper()
		list, _ := client.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{})
		var all strings.Builder
		for _, sec := range list.Items {
			raw, err := inflate(sec.Data[dataObjects], MaxRevisionRawBytes)
			if err != nil {
				t.Fatal(err)
			}
			all.Write(raw)
		}
		return all.String()
	}
	payments := base64.StdEncoding.EncodeToString([]byte("payments-password"))
	if strings.Contains(readable("gantry"), payments) {
		t.Error("the inventory's namespace holds the value of a Secret of payments")
	}
	if !strings.Contains(readable("payments"), payments) || !strings.Contains(readable("gantry"), base64.StdEncoding.EncodeToString([]byte("own-password"))) {
		t.Error("a Secret's value is not kept where it belongs")
	}
	inv, _ = s.Load(ctx, "gantry", "shop")
	got, err := s.Revision(ctx, inv, rv.Number)
	if err != nil {
		t.Fatal(err)
	}
	back, err := got.ObjectsOf()
	if err != nil {
		t.Fatal(err)
	}
	if len(back) != 3 {
		t.Fatalf("read back %d objects, want 3", len(back))
	}
	again, _ := NewRevision("gantry", "shop", back, nil, nil)
	if again.Digest != rv.Digest {
		t.Errorf("the set read back has another digest: %s, recorded %s", again.Digest, rv.Digest)
	}
	// Trimming and deleting reach the other namespace too.
	if err := s.DeleteRevisions(ctx, inv); err != nil {
		t.Fatal(err)
	}
	if left := readable("payments"); left != "" {
		t.Errorf("payments still holds a revision: %s", left)
	}
}

// A run that may not create Secrets still records its deploy, without
// its objects, and says why.
func TestRevisionRecordedWithoutTheRightToWriteSecrets(t *testing.T) {
	ctx := context.Background()
	client := fake.NewClientset()
	client.PrependReactor("create", "secrets", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(corev1.Resource("secrets"), "", errors.New("no"))
	})
	s := &Store{Client: client}
	inv, _ := s.Load(ctx, "shop", "shop")
	rv, err := NewRevision("shop", "shop", []*unstructured.Unstructured{configMap("a", "1")}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = s.Begin(ctx, inv, rv, 0)
	if err == nil || !strings.Contains(err.Error(), "recorded without them") {
		t.Errorf("got %v, want a warning", err)
	}
	if len(inv.Revisions) != 1 || inv.Revisions[0].Outcome != OutcomePending || inv.Revisions[0].HoldsObjects() {
		t.Errorf("recorded %+v", inv.Revisions)
	}
}

func TestRevisionTooLargeIsRefusedBeforeWriting(t *testing.T) {
	// Random data does not compress: 1,200 KiB of it cannot fit.
	buf := make([]byte, 1200*1024)
	if _, err := rand.Read(buf); err != nil {
		t.Fatal(err)
	}
	_, err := NewRevision("shop", "shop", []*unstructured.Unstructured{configMap("big", base64.StdEncoding.EncodeToString(buf))}, nil, nil)
	var tl *TooLargeError
	if !errors.As(err, &tl) {
		t.Fatalf("got %v, want a TooLargeError", err)
	}
	// A set of many alike objects compresses well and fits.
	var many []*unstructured.Unstructured
	for i := range 3000 {
		many = append(many, configMap(fmt.Sprintf("cm-%d", i), "the same value in every one of them"))
	}
	if _, err := NewRevision("shop", "shop", many, nil, nil); err != nil {
		t.Errorf("3,000 small objects: %v", err)
	}
}

func TestRevisionOfAnArtifactHoldsNoObjects(t *testing.T) {
	ctx := context.Background()
	s := &Store{Client: fake.NewClientset()}
	inv, _ := s.Load(ctx, "shop", "shop")
	rv, err := NewRevision("shop", "shop", nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	rv.Artifact, rv.Digest, rv.Objects = "oci://r.example/shop@sha256:abc", "sha256:abc", 12
	if err := s.Begin(ctx, inv, rv, DefaultHistory); err != nil {
		t.Fatal(err)
	}
	got, err := s.Revision(ctx, inv, 1)
	if err != nil {
		t.Fatal(err)
	}
	if got.HoldsObjects() || got.Artifact != rv.Artifact || got.Objects != 12 {
		t.Errorf("read back %+v", got)
	}
	if _, err := got.ObjectsOf(); err == nil {
		t.Error("the objects of an artifact's revision should be refused")
	}
}

// A run that may not list Secrets cannot know what revisions another run
// recorded: deleting them fails, naming the right it lacks, rather than
// leave their payloads behind.
func TestDeleteRevisionsWithoutTheRightToListSecrets(t *testing.T) {
	client := fake.NewClientset()
	client.PrependReactor("list", "secrets", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(corev1.Resource("secrets"), "", errors.New("no"))
	})
	err := (&Store{Client: client}).DeleteRevisions(context.Background(), &Inventory{Name: "shop", Namespace: "ns"})
	if err == nil || !strings.Contains(err.Error(), "cannot be listed") || !strings.Contains(err.Error(), "list and delete Secrets in ns") {
		t.Errorf("got %v, want a refusal naming the right", err)
	}
}

// A payload that fits in a Secret but inflates past what gantry records
// is refused when read, before it is parsed.
func TestRevisionPayloadBoundedAfterDecompression(t *testing.T) {
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	if _, err := zw.Write(bytes.Repeat([]byte(" "), MaxRevisionRawBytes+1)); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if b.Len() > MaxRevisionBytes {
		t.Fatalf("the bomb is %d bytes compressed, over what a Secret holds: the test proves nothing", b.Len())
	}
	rv := &Revision{Number: 3, Namespace: "ns", Inventory: "shop", Payloads: map[string]string{"": "sha256:x"}, payloads: map[string][]byte{"": b.Bytes()}}
	if _, err := rv.ObjectsOf(); err == nil || !strings.Contains(err.Error(), "inflate to more than") {
		t.Errorf("got %v, want the payload refused", err)
	}
}

// Trimming keeps what a rollback needs: a run without its own history
// keeps as many as the last revision was kept with (a manual rollback
// after a pipeline's history: 20); a run that failed deletes no revision
// that succeeded, so that history: 1 with a failed apply, or five failed
// applies in a row, still leave one to roll back to.
func TestTrimmingKeepsWhatARollbackNeeds(t *testing.T) {
	ctx := context.Background()
	var s *Store
	var inv *Inventory
	fresh := func() {
		s = &Store{Client: fake.NewClientset()}
		inv, _ = s.Load(ctx, "shop", "shop")
	}
	add := func(outcome string, history int) int {
		t.Helper()
		return record(t, s, inv, []*unstructured.Unstructured{configMap("a", outcome+fmt.Sprint(time.Now().UnixNano()))}, outcome, history).Number
	}
	kept := func() []int {
		t.Helper()
		stored, err := s.Load(ctx, "shop", "shop")
		if err != nil {
			t.Fatal(err)
		}
		return numbersOf(stored.Revisions)
	}

	// A pipeline keeps 20; a manual rollback without history keeps 20 too.
	fresh()
	for range 20 {
		add("ReconciliationSucceeded", 20)
	}
	add("RolledBack", 0)
	if got := kept(); len(got) != 20 || got[0] != 21 {
		t.Errorf("after a manual rollback: %v, want the 20 newest", got)
	}

	// history: 1, then an apply that fails: the good revision stays.
	fresh()
	add("ReconciliationSucceeded", 1)
	add("HealthCheckFailed", 1)
	if diff := cmp.Diff([]int{2, 1}, kept()); diff != "" {
		t.Errorf("history 1 and a failure (-want +got):\n%s", diff)
	}
	// Five failures in a row: the good one and the newest failure stay.
	for range 5 {
		add("ApplyFailed", 1)
	}
	if diff := cmp.Diff([]int{7, 1}, kept()); diff != "" {
		t.Errorf("five failures after it (-want +got):\n%s", diff)
	}
	// The next success trims what history says.
	add("ReconciliationSucceeded", 1)
	if diff := cmp.Diff([]int{8}, kept()); diff != "" {
		t.Errorf("after a success (-want +got):\n%s", diff)
	}
}

// The inventory keeps its records and which entries were adopted, and
// forgets an adopted entry once it no longer lists it.
func TestInventoryKeepsRecordsAndAdoptedEntries(t *testing.T) {
	ctx := context.Background()
	s := &Store{Client: fake.NewClientset()}
	inv, _ := s.Load(ctx, "shop", "shop")
	a, b := EntryFor(configMap("a", "1")), EntryFor(configMap("b", "1"))
	inv.Entries = []Entry{a, b}
	inv.Adopted = []string{b.ID, "shop_gone__ConfigMap"}
	record(t, s, inv, []*unstructured.Unstructured{configMap("a", "1"), configMap("b", "1")}, "ReconciliationSucceeded", 3)
	back, err := s.Load(ctx, "shop", "shop")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{b.ID}, back.Adopted); diff != "" {
		t.Errorf("adopted (-want +got):\n%s", diff)
	}
	if len(back.Revisions) != 1 || back.Revisions[0].Outcome != "ReconciliationSucceeded" || !back.Revisions[0].HoldsObjects() || back.Revisions[0].History != 3 {
		t.Errorf("records read back: %+v", back.Revisions[0])
	}
}

// A Secret of someone's own, not of gantry's type, under the name the next
// revision would take (in the inventory's namespace, or where a Secret of
// the set goes) is never written over: the deploy is recorded without its
// objects, and says why.
func TestRevisionNeverWritesOverAnotherSecret(t *testing.T) {
	ctx := context.Background()
	theirs := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: RevisionName("shop", 1), Namespace: "shop"},
		Type: corev1.SecretTypeOpaque, Data: map[string][]byte{"password": []byte("theirs")}}
	client := fake.NewClientset(theirs)
	s := &Store{Client: client}
	inv, _ := s.Load(ctx, "shop", "shop")
	rv, err := NewRevision("shop", "shop", []*unstructured.Unstructured{configMap("a", "1")}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Begin(ctx, inv, rv, 0); err == nil || !strings.Contains(err.Error(), "is not a gantry revision") {
		t.Errorf("got %v, want the Secret named as not gantry's", err)
	}
	got, err := client.CoreV1().Secrets("shop").Get(ctx, theirs.Name, metav1.GetOptions{})
	if err != nil || got.Type != corev1.SecretTypeOpaque || string(got.Data["password"]) != "theirs" {
		t.Errorf("their Secret was changed: %v %+v", err, got)
	}
	if len(inv.Revisions) != 1 || inv.Revisions[0].HoldsObjects() {
		t.Errorf("recorded %+v, want the deploy recorded without its objects", inv.Revisions)
	}
}

// A ConfigMap of another namespace that held a substituted secret is kept
// in that namespace too, as a Secret would be: who may read Secrets only
// where the inventory is reads no value bound for another namespace.
func TestRevisionKeepsSecretValuesOfOtherNamespacesWhereTheyAre(t *testing.T) {
	ctx := context.Background()
	client := fake.NewClientset()
	s := &Store{Client: client}
	inv, _ := s.Load(ctx, "gantry", "shop")
	cm := configMap("settings", "postgres://app:substituted-password@db")
	cm.SetNamespace("payments")
	objs := []*unstructured.Unstructured{configMap("a", "1"), cm}
	masked := map[string][]string{EntryFor(cm).ID: {"/data/k"}}
	rv, err := NewRevision("gantry", "shop", objs, masked, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Begin(ctx, inv, rv, 5); err != nil {
		t.Fatal(err)
	}
	save(t, s, inv)
	list, _ := client.CoreV1().Secrets("gantry").List(ctx, metav1.ListOptions{})
	for _, sec := range list.Items {
		raw, err := inflate(sec.Data[dataObjects], MaxRevisionRawBytes)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(raw), "substituted-password") {
			t.Errorf("the inventory's namespace holds a secret value bound for payments (Secret %s)", sec.Name)
		}
	}
	if rv.Payloads["payments"] == "" {
		t.Errorf("no payload in payments: %v", rv.Payloads)
	}
	inv, _ = s.Load(ctx, "gantry", "shop")
	got, err := s.Revision(ctx, inv, rv.Number)
	if err != nil {
		t.Fatal(err)
	}
	if back, err := got.ObjectsOf(); err != nil || len(back) != 2 {
		t.Fatalf("read back: %v, %d objects", err, len(back))
	}
}
