package inventory

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Revisions are kept as Helm keeps releases: one Secret per apply, named
// gantry-<inventory>.v<N>, labelled with the inventory and the number, its
// payload gzip-compressed. A Secret, not a ConfigMap, because the payload
// holds the applied objects, Secrets with their values included: whoever
// may read only ConfigMaps must not read those through a revision.
const (
	// RevisionType is the type of a revision's Secret.
	RevisionType corev1.SecretType = "gantry.dev/revision.v1"
	// RevisionOfLabel names the inventory a revision belongs to, and
	// RevisionLabel its number.
	RevisionOfLabel = "gantry.dev/revision-of"
	RevisionLabel   = "gantry.dev/revision"
	// OutcomeLabel is the outcome of the run that recorded it.
	OutcomeLabel = "gantry.dev/outcome"

	// DefaultHistory is how many revisions are kept unless told otherwise.
	DefaultHistory = 5
	// MaxRevisionBytes bounds a revision's Secret as stored: etcd refuses
	// an object of much more than 1 MiB, and the rest of the Secret
	// (metadata, annotations) needs room too.
	MaxRevisionBytes = 1000 * 1024
	// MaxRevisionRawBytes bounds a revision's objects before compression,
	// when recorded and when read: a payload that fits in a Secret could
	// otherwise inflate a thousandfold when decompressed.
	MaxRevisionRawBytes = 64 << 20

	dataObjects = "objects.json.gz"

	annSource     = "gantry.dev/source"
	annGitRev     = "gantry.dev/git-revision"
	annArtifact   = "gantry.dev/artifact"
	annArtifactAt = "gantry.dev/artifact-path"
	annDigest     = "gantry.dev/digest"
	annTime       = "gantry.dev/applied-at"
	annBy         = "gantry.dev/applied-by"
	annVersion    = "gantry.dev/gantry-version"
	annCount      = "gantry.dev/objects"
	annNote       = "gantry.dev/note"
	annCause      = "gantry.dev/cause"
	annHistory    = "gantry.dev/history"
)

// Revision is one recorded apply of an inventory.
type Revision struct {
	Inventory string    `json:"-"`
	Namespace string    `json:"-"`
	Number    int       `json:"number"`
	Time      time.Time `json:"time"`
	// Outcome is the reason the run that recorded it ended with, and
	// Cause, for a rollback that atomic started, the reason of the
	// failure it undid.
	Outcome string `json:"outcome"`
	Cause   string `json:"cause,omitempty"`
	// Objects is how many objects the set has.
	Objects int `json:"objects"`
	// Source is the folder or artifact applied; GitRevision the commit it
	// came from, when known.
	Source      string `json:"source,omitempty"`
	GitRevision string `json:"revision,omitempty"`
	// Artifact is the artifact the set came from or went to, by digest
	// (oci://...@sha256:...), and ArtifactPath the folder of it that was
	// built. A revision of an artifact holds its objects too when they
	// fit; when they do not, rollback pulls the artifact again.
	Artifact     string `json:"artifact,omitempty"`
	ArtifactPath string `json:"artifactPath,omitempty"`
	// Digest identifies the content: the artifact's digest, or the
	// sha256 of the recorded objects.
	Digest string `json:"digest,omitempty"`
	// By is who ran it: the CI actor and the run.
	By            string `json:"by,omitempty"`
	GantryVersion string `json:"gantryVersion,omitempty"`
	// Note says more, such as which revision a rollback re-applied.
	Note string `json:"note,omitempty"`
	// History is how many revisions were kept when it was recorded.
	History int `json:"history,omitempty"`

	// payload is the compressed objects, when read (Revision) or
	// prepared; held says that the revision has them.
	payload []byte
	held    bool
}

// HoldsObjects reports whether the revision carries its objects; one that
// does not names an artifact instead. Known of a revision read whole
// (Revision) or prepared, not of one listed.
func (rv *Revision) HoldsObjects() bool { return rv.held }

