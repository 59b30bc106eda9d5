package inventory

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes/fake"
)

func testKey(t *testing.T, secret string) *RecordKey {
	t.Helper()
	k, err := NewRecordKey(secret)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

const (
	workflowSecret = "0123456789abcdef0123456789abcdef-workflow"
	otherSecret    = "0123456789abcdef0123456789abcdef-another!"
)

// editRecord rewrites the stored revisions as a namespace writer can:
// through the ConfigMap, with no key.
func editRecord(t *testing.T, s *Store, ns, name string, edit func(revs []map[string]any) []map[string]any) {
	t.Helper()
	ctx := context.Background()
	cm, err := s.Client.CoreV1().ConfigMaps(ns).Get(ctx, ConfigMapName(name), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var revs []map[string]any
	if err := json.Unmarshal([]byte(cm.Data[dataRevs]), &revs); err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(edit(revs))
	cm.Data[dataRevs] = string(raw)
	if _, err := s.Client.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func TestRecordKeyIsLongEnough(t *testing.T) {
	if _, err := NewRecordKey("short-secret"); err == nil || !strings.Contains(err.Error(), "at least 32") {
		t.Errorf("a 12-character key: %v, want refused naming the length", err)
	}
	if _, err := NewRecordKey(workflowSecret); err != nil {
		t.Error(err)
	}
}

// Each way a namespace writer can change the record makes the revision
// one nothing is written from; the record as gantry wrote it passes.
func TestRecordAuthentication(t *testing.T) {
	obj := func(v string) []*unstructured.Unstructured { return []*unstructured.Unstructured{configMap("a", v)} }
	cases := []struct {
		name  string
		edit  func(revs []map[string]any) []map[string]any
		check int
		want  string // "" authentic
	}{
		{name: "as recorded", check: 1},
		{name: "the newest as recorded", check: 3},
		{name: "a payload digest replaced", check: 1, want: "MAC does not match", edit: func(revs []map[string]any) []map[string]any {
			revs[2]["payloads"] = map[string]any{"": "sha256:00"}
			return revs
		}},
		{name: "an artifact set", check: 1, want: "MAC does not match", edit: func(revs []map[string]any) []map[string]any {
			delete(revs[2], "payloads")
			revs[2]["artifact"] = "oci://evil.example/app@sha256:" + strings.Repeat("0", 64)
			return revs
		}},
		{name: "an outcome changed", check: 2, want: "MAC does not match", edit: func(revs []map[string]any) []map[string]any {
			revs[1]["outcome"] = "ReconciliationSucceeded"
			return revs
		}},
		{name: "the MAC taken out", check: 1, want: "was put in its place", edit: func(revs []map[string]any) []map[string]any {
			delete(revs[2], "mac")
			return revs
		}},
		{name: "renumbered", check: 1, want: "was put in its place", edit: func(revs []map[string]any) []map[string]any {
			// revisions 1 and 2 swap numbers, each with its MAC
			revs[1]["number"], revs[2]["number"] = 1, 2
			return revs
		}},
		{name: "a revision taken out", check: 1, want: "taken out of the record", edit: func(revs []map[string]any) []map[string]any {
			return append(revs[:1:1], revs[2])
		}},
		{name: "adopted ids taken out", check: 1, want: "MAC does not match", edit: func(revs []map[string]any) []map[string]any {
			delete(revs[2], "adopted")
			return revs
		}},
		{name: "a revision replaced by a stub", check: 1, want: "not the one the newest revision (3) was recorded beside", edit: func(revs []map[string]any) []map[string]any {
			revs[1] = map[string]any{"number": 2, "outcome": "ReconciliationSucceeded"}
			return revs
		}},
		{name: "a number listed twice", check: 2, want: "more than once", edit: func(revs []map[string]any) []map[string]any {
			cp := map[string]any{}
			for k, v := range revs[1] {
				cp[k] = v
			}
			cp["outcome"] = "ReconciliationSucceeded"
			return append(revs, cp)
		}},
		{name: "the newest forged", check: 1, want: "newest revision cannot be trusted", edit: func(revs []map[string]any) []map[string]any {
			revs[0]["note"] = "hello"
			return revs
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := &Store{Client: fake.NewClientset(), Key: testKey(t, workflowSecret)}
			inv, _ := s.Load(context.Background(), "shop", "shop")
			inv.Entries = []Entry{{ID: "shop_a__ConfigMap", Version: "v1"}}
			inv.Adopted = []string{"shop_a__ConfigMap"}
			record(t, s, inv, obj("1"), "ReconciliationSucceeded", 5)
			record(t, s, inv, obj("2"), "HealthCheckFailed", 5)
			record(t, s, inv, obj("3"), "ReconciliationSucceeded", 5)
			if tc.edit != nil {
				editRecord(t, s, "shop", "shop", tc.edit)
			}
			loaded, err := s.Load(context.Background(), "shop", "shop")
			if err != nil {
				t.Fatal(err)
			}
			err = s.Authenticate(loaded, tc.check)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("authentic record refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("got %v, want refused with %q", err, tc.want)
			}
			var ue *UnauthenticatedError
			if tc.want != "" && !errors.As(err, &ue) {
				t.Errorf("%T is not an UnauthenticatedError", err)
			}
		})
	}
}

// A record signed with another key, or read without one, is not written
// from; a revision moved from another inventory does not pass either.
func TestRecordNeedsTheWorkflowsKey(t *testing.T) {
	ctx := context.Background()
	client := fake.NewClientset()
	s := &Store{Client: client, Key: testKey(t, workflowSecret)}
	for _, name := range []string{"shop", "other"} {
		inv, _ := s.Load(ctx, "shop", name)
		record(t, s, inv, []*unstructured.Unstructured{configMap("a", name)}, "ReconciliationSucceeded", 5)
	}
	inv, _ := s.Load(ctx, "shop", "shop")
	if err := (&Store{Client: client, Key: testKey(t, otherSecret)}).Authenticate(inv, 1); err == nil {
		t.Error("another key authenticated the record")
	}
	if err := (&Store{Client: client}).Authenticate(inv, 1); !errors.Is(err, ErrNoRecordKey) {
		t.Errorf("no key: %v, want ErrNoRecordKey", err)
	}
	// other's revision 1, MAC and all, planted as shop's.
	other, _ := s.Load(ctx, "shop", "other")
	raw, _ := json.Marshal(other.Revisions)
	editRecord(t, s, "shop", "shop", func([]map[string]any) []map[string]any {
		var revs []map[string]any
		_ = json.Unmarshal(raw, &revs)
		return revs
	})
	inv, _ = s.Load(ctx, "shop", "shop")
	if err := s.Authenticate(inv, 1); err == nil {
		t.Error("a revision moved from another inventory was authenticated")
	}
}

// A run that holds the key never signs what it read: a forged revision
// stays forged after the next authentic apply records one of its own.
func TestSavingDoesNotLaunderAForgedRevision(t *testing.T) {
	ctx := context.Background()
	s := &Store{Client: fake.NewClientset(), Key: testKey(t, workflowSecret)}
	inv, _ := s.Load(ctx, "shop", "shop")
	record(t, s, inv, []*unstructured.Unstructured{configMap("a", "1")}, "ReconciliationSucceeded", 5)
	editRecord(t, s, "shop", "shop", func(revs []map[string]any) []map[string]any {
		revs[0]["artifact"] = "oci://evil.example/app@sha256:" + strings.Repeat("0", 64)
		return revs
	})
	inv, _ = s.Load(ctx, "shop", "shop")
	record(t, s, inv, []*unstructured.Unstructured{configMap("a", "2")}, "ReconciliationSucceeded", 5)
	inv, _ = s.Load(ctx, "shop", "shop")
	if err := s.Authenticate(inv, 2); err != nil {
		t.Errorf("the new revision: %v", err)
	}
	if err := s.Authenticate(inv, 1); err == nil || !strings.Contains(err.Error(), "MAC does not match") {
		t.Errorf("the forged revision after an authentic save: %v, want refused", err)
	}
}

// An id taken out of the inventory's adopted list by hand is put back
// from the authentic revisions that recorded it.
func TestAdoptedIdsComeBackFromTheRevisions(t *testing.T) {
	ctx := context.Background()
	s := &Store{Client: fake.NewClientset(), Key: testKey(t, workflowSecret)}
	inv, _ := s.Load(ctx, "shop", "shop")
	inv.Entries = []Entry{{ID: "shop_a__ConfigMap", Version: "v1"}}
	inv.Adopted = []string{"shop_a__ConfigMap"}
	record(t, s, inv, []*unstructured.Unstructured{configMap("a", "1")}, "ReconciliationSucceeded", 5)
	cm, _ := s.Client.CoreV1().ConfigMaps("shop").Get(ctx, ConfigMapName("shop"), metav1.GetOptions{})
	delete(cm.Data, dataAdopted)
	if _, err := s.Client.CoreV1().ConfigMaps("shop").Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	inv, _ = s.Load(ctx, "shop", "shop")
	if len(inv.Adopted) != 1 || inv.Adopted[0] != "shop_a__ConfigMap" {
		t.Errorf("adopted after the list was emptied by hand: %v", inv.Adopted)
	}
	if noKey, _ := (&Store{Client: s.Client}).Load(ctx, "shop", "shop"); len(noKey.Adopted) != 0 {
		t.Errorf("without the key, unauthenticated ids were taken: %v", noKey.Adopted)
	}
}

// A revision put back as it was when its run began (Pending, signed by
// that run) is not the one the newer revisions were recorded beside.
func TestRecordRefusesAnOlderVersionOfARevision(t *testing.T) {
	ctx := context.Background()
	s := &Store{Client: fake.NewClientset(), Key: testKey(t, workflowSecret)}
	inv, _ := s.Load(ctx, "shop", "shop")
	obj := func(v string) []*unstructured.Unstructured { return []*unstructured.Unstructured{configMap("a", v)} }
	record(t, s, inv, obj("1"), "ReconciliationSucceeded", 5)
	record(t, s, inv, obj("2"), "ReconciliationSucceeded", 5)
	rv, err := NewRevision("shop", "shop", obj("3"), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Begin(ctx, inv, rv, 5); err != nil {
		t.Fatal(err)
	}
	save(t, s, inv)
	pending, _ := json.Marshal(inv.Find(3))
	inv.Finish(3, "ReconciliationSucceeded")
	save(t, s, inv)
	record(t, s, inv, obj("4"), "HealthCheckFailed", 5)
	editRecord(t, s, "shop", "shop", func(revs []map[string]any) []map[string]any {
		var old map[string]any
		_ = json.Unmarshal(pending, &old)
		revs[1] = old
		return revs
	})
	loaded, _ := s.Load(ctx, "shop", "shop")
	if err := s.Authenticate(loaded, 2); err == nil || !strings.Contains(err.Error(), "not the one the newest revision (4) was recorded beside") {
		t.Errorf("revision 3 put back Pending: %v, want refused", err)
	}
}

// An inventory's ConfigMap relabelled as another's is refused when read
// under the other's name.
func TestRecordRelabelledIsRefused(t *testing.T) {
	ctx := context.Background()
	s := &Store{Client: fake.NewClientset(), Key: testKey(t, workflowSecret)}
	inv, _ := s.Load(ctx, "shop", "shop")
	record(t, s, inv, []*unstructured.Unstructured{configMap("a", "1")}, "ReconciliationSucceeded", 5)
	cm, _ := s.Client.CoreV1().ConfigMaps("shop").Get(ctx, ConfigMapName("shop"), metav1.GetOptions{})
	cm.Labels[InventoryLabel] = "other"
	if _, err := s.Client.CoreV1().ConfigMaps("shop").Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Load(ctx, "shop", "shop"); err == nil || !strings.Contains(err.Error(), `labelled as inventory "other"`) {
		t.Errorf("a relabelled inventory: %v, want refused", err)
	}
}

// A revision trimmed from the record and put back (a copy of it, MAC and
// all, taken while it was kept) is not among those the newest revision
// was recorded beside.
func TestRecordRefusesATrimmedRevisionPutBack(t *testing.T) {
	ctx := context.Background()
	s := &Store{Client: fake.NewClientset(), Key: testKey(t, workflowSecret)}
	inv, _ := s.Load(ctx, "shop", "shop")
	obj := func(v string) []*unstructured.Unstructured { return []*unstructured.Unstructured{configMap("a", v)} }
	record(t, s, inv, obj("1"), "ReconciliationSucceeded", 2)
	first, _ := json.Marshal(inv.Find(1))
	record(t, s, inv, obj("2"), "ReconciliationSucceeded", 2)
	record(t, s, inv, obj("3"), "ReconciliationSucceeded", 2)
	if inv.Find(1) != nil {
		t.Fatal("revision 1 was not trimmed")
	}
	editRecord(t, s, "shop", "shop", func(revs []map[string]any) []map[string]any {
		var old map[string]any
		_ = json.Unmarshal(first, &old)
		return append(revs, old)
	})
	loaded, _ := s.Load(ctx, "shop", "shop")
	if err := s.Authenticate(loaded, 1); err == nil || !strings.Contains(err.Error(), "added to the record") {
		t.Errorf("revision 1 put back after it was trimmed: %v, want refused", err)
	}
}

// With a record-key, a revision keeps every object that holds a secret
// value (a Secret of any namespace, a ConfigMap with a substituted
// password) sealed, in the inventory's namespace: a reader of that
// namespace's Secrets reads none of it, no payload is left in the other
// namespace (so pruning that namespace takes nothing a rollback needs),
// and only the same key opens it.
func TestSealedRevisionsStayInTheInventorysNamespace(t *testing.T) {
	ctx := context.Background()
	client := fake.NewClientset()
	key := testKey(t, workflowSecret)
	s := &Store{Client: client, Key: key}
	inv, _ := s.Load(ctx, "gantry", "shop")
	token := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Secret",
		"metadata":   map[string]any{"name": "token", "namespace": "payments"},
		"stringData": map[string]any{"token": "sealed-token-value"},
	}}
	cm := configMap("settings", "postgres://app:substituted-password@db")
	cm.SetNamespace("payments")
	plain := configMap("plain", "visible-value")
	masked := map[string][]string{EntryFor(cm).ID: {"/data/k"}}
	rv, err := NewRevision("gantry", "shop", []*unstructured.Unstructured{plain, cm, token}, masked, key)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Begin(ctx, inv, rv, 5); err != nil {
		t.Fatal(err)
	}
	save(t, s, inv)
	if len(rv.Payloads) != 1 || rv.Payloads[""] == "" {
		t.Fatalf("payloads %v, want one, in the inventory's namespace", rv.Payloads)
	}
	if list, _ := client.CoreV1().Secrets("payments").List(ctx, metav1.ListOptions{}); len(list.Items) != 0 {
		t.Errorf("%d revision Secrets in payments, want none", len(list.Items))
	}
	sec, err := client.CoreV1().Secrets("gantry").Get(ctx, RevisionName("shop", rv.Number), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := inflate(sec.Data[dataObjects], MaxRevisionRawBytes)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"sealed-token-value", "substituted-password"} {
		if strings.Contains(string(raw), v) {
			t.Errorf("the stored payload holds %q in the clear", v)
		}
	}
	if !strings.Contains(string(raw), "visible-value") {
		t.Errorf("the object with no secret value is not kept in the clear: %s", raw)
	}

	inv, _ = s.Load(ctx, "gantry", "shop")
	got, err := s.Revision(ctx, inv, rv.Number)
	if err != nil {
		t.Fatal(err)
	}
	back, err := got.ObjectsOf()
	if err != nil || len(back) != 3 {
		t.Fatalf("read back with the key: %v, %d objects", err, len(back))
	}
	// With another key: refused. Without one: what is not sealed, and
	// the revision says what it left out.
	other := &Store{Client: client, Key: testKey(t, otherSecret)}
	got, err = other.Revision(ctx, inv, rv.Number)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := got.ObjectsOf(); !errors.Is(err, ErrSealed) {
		t.Errorf("read with another key: %v, want ErrSealed", err)
	}
	keyless := &Store{Client: client}
	got, err = keyless.Revision(ctx, inv, rv.Number)
	if err != nil {
		t.Fatal(err)
	}
	if back, err := got.ObjectsOf(); err != nil || len(back) != 1 || back[0].GetName() != "plain" || !got.Unread() {
		t.Errorf("read without a key: %v, %d objects, unread %v; want the one not sealed", err, len(back), got.Unread())
	}
}

// What an adopted object held before is kept in the revision (sealed when
// it is a Secret), read back by id, and the newest revision keeping it is
// not trimmed while the object is still adopted.
func TestPriorContentIsKeptUntilReleased(t *testing.T) {
	ctx := context.Background()
	client := fake.NewClientset()
	key := testKey(t, workflowSecret)
	s := &Store{Client: client, Key: key}
	inv, _ := s.Load(ctx, "shop", "shop")
	record(t, s, inv, []*unstructured.Unstructured{configMap("a", "1")}, "ReconciliationSucceeded", 2)

	db := configMap("db", "by gantry")
	before := configMap("db", "")
	before.Object["data"] = map[string]any{"dbhost": "db.internal", "dbport": "5432"}
	before.SetUID("uid-1")
	hidden := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Secret",
		"metadata": map[string]any{"name": "creds", "namespace": "shop"},
		"data":     map[string]any{"password": "cHJpb3Itc2VjcmV0"},
	}}
	rv, err := NewRevision("shop", "shop", []*unstructured.Unstructured{configMap("a", "1"), db, hidden}, nil, key)
	if err != nil {
		t.Fatal(err)
	}
	if err := rv.SetPrior([]*unstructured.Unstructured{before, hidden}, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.Begin(ctx, inv, rv, 2); err != nil {
		t.Fatal(err)
	}
	inv.Entries = []Entry{EntryFor(configMap("a", "1")), EntryFor(db), EntryFor(hidden)}
	inv.Adopted = []string{EntryFor(db).ID, EntryFor(hidden).ID}
	save(t, s, inv)
	inv.Finish(rv.Number, "HealthCheckFailed")
	save(t, s, inv)
	adoptedAt := rv.Number

	sec, _ := client.CoreV1().Secrets("shop").Get(ctx, RevisionName("shop", adoptedAt), metav1.GetOptions{})
	raw, _ := inflate(sec.Data[dataObjects], MaxRevisionRawBytes)
	// Others' content may hold a secret nobody told gantry of: sealed.
	for _, v := range []string{"cHJpb3Itc2VjcmV0", "db.internal"} {
		if strings.Contains(string(raw), v) {
			t.Errorf("prior content is kept in the clear: %q", v)
		}
	}

	// Later runs, with a history of 2: the revision keeping the prior
	// content stays while the object is adopted.
	for range 3 {
		record(t, s, inv, []*unstructured.Unstructured{configMap("a", "1"), db, hidden}, "ReconciliationSucceeded", 2)
	}
	if inv.Find(adoptedAt) == nil {
		t.Fatalf("revision %d, which keeps what the adopted objects held before, was trimmed: %v", adoptedAt, numbers(inv))
	}
	inv, _ = s.Load(ctx, "shop", "shop")
	if err := s.Authenticate(inv, adoptedAt); err != nil {
		t.Fatal(err)
	}
	got, err := s.Revision(ctx, inv, adoptedAt)
	if err != nil {
		t.Fatal(err)
	}
	priors, err := got.PriorOf()
	if err != nil {
		t.Fatal(err)
	}
	if p := priors[EntryFor(db).ID]; p == nil || p.Object["data"].(map[string]any)["dbhost"] != "db.internal" || p.GetUID() != "uid-1" {
		t.Errorf("prior content of db: %v", p)
	}
	if p := priors[EntryFor(hidden).ID]; p == nil {
		t.Errorf("prior content of the Secret missing: %v", priors)
	}
	if !slices.Equal(got.Prior, []string{EntryFor(hidden).ID, EntryFor(db).ID}) && !slices.Equal(got.Prior, []string{EntryFor(db).ID, EntryFor(hidden).ID}) {
		t.Errorf("recorded prior ids %v", got.Prior)
	}

	// Released (no longer adopted): the next trim takes it.
	inv.Adopted = nil
	record(t, s, inv, []*unstructured.Unstructured{configMap("a", "1")}, "ReconciliationSucceeded", 2)
	if inv.Find(adoptedAt) != nil {
		t.Errorf("revision %d is still kept once nothing it adopted is: %v", adoptedAt, numbers(inv))
	}
}

func numbers(inv *Inventory) []int {
	var out []int
	for _, rv := range inv.Revisions {
		out = append(out, rv.Number)
	}
	return out
}
