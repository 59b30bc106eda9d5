package inventory

import (
	"context"
	"encoding/json"
	"errors"
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
	rv, err := NewRevision("shop", "shop", obj("3"), nil)
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