// RevisionName is the name of a revision's Secret.
func RevisionName(inventory string, n int) string {
	return fmt.Sprintf("%s%s.v%d", ConfigMapPrefix, inventory, n)
}

// TooLargeError refuses a revision that would not fit in one object.
type TooLargeError struct {
	Inventory string
	Bytes     int
	// Raw: the objects are over MaxRevisionRawBytes before compression.
	Raw bool
}

func (e *TooLargeError) Error() string {
	if e.Raw {
		return fmt.Sprintf("the revision of inventory %s would hold %d MiB of objects, over the %d MiB gantry records; nothing was written. Apply from an OCI artifact (artifact), whose revision records only its digest, or split the set into smaller inventories",
			e.Inventory, e.Bytes>>20, MaxRevisionRawBytes>>20)
	}
	return fmt.Sprintf("the revision of inventory %s would be %d KiB compressed, over the %d KiB one Kubernetes object can hold; nothing was written. Apply from an OCI artifact (artifact), whose revision records only its digest, or split the set into smaller inventories",
		e.Inventory, e.Bytes/1024, MaxRevisionBytes/1024)
}

// NewRevision prepares a revision of objects (nil for one that names an
// artifact), compressing them now so that one too large is refused before
// anything is written.
func NewRevision(namespace, inventory string, objects []*unstructured.Unstructured) (*Revision, error) {
	rv := &Revision{Inventory: inventory, Namespace: namespace, Objects: len(objects)}
	if objects == nil {
		return rv, nil
	}
	raw, err := json.Marshal(objects)
	if err != nil {
		return nil, fmt.Errorf("recording the revision: %w", err)
	}
	if len(raw) > MaxRevisionRawBytes {
		return nil, &TooLargeError{Inventory: namespace + "/" + inventory, Bytes: len(raw), Raw: true}
	}
	sum := sha256.Sum256(raw)
	rv.Digest = "sha256:" + hex.EncodeToString(sum[:])
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	if _, err := zw.Write(raw); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	// Secret data is sent and stored base64-encoded.
	if size := (b.Len() + 2) / 3 * 4; size > MaxRevisionBytes {
		return nil, &TooLargeError{Inventory: namespace + "/" + inventory, Bytes: size}
	}
	rv.payload, rv.held = b.Bytes(), true
	return rv, nil
}

// ObjectsOf decodes the objects a revision holds.
func (rv *Revision) ObjectsOf() ([]*unstructured.Unstructured, error) {
	if rv.payload == nil {
		return nil, fmt.Errorf("revision %d of inventory %s/%s holds no objects", rv.Number, rv.Namespace, rv.Inventory)
	}
	zr, err := gzip.NewReader(bytes.NewReader(rv.payload))
	if err != nil {
		return nil, fmt.Errorf("reading revision %d: %w", rv.Number, err)
	}
	raw, err := io.ReadAll(io.LimitReader(zr, MaxRevisionRawBytes+1))
	if err != nil {
		return nil, fmt.Errorf("reading revision %d: %w", rv.Number, err)
	}
	if len(raw) > MaxRevisionRawBytes {
		return nil, fmt.Errorf("reading revision %d: its objects inflate to more than %d bytes, more than gantry records: refused", rv.Number, MaxRevisionRawBytes)
	}
	var objs []map[string]any
	if err := json.Unmarshal(raw, &objs); err != nil {
		return nil, fmt.Errorf("reading revision %d: %w", rv.Number, err)
	}
	out := make([]*unstructured.Unstructured, 0, len(objs))
	for _, o := range objs {
		out = append(out, &unstructured.Unstructured{Object: o})
	}
	return out, nil
}

// Succeeded reports whether the configuration of the revision was live
// and healthy when its run ended: an apply that succeeded, or a rollback.
func (rv *Revision) Succeeded() bool {
	return rv.Outcome == "ReconciliationSucceeded" || rv.Outcome == "RolledBack"
}

