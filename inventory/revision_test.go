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

func TestRevisionsAreNumberedAndBoundedByHistory(t *testing.T) {
	ctx := context.Background()
	client := fake.NewClientset(&corev1.Secret{ // not a revision: never listed, never deleted
		ObjectMeta: metav1.ObjectMeta{Name: "gantry-shop.v9", Namespace: "shop",
			Labels: map[string]string{RevisionOfLabel: "shop", RevisionLabel: "9"}},
	})
	s := &Store{Client: client}
	for i := 1; i <= 5; i++ {
		rv, err := NewRevision("shop", "shop", []*unstructured.Unstructured{configMap("a", fmt.Sprint(i))})
		if err != nil {
			t.Fatal(err)
		}
		rv.Outcome = "ReconciliationSucceeded"
		existing, err := s.Revisions(ctx, "shop", "shop")
		if err != nil {
			t.Fatal(err)
		}
		n, err := s.AddRevision(ctx, rv, existing, 3)
		if err != nil {
			t.Fatal(err)
		}
		if n != i {
			t.Fatalf("revision %d numbered %d", i, n)
		}
	}
	list, err := s.Revisions(ctx, "shop", "shop")
	if err != nil {
		t.Fatal(err)
	}
	var got []int
	for _, rv := range list {
		got = append(got, rv.Number)
	}
	if diff := cmp.Diff([]int{5, 4, 3}, got); diff != "" {
		t.Errorf("kept revisions (-want +got):\n%s", diff)
	}
	if _, err := client.CoreV1().Secrets("shop").Get(ctx, "gantry-shop.v9", metav1.GetOptions{}); err != nil {
		t.Errorf("a Secret that is not a revision was touched: %v", err)
	}
	rv, err := s.Revision(ctx, "shop", "shop", 4)
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
	if _, err := s.Revision(ctx, "shop", "shop", 1); err == nil {
		t.Error("revision 1 should be gone")
	}
	if _, err := s.Revision(ctx, "shop", "shop", 9); err == nil {
		t.Error("a Secret that is not a revision was read as one")
	}
}

func TestRevisionTooLargeIsRefusedBeforeWriting(t *testing.T) {
	// Random data does not compress: 1,200 KiB of it cannot fit.
	buf := make([]byte, 1200*1024)
	if _, err := rand.Read(buf); err != nil {
		t.Fatal(err)
	}
	_, err := NewRevision("shop", "shop", []*unstructured.Unstructured{configMap("big", base64.StdEncoding.EncodeToString(buf))})
	var tl *TooLargeError
	if !errors.As(err, &tl) {
		t.Fatalf("got %v, want a TooLargeError", err)
	}
	// A set of many alike objects compresses well and fits.
	var many []*unstructured.Unstructured
	for i := range 3000 {
		many = append(many, configMap(fmt.Sprintf("cm-%d", i), "the same value in every one of them"))
	}
	if _, err := NewRevision("shop", "shop", many); err != nil {
		t.Errorf("3,000 small objects: %v", err)
	}
}

func TestRevisionOfAnArtifactHoldsNoObjects(t *testing.T) {
	ctx := context.Background()
	s := &Store{Client: fake.NewClientset()}
	rv, err := NewRevision("shop", "shop", nil)
	if err != nil {
		t.Fatal(err)
	}
	rv.Artifact, rv.Digest, rv.Objects = "oci://r.example/shop@sha256:abc", "sha256:abc", 12
	if _, err := s.AddRevision(ctx, rv, nil, DefaultHistory); err != nil {
		t.Fatal(err)
	}
	got, err := s.Revision(ctx, "shop", "shop", 1)
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

func TestDeleteRevisionsLeavesOtherInventories(t *testing.T) {
	ctx := context.Background()
	s := &Store{Client: fake.NewClientset()}
	for _, inv := range []string{"shop", "shop", "blog"} {
		rv, err := NewRevision("ns", inv, []*unstructured.Unstructured{configMap("a", inv)})
		if err != nil {
			t.Fatal(err)
		}
		existing, _ := s.Revisions(ctx, "ns", inv)
		if _, err := s.AddRevision(ctx, rv, existing, DefaultHistory); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.DeleteRevisions(ctx, "ns", "shop"); err != nil {
		t.Fatal(err)
	}
	shop, _ := s.Revisions(ctx, "ns", "shop")
	blog, _ := s.Revisions(ctx, "ns", "blog")
	if len(shop) != 0 || len(blog) != 1 {
		t.Errorf("after deleting shop's revisions: shop %d, blog %d", len(shop), len(blog))
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
	err := (&Store{Client: client}).DeleteRevisions(context.Background(), "ns", "shop")
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
	rv := &Revision{Number: 3, Namespace: "ns", Inventory: "shop", payload: b.Bytes()}
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
	add := func(s *Store, outcome string, history int) int {
		t.Helper()
		rv, err := NewRevision("shop", "shop", []*unstructured.Unstructured{configMap("a", outcome+fmt.Sprint(time.Now().UnixNano()))})
		if err != nil {
			t.Fatal(err)
		}
		rv.Outcome = outcome
		existing, err := s.Revisions(ctx, "shop", "shop")
		if err != nil {
			t.Fatal(err)
		}
		n, err := s.AddRevision(ctx, rv, existing, history)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	kept := func(s *Store) []int {
		t.Helper()
		list, err := s.Revisions(ctx, "shop", "shop")
		if err != nil {
			t.Fatal(err)
		}
		var out []int
		for _, rv := range list {
			out = append(out, rv.Number)
		}
		return out
	}

	// A pipeline keeps 20; a manual rollback without history keeps 20 too.
	s := &Store{Client: fake.NewClientset()}
	for range 20 {
		add(s, "ReconciliationSucceeded", 20)
	}
	add(s, "RolledBack", 0)
	if got := kept(s); len(got) != 20 || got[0] != 21 {
		t.Errorf("after a manual rollback: %v, want the 20 newest", got)
	}

	// history: 1, then an apply that fails: the good revision stays.
	s = &Store{Client: fake.NewClientset()}
	add(s, "ReconciliationSucceeded", 1)
	add(s, "HealthCheckFailed", 1)
	if diff := cmp.Diff([]int{2, 1}, kept(s)); diff != "" {
		t.Errorf("history 1 and a failure (-want +got):\n%s", diff)
	}
	// Five failures in a row: the good one and the newest failure stay.
	for range 5 {
		add(s, "ApplyFailed", 1)
	}
	if diff := cmp.Diff([]int{7, 1}, kept(s)); diff != "" {
		t.Errorf("five failures after it (-want +got):\n%s", diff)
	}
	// The next success trims what history says.
	add(s, "ReconciliationSucceeded", 1)
	if diff := cmp.Diff([]int{8}, kept(s)); diff != "" {
		t.Errorf("after a success (-want +got):\n%s", diff)
	}
}