// Revisions lists an inventory's revisions, newest first, without their
// objects (by their metadata alone when the store has a metadata client).
func (s *Store) Revisions(ctx context.Context, namespace, name string) ([]*Revision, error) {
	opts := metav1.ListOptions{LabelSelector: ManagedByLabel + "=" + ManagedByValue + "," + RevisionOfLabel + "=" + name}
	var metas []metav1.ObjectMeta
	if s.Metadata != nil {
		list, err := s.Metadata.Resource(corev1.SchemeGroupVersion.WithResource("secrets")).Namespace(namespace).List(ctx, opts)
		if err != nil {
			return nil, fmt.Errorf("listing the revisions of inventory %s/%s: %w", namespace, name, err)
		}
		for i := range list.Items {
			metas = append(metas, list.Items[i].ObjectMeta)
		}
	} else {
		list, err := s.Client.CoreV1().Secrets(namespace).List(ctx, opts)
		if err != nil {
			return nil, fmt.Errorf("listing the revisions of inventory %s/%s: %w", namespace, name, err)
		}
		for i := range list.Items {
			if list.Items[i].Type == RevisionType {
				metas = append(metas, list.Items[i].ObjectMeta)
			}
		}
	}
	var out []*Revision
	for i := range metas {
		if rv, ok := fromMeta(&metas[i]); ok {
			out = append(out, rv)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Number > out[j].Number })
	return out, nil
}

// Revision reads one revision with its objects.
func (s *Store) Revision(ctx context.Context, namespace, name string, n int) (*Revision, error) {
	sec, err := s.Client.CoreV1().Secrets(namespace).Get(ctx, RevisionName(name, n), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("inventory %s/%s has no revision %d", namespace, name, n)
	}
	if err != nil {
		return nil, fmt.Errorf("reading revision %d of inventory %s/%s: %w", n, namespace, name, err)
	}
	rv, ok := fromMeta(&sec.ObjectMeta)
	if !ok || sec.Type != RevisionType || rv.Inventory != name || rv.Number != n {
		return nil, fmt.Errorf("the Secret %s/%s is not a gantry revision of inventory %s; refusing to use it", namespace, sec.Name, name)
	}
	rv.payload = sec.Data[dataObjects]
	rv.held = len(rv.payload) > 0
	return rv, nil
}

// fromMeta reads a revision from its Secret's labels and annotations;
// ok is false for a Secret that is not one.
func fromMeta(m *metav1.ObjectMeta) (*Revision, bool) {
	n, err := strconv.Atoi(m.Labels[RevisionLabel])
	if m.Labels[ManagedByLabel] != ManagedByValue || err != nil || n <= 0 {
		return nil, false
	}
	a := m.Annotations
	rv := &Revision{
		Inventory: m.Labels[RevisionOfLabel], Namespace: m.Namespace, Number: n,
		Source: a[annSource], GitRevision: a[annGitRev], Artifact: a[annArtifact], ArtifactPath: a[annArtifactAt],
		Digest: a[annDigest], Outcome: m.Labels[OutcomeLabel], Cause: a[annCause], By: a[annBy],
		GantryVersion: a[annVersion], Note: a[annNote],
	}
	rv.Objects, _ = strconv.Atoi(a[annCount])
	rv.History, _ = strconv.Atoi(a[annHistory])
	if t, err := time.Parse(time.RFC3339, a[annTime]); err == nil {
		rv.Time = t
	}
	return rv, true
}

// AddRevision records rv as the inventory's next revision after existing
// (as Revisions lists them), then deletes the oldest ones beyond history
// (at least 1 is kept: the one added). A history of 0 keeps as many as
// the newest revision was kept with (a manual rollback keeps what the
// pipeline's apply said), else DefaultHistory. What a rollback needs is
// never trimmed: the newest revision that succeeded stays, and a run that
// did not succeed deletes no revision that did. It returns the number
// given.
func (s *Store) AddRevision(ctx context.Context, rv *Revision, existing []*Revision, history int) (int, error) {
	rv.Number = 1
	if len(existing) > 0 {
		rv.Number = existing[0].Number + 1
	}
	if rv.Time.IsZero() {
		rv.Time = time.Now()
	}
	if history <= 0 {
		history = DefaultHistory
		if len(existing) > 0 && existing[0].History > 0 {
			history = existing[0].History
		}
	}
	rv.History = history
	sec := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name:      RevisionName(rv.Inventory, rv.Number),
			Namespace: rv.Namespace,
			Labels: map[string]string{
				ManagedByLabel:  ManagedByValue,
				RevisionOfLabel: rv.Inventory,
				RevisionLabel:   strconv.Itoa(rv.Number),
				OutcomeLabel:    rv.Outcome,
			},
			Annotations: map[string]string{
				annTime:    rv.Time.UTC().Format(time.RFC3339),
				annCount:   strconv.Itoa(rv.Objects),
				annVersion: rv.GantryVersion,
			},
		},
		Type: RevisionType,
	}
	for k, v := range map[string]string{annSource: rv.Source, annGitRev: rv.GitRevision, annArtifact: rv.Artifact,
		annArtifactAt: rv.ArtifactPath, annDigest: rv.Digest, annBy: rv.By, annNote: rv.Note, annCause: rv.Cause} {
		if v != "" {
			sec.Annotations[k] = v
		}
	}
	sec.Annotations[annHistory] = strconv.Itoa(rv.History)
	if rv.payload != nil {
		sec.Data = map[string][]byte{dataObjects: rv.payload}
	}
	if _, err := s.Client.CoreV1().Secrets(rv.Namespace).Create(ctx, sec, metav1.CreateOptions{FieldManager: "gantry"}); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return 0, fmt.Errorf("recording revision %d of inventory %s/%s: another run recorded it meanwhile", rv.Number, rv.Namespace, rv.Inventory)
		}
		return 0, fmt.Errorf("recording revision %d of inventory %s/%s: %w", rv.Number, rv.Namespace, rv.Inventory, err)
	}
	var errs []error
	history = max(history, 1)
	for _, old := range existing {
		// A run that succeeded is the newest that did; one that did not
		// keeps every revision that did, for a rollback to go to.
		if old.Number > rv.Number-history || !rv.Succeeded() && old.Succeeded() {
			continue
		}
		err := s.Client.CoreV1().Secrets(rv.Namespace).Delete(ctx, RevisionName(rv.Inventory, old.Number), metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("deleting revision %d of inventory %s/%s: %w", old.Number, rv.Namespace, rv.Inventory, err))
		}
	}
	return rv.Number, errors.Join(errs...)
}

// DeleteRevisions removes every revision of an inventory, as delete and
// release remove the inventory itself: one DELETE each, so that the run
// needs no right beyond those it records them with.
func (s *Store) DeleteRevisions(ctx context.Context, namespace, name string) error {
	list, err := s.Revisions(ctx, namespace, name)
	if apierrors.IsForbidden(err) {
		// Revisions another run recorded may be there, with the objects
		// (Secrets too) they hold: say so rather than leave them behind.
		return fmt.Errorf("the revisions of inventory %s/%s cannot be listed (Secrets of type %s): %w; give the run the right to list and delete Secrets in %s, or delete them by hand, then run again", namespace, name, RevisionType, err, namespace)
	}
	if err != nil {
		return err
	}
	var errs []error
	for _, rv := range list {
		err := s.Client.CoreV1().Secrets(namespace).Delete(ctx, RevisionName(name, rv.Number), metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("deleting revision %d of inventory %s/%s: %w", rv.Number, namespace, name, err))
		}
	}
	return errors.Join(errs...)
}
