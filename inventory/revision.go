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
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/fluxcd/cli-utils/pkg/object"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gantry-dev/gantry/kube"
)

// Revisions are kept as Helm keeps releases: one Secret per apply, named
// gantry-<inventory>.v<N>, its payload gzip-compressed. A Secret, not a
// ConfigMap, because the payload holds the applied objects, Secrets with
// their values included: whoever may read only ConfigMaps must not read
// those through a revision. The Secrets of another namespace than the
// inventory's, and the objects there that held a secret value, are kept
// in that namespace (gantry-<namespace>.<inventory>.v<N>), so that who
// may read Secrets only where the inventory is reads none of theirs.
//
// The inventory, written only under its Lease, is the record of which
// revisions exist: their numbers, outcomes and the digests of their
// payloads. A Secret it does not record, or whose payload does not match
// the digest recorded, is not a revision, whatever its labels say.
const (
	// RevisionType is the type of a revision's Secret.
	RevisionType corev1.SecretType = "gantry.dev/revision.v1"
	// RevisionOfLabel names the inventory a revision belongs to,
	// RevisionLabel its number, and RevisionNamespaceLabel the
	// inventory's namespace (on the Secrets kept in another one).
	RevisionOfLabel        = "gantry.dev/revision-of"
	RevisionLabel          = "gantry.dev/revision"
	RevisionNamespaceLabel = "gantry.dev/revision-namespace"

	// OutcomePending is the outcome of a revision whose run has not
	// recorded how it ended: it is still running, or it ended without
	// the inventory's Lease (killed, or the Lease lost).
	OutcomePending = "Pending"

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

	annSource = "gantry.dev/source"
	annTime   = "gantry.dev/applied-at"
	annBy     = "gantry.dev/applied-by"
)

// Revision is one recorded apply of an inventory, as its inventory
// records it.
type Revision struct {
	Inventory string    `json:"-"`
	Namespace string    `json:"-"`
	Number    int       `json:"number"`
	Time      time.Time `json:"time"`
	// Outcome is the reason the run that recorded it ended with
	// (OutcomePending until it says), and Cause, for a rollback that
	// atomic started, the reason of the failure it undid.
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
	// Payloads are the sha256 digests of the stored payloads, by the
	// namespace of their Secret ("" for the inventory's): what is read
	// back must match them. None: the objects were not stored (the
	// run could not create Secrets, or an artifact's digest stands for
	// them).
	Payloads map[string]string `json:"payloads,omitempty"`
	// Kept are the revisions the inventory kept beside this one when it
	// was recorded, each by its number and MAC, and Adopted the ids of
	// the objects that existed before gantry applied them: both signed,
	// so that taking a revision out of the record, putting back an older
	// version of one, or taking an object out of the adopted ones, is
	// seen (record.go).
	Kept    []Kept   `json:"kept,omitempty"`
	Adopted []string `json:"adopted,omitempty"`
	// MAC authenticates the revision with the workflow's record-key
	// (record.go); empty when it was recorded without one.
	MAC string `json:"mac,omitempty"`

	// Masked lists, by object id, the fields (JSON pointers) that held a
	// secret value when the set was applied (not Secrets' data, masked
	// by kind): reports of the revision mask them as the apply did.
	Masked map[string][]string `json:"masked,omitempty"`

	// Prior lists the objects whose content from before the run adopted
	// them the revision keeps (SetPrior), and PriorAt, for every object
	// still adopted, which revision keeps its content: carried from one
	// newest revision to the next, and only from one the key
	// authenticates, so that what an undo puts back is found through
	// signed revisions alone, never through another revision's list,
	// which a namespace writer may edit.
	Prior   []string       `json:"prior,omitempty"`
	PriorAt map[string]int `json:"priorAt,omitempty"`

	// payloads are the compressed payloads, by namespace, when prepared
	// or read; set and prior what they were made of, key what seals
	// their secrets, decoded what was read of them.
	payloads    map[string][]byte
	set, prior  []*unstructured.Unstructured
	priorMasked map[string][]string
	key         *RecordKey
	decoded     *contents
	unread      bool
	// own: this run records the revision (Begin), so its saves sign it;
	// a revision read from the cluster is never signed again.
	own bool
}

// contents are the objects read from a revision's payloads.
type contents struct{ objects, prior []*unstructured.Unstructured }

// HoldsObjects reports whether the revision carries its objects; one that
// does not names an artifact instead, or could not be stored.
func (rv *Revision) HoldsObjects() bool { return len(rv.Payloads) > 0 }

// RevisionName is the name of a revision's Secret in the inventory's
// namespace.
func RevisionName(inventory string, n int) string {
	return fmt.Sprintf("%s%s.v%d", ConfigMapPrefix, inventory, n)
}

// secretName is the name of a revision's Secret in namespace ns.
func (rv *Revision) secretName(ns string) string {
	if ns == "" || ns == rv.Namespace {
		return RevisionName(rv.Inventory, rv.Number)
	}
	return fmt.Sprintf("%s%s.%s.v%d", ConfigMapPrefix, rv.Namespace, rv.Inventory, rv.Number)
}

func (rv *Revision) ref() string {
	return fmt.Sprintf("revision %d of inventory %s/%s", rv.Number, rv.Namespace, rv.Inventory)
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

// payload is what one revision Secret holds, before compression: the
// objects, and the content of the objects the run adopted as it was
// before (Prior). With a record-key, the objects that hold a secret
// value, and their prior content, are in Sealed, encrypted (record.go),
// all in the inventory's namespace. Without one, a Secret, or an object
// that held a secret value, bound for another namespace is kept in that
// namespace, so that who may read Secrets only where the inventory is
// reads none of theirs.
type payload struct {
	Objects []map[string]any    `json:"objects"`
	Prior   []map[string]any    `json:"prior,omitempty"`
	Masked  map[string][]string `json:"masked,omitempty"`
	Sealed  []byte              `json:"sealed,omitempty"`
}

// sealedPart is what a payload's Sealed holds, once opened.
type sealedPart struct {
	Objects []map[string]any `json:"objects,omitempty"`
	Prior   []map[string]any `json:"prior,omitempty"`
}

// NewRevision prepares a revision of objects (nil for one that names an
// artifact), compressing them now so that one too large is refused before
// anything is written. masked lists the fields that held secret values,
// by object id. The objects are kept in a stable order, so that the same
// set always has the same digest. With key, what holds a secret value is
// sealed with it.
func NewRevision(namespace, inventory string, objects []*unstructured.Unstructured, masked map[string][]string, key *RecordKey) (*Revision, error) {
	rv := &Revision{Inventory: inventory, Namespace: namespace, Objects: len(objects), key: key}
	if objects == nil {
		return rv, nil
	}
	sorted := slices.Clone(objects)
	sort.SliceStable(sorted, func(i, j int) bool { return idOf(sorted[i]) < idOf(sorted[j]) })
	all := make([]map[string]any, len(sorted))
	for i, u := range sorted {
		all[i] = u.Object
	}
	raw, err := json.Marshal(all)
	if err != nil {
		return nil, fmt.Errorf("recording the revision: %w", err)
	}
	if len(raw) > MaxRevisionRawBytes {
		return nil, &TooLargeError{Inventory: namespace + "/" + inventory, Bytes: len(raw), Raw: true}
	}
	rv.Digest = digestOf(raw)
	rv.Masked = masked
	rv.set = sorted
	if err := rv.pack(); err != nil {
		return nil, err
	}
	return rv, nil
}

// SetPrior keeps, in the revision, the content the objects this run
// adopts had before it (read before its first write): a rollback or an
// atomic undo restores it before it releases them. An object of kind
// Secret, or one with a field in masked, is kept as a secret. It fails,
// leaving the revision as it was, when the revision holds no objects (it
// names an artifact too large to keep) or would grow too large.
func (rv *Revision) SetPrior(prior []*unstructured.Unstructured, masked map[string][]string) error {
	if !rv.HoldsObjects() {
		return fmt.Errorf("%s holds only its artifact's digest", cmpOr(rv.refOrNew(), "the revision"))
	}
	was, wasMasked, wasIDs := rv.prior, rv.priorMasked, rv.Prior
	rv.prior, rv.priorMasked = slices.Clone(prior), masked
	sort.SliceStable(rv.prior, func(i, j int) bool { return idOf(rv.prior[i]) < idOf(rv.prior[j]) })
	rv.Prior = nil
	for _, u := range rv.prior {
		rv.Prior = append(rv.Prior, idOf(u))
	}
	if err := rv.pack(); err != nil {
		rv.prior, rv.priorMasked, rv.Prior = was, wasMasked, wasIDs
		_ = rv.pack()
		return err
	}
	return nil
}

func (rv *Revision) refOrNew() string {
	if rv.Number == 0 {
		return fmt.Sprintf("the new revision of inventory %s/%s", rv.Namespace, rv.Inventory)
	}
	return rv.ref()
}

// pack makes the revision's payloads from its objects and prior content.
func (rv *Revision) pack() error {
	split := map[string]*payload{"": {Masked: rv.Masked}}
	var sealed sealedPart
	place := func(u *unstructured.Unstructured, secret, prior bool) {
		ns := ""
		switch {
		case secret && rv.key != nil:
			if prior {
				sealed.Prior = append(sealed.Prior, u.Object)
			} else {
				sealed.Objects = append(sealed.Objects, u.Object)
			}
			return
		case secret && u.GetNamespace() != rv.Namespace && u.GetNamespace() != "":
			ns = u.GetNamespace()
		}
		if split[ns] == nil {
			split[ns] = &payload{}
		}
		if prior {
			split[ns].Prior = append(split[ns].Prior, u.Object)
		} else {
			split[ns].Objects = append(split[ns].Objects, u.Object)
		}
	}
	isSecret := func(u *unstructured.Unstructured, masked map[string][]string) bool {
		return u.GetAPIVersion() == "v1" && u.GetKind() == "Secret" || len(masked[idOf(u)]) > 0
	}
	for _, u := range rv.set {
		place(u, isSecret(u, rv.Masked), false)
	}
	// What an adopted object held before gantry is others' content, which
	// may hold a secret nobody told gantry of (a password in a ConfigMap
	// made by hand): with a key it is sealed, all of it.
	for _, u := range rv.prior {
		place(u, rv.key != nil || isSecret(u, rv.Masked) || isSecret(u, rv.priorMasked), true)
	}
	if sealed.Objects != nil || sealed.Prior != nil {
		raw, err := json.Marshal(sealed)
		if err != nil {
			return fmt.Errorf("recording the revision: %w", err)
		}
		split[""].Sealed = rv.key.sealed(rv.Namespace+"/"+rv.Inventory, raw)
	}
	rv.Payloads, rv.payloads = map[string]string{}, map[string][]byte{}
	total := 0
	for ns, p := range split {
		if p.Objects == nil {
			p.Objects = []map[string]any{}
		}
		raw, err := json.Marshal(p)
		if err != nil {
			return fmt.Errorf("recording the revision: %w", err)
		}
		if total += len(raw); total > MaxRevisionRawBytes {
			return &TooLargeError{Inventory: rv.Namespace + "/" + rv.Inventory, Bytes: total, Raw: true}
		}
		var b bytes.Buffer
		zw := gzip.NewWriter(&b)
		if _, err := zw.Write(raw); err != nil {
			return err
		}
		if err := zw.Close(); err != nil {
			return err
		}
		// Secret data is sent and stored base64-encoded.
		if size := (b.Len() + 2) / 3 * 4; size > MaxRevisionBytes {
			return &TooLargeError{Inventory: rv.Namespace + "/" + rv.Inventory, Bytes: size}
		}
		rv.Payloads[ns], rv.payloads[ns] = digestOf(raw), b.Bytes()
	}
	return nil
}

func idOf(u *unstructured.Unstructured) string {
	return object.UnstructuredToObjMetadata(u).String()
}

func digestOf(raw []byte) string {
	sum := sha256.Sum256(raw)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// ErrSealed refuses to read the objects of a revision whose secret
// values were sealed with a record-key the run does not have.
var ErrSealed = errors.New("it keeps its objects that hold secret values sealed with the workflow's record-key: give this run the same record-key to read them")

// Unread reports whether ObjectsOf left out objects sealed with a
// record-key the run does not have.
func (rv *Revision) Unread() bool { return rv.unread }

// ObjectsOf decodes the objects a revision read whole (Store.Revision)
// holds, every payload checked against its recorded digest, the sealed
// ones opened with the run's record-key; without one they are left out
// (Unread).
func (rv *Revision) ObjectsOf() ([]*unstructured.Unstructured, error) {
	if err := rv.decode(); err != nil {
		return nil, err
	}
	return rv.decoded.objects, nil
}

// PriorOf returns, by object id, the content the objects the revision's
// run adopted had before it, as ObjectsOf reads its objects.
func (rv *Revision) PriorOf() (map[string]*unstructured.Unstructured, error) {
	if err := rv.decode(); err != nil {
		return nil, err
	}
	out := map[string]*unstructured.Unstructured{}
	for _, u := range rv.decoded.prior {
		out[idOf(u)] = u
	}
	return out, nil
}

func (rv *Revision) decode() error {
	if rv.decoded != nil {
		return nil
	}
	if !rv.HoldsObjects() || len(rv.payloads) != len(rv.Payloads) {
		return fmt.Errorf("%s holds no objects", rv.ref())
	}
	var all, prior []*unstructured.Unstructured
	add := func(to *[]*unstructured.Unstructured, list []map[string]any) {
		for _, o := range list {
			*to = append(*to, &unstructured.Unstructured{Object: o})
		}
	}
	total := 0
	for _, ns := range slices.Sorted(maps.Keys(rv.Payloads)) {
		raw, err := inflate(rv.payloads[ns], MaxRevisionRawBytes-total)
		if err != nil {
			return fmt.Errorf("reading %s: %w", rv.ref(), err)
		}
		total += len(raw)
		if digestOf(raw) != rv.Payloads[ns] {
			return fmt.Errorf("reading %s: the payload of Secret %s/%s does not match the digest its inventory records (changed by someone else than gantry): not used",
				rv.ref(), cmpOr(ns, rv.Namespace), rv.secretName(ns))
		}
		var p payload
		if err := json.Unmarshal(raw, &p); err != nil {
			return fmt.Errorf("reading %s: %w", rv.ref(), err)
		}
		add(&all, p.Objects)
		add(&prior, p.Prior)
		if len(p.Sealed) > 0 {
			if rv.key == nil {
				// Read without the key (drift's report, say): what is
				// sealed is left out, and the caller says so.
				rv.unread = true
				continue
			}
			plain, err := rv.key.opened(rv.Namespace+"/"+rv.Inventory, p.Sealed)
			if err != nil {
				return fmt.Errorf("reading %s: its sealed objects cannot be opened with this run's record-key (sealed with another one): %w", rv.ref(), ErrSealed)
			}
			var sp sealedPart
			if err := json.Unmarshal(plain, &sp); err != nil {
				return fmt.Errorf("reading %s: %w", rv.ref(), err)
			}
			add(&all, sp.Objects)
			add(&prior, sp.Prior)
		}
		if ns == "" && rv.Masked == nil {
			// Recorded before the record held them too.
			rv.Masked = p.Masked
		}
	}
	sort.SliceStable(all, func(i, j int) bool { return idOf(all[i]) < idOf(all[j]) })
	rv.decoded = &contents{objects: all, prior: prior}
	return nil
}

// inflate decompresses a payload of at most limit bytes.
func inflate(b []byte, limit int) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	raw, err := io.ReadAll(io.LimitReader(zr, int64(limit)+1))
	if err != nil {
		return nil, err
	}
	if len(raw) > limit {
		return nil, fmt.Errorf("its objects inflate to more than %d bytes, more than gantry records: refused", MaxRevisionRawBytes)
	}
	return raw, nil
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// Succeeded reports whether the configuration of the revision was live
// and healthy when its run ended: an apply that succeeded, or a rollback.
func (rv *Revision) Succeeded() bool {
	return rv.Outcome == "ReconciliationSucceeded" || rv.Outcome == "RolledBack"
}

// Newest is the inventory's newest revision, nil when it records none.
func (inv *Inventory) Newest() *Revision {
	if len(inv.Revisions) == 0 {
		return nil
	}
	return inv.Revisions[0]
}

// Find returns the revision numbered n, nil when the inventory records
// none.
func (inv *Inventory) Find(n int) *Revision {
	for _, rv := range inv.Revisions {
		if rv.Number == n {
			return rv
		}
	}
	return nil
}

// Begin records rv as the inventory's next revision, before the run that
// makes it writes anything: its Secrets written, the inventory given the
// record, Pending until Finish (the caller saves the inventory). When the
// Secrets may not be written, the record is kept without its objects
// (the deploy is still recorded, though nothing can roll back to it), and
// the returned error says why.
func (s *Store) Begin(ctx context.Context, inv *Inventory, rv *Revision, history int) error {
	rv.Number = 1
	for _, old := range inv.Revisions {
		rv.Number = max(rv.Number, old.Number+1)
	}
	rv.Inventory, rv.Namespace = inv.Name, inv.Namespace
	if rv.Time.IsZero() {
		rv.Time = time.Now().UTC()
	}
	rv.Time = rv.Time.UTC().Truncate(time.Second)
	if history <= 0 {
		history = DefaultHistory
		if newest := inv.Newest(); newest != nil && newest.History > 0 {
			history = newest.History
		}
	}
	rv.History, rv.Outcome, rv.own = history, OutcomePending, true
	rv.PriorAt = map[string]int{}
	if newest := inv.Newest(); newest != nil && (s.Key == nil || s.Key.authentic(inv, newest)) {
		maps.Copy(rv.PriorAt, newest.PriorAt)
	}
	for _, id := range rv.Prior {
		rv.PriorAt[id] = rv.Number
	}
	var err error
	if rv.HoldsObjects() {
		err = s.writePayloads(ctx, rv)
		if err != nil {
			rv.Payloads, rv.payloads = nil, nil
		}
	}
	inv.Revisions = append([]*Revision{rv}, inv.Revisions...)
	return err
}

func (s *Store) writePayloads(ctx context.Context, rv *Revision) error {
	var written []string
	for _, ns := range slices.Sorted(maps.Keys(rv.payloads)) {
		secNS := cmpOr(ns, rv.Namespace)
		sec := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{
				Name:      rv.secretName(ns),
				Namespace: secNS,
				Labels: map[string]string{
					ManagedByLabel:         ManagedByValue,
					RevisionOfLabel:        rv.Inventory,
					RevisionLabel:          strconv.Itoa(rv.Number),
					RevisionNamespaceLabel: rv.Namespace,
				},
				Annotations: map[string]string{annTime: rv.Time.Format(time.RFC3339)},
			},
			Type: RevisionType,
			Data: map[string][]byte{dataObjects: rv.payloads[ns]},
		}
		if rv.Source != "" {
			sec.Annotations[annSource] = rv.Source
		}
		if rv.By != "" {
			sec.Annotations[annBy] = rv.By
		}
		secrets := s.Client.CoreV1().Secrets(secNS)
		put := func() error {
			_, err := secrets.Create(ctx, sec, metav1.CreateOptions{FieldManager: "gantry"})
			if !apierrors.IsAlreadyExists(err) {
				return err
			}
			// The number is one the inventory does not record: a
			// revision Secret that holds it (this very write, whose
			// answer was lost; one left by a run that did not finish;
			// a forged one) is not a revision, and is written over.
			old, err := secrets.Get(ctx, sec.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if old.Type != RevisionType {
				// Someone's own Secret under gantry's name: left as it is.
				return fmt.Errorf("the Secret %s/%s exists and is not a gantry revision (type %s): it is left as it is", secNS, sec.Name, old.Type)
			}
			update := sec.DeepCopy()
			update.ResourceVersion = old.ResourceVersion
			_, err = secrets.Update(ctx, update, metav1.UpdateOptions{FieldManager: "gantry"})
			return err
		}
		// A write whose answer was lost is sent again once the server
		// answers: a payload stored but not recorded would stay behind.
		err := put()
		for wait := 250 * time.Millisecond; kube.Unanswered(err) && ctx.Err() == nil; wait = min(2*wait, 2*time.Second) {
			if kube.Sleep(ctx, wait) != nil {
				break
			}
			err = put()
		}
		if err != nil {
			// What was written of it would be a payload no inventory
			// records: taken back.
			for _, w := range written {
				_ = s.Client.CoreV1().Secrets(w).Delete(ctx, rv.secretName(w), metav1.DeleteOptions{})
			}
			return fmt.Errorf("the objects of %s were not stored (a Secret in %s): %w; the revision is recorded without them, and cannot be rolled back to", rv.ref(), secNS, err)
		}
		written = append(written, ns)
	}
	return nil
}

// Finish sets the outcome of revision n, then trims the oldest revisions
// beyond its history. What a rollback needs is never trimmed: the newest
// revision that succeeded stays, a run that did not succeed trims no
// revision that did, and the newest revision that keeps the content an
// object still adopted had before gantry stays. It returns the revisions trimmed, whose Secrets the
// caller deletes (DeleteStored) once the inventory is saved without them.
func (inv *Inventory) Finish(n int, outcome string) (trimmed []*Revision) {
	rv := inv.Find(n)
	if rv == nil {
		return nil
	}
	rv.Outcome = outcome
	history := max(rv.History, 1)
	kept := inv.Revisions[:0:0]
	newestGood := 0
	for _, old := range inv.Revisions {
		if old.Succeeded() {
			newestGood = max(newestGood, old.Number)
		}
	}
	adopted := map[string]bool{}
	for _, id := range inv.Adopted {
		adopted[id] = true
	}
	keepsPrior := map[int]bool{}
	if newest := inv.Newest(); newest != nil {
		for id, n := range newest.PriorAt {
			if adopted[id] {
				keepsPrior[n] = true
			}
		}
	}
	for _, old := range inv.Revisions {
		if old.Number > n-history || old.Number == newestGood || !rv.Succeeded() && old.Succeeded() || old.Number > n || keepsPrior[old.Number] {
			kept = append(kept, old)
			continue
		}
		trimmed = append(trimmed, old)
	}
	inv.Revisions = kept
	return trimmed
}

// Revision reads revision n as the inventory records it, with its
// objects: each Secret must be of gantry's type, name and labels, and
// its payload must match the digest recorded.
func (s *Store) Revision(ctx context.Context, inv *Inventory, n int) (*Revision, error) {
	rec := inv.Find(n)
	if rec == nil {
		return nil, fmt.Errorf("inventory %s/%s has no revision %d", inv.Namespace, inv.Name, n)
	}
	rv := *rec
	rv.Inventory, rv.Namespace = inv.Name, inv.Namespace
	rv.payloads, rv.key, rv.decoded, rv.unread = map[string][]byte{}, s.Key, nil, false
	for ns := range rv.Payloads {
		secNS := cmpOr(ns, rv.Namespace)
		sec, err := s.Client.CoreV1().Secrets(secNS).Get(ctx, rv.secretName(ns), metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("the Secret %s/%s holding the objects of %s is gone (deleted by someone else than gantry)", secNS, rv.secretName(ns), rv.ref())
		}
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", rv.ref(), err)
		}
		l := sec.Labels
		if sec.Type != RevisionType || l[ManagedByLabel] != ManagedByValue || l[RevisionOfLabel] != rv.Inventory ||
			l[RevisionLabel] != strconv.Itoa(rv.Number) || l[RevisionNamespaceLabel] != rv.Namespace {
			return nil, fmt.Errorf("the Secret %s/%s is not the one gantry wrote for %s (type or labels differ): not used", secNS, sec.Name, rv.ref())
		}
		rv.payloads[ns] = sec.Data[dataObjects]
	}
	return &rv, nil
}

// Strays names the Secrets in the inventory's namespace labelled as its
// revisions that it does not record: put there by someone else than
// gantry, or left by a run that ended before it could record them. They
// are never used.
func (s *Store) Strays(ctx context.Context, inv *Inventory) ([]string, error) {
	opts := metav1.ListOptions{LabelSelector: RevisionOfLabel + "=" + inv.Name}
	var names []string
	if s.Metadata != nil {
		list, err := s.Metadata.Resource(corev1.SchemeGroupVersion.WithResource("secrets")).Namespace(inv.Namespace).List(ctx, opts)
		if err != nil {
			return nil, err
		}
		for _, m := range list.Items {
			names = append(names, m.Name)
		}
	} else {
		list, err := s.Client.CoreV1().Secrets(inv.Namespace).List(ctx, opts)
		if err != nil {
			return nil, err
		}
		for _, m := range list.Items {
			names = append(names, m.Name)
		}
	}
	recorded := map[string]bool{}
	for _, rv := range inv.Revisions {
		if rv.HoldsObjects() {
			recorded[RevisionName(inv.Name, rv.Number)] = true
		}
	}
	var out []string
	for _, n := range names {
		if !recorded[n] {
			out = append(out, inv.Namespace+"/"+n)
		}
	}
	sort.Strings(out)
	return out, nil
}

// StrayWarning says what Strays found.
func StrayWarning(inv *Inventory, strays []string) string {
	return fmt.Sprintf("ignored %d Secrets labelled as revisions of inventory %s/%s that it does not record (not written by gantry, or left by a run that did not finish): %s",
		len(strays), inv.Namespace, inv.Name, strings.Join(strays, ", "))
}

// DeleteStored deletes the Secrets of revisions (trimmed, or all of a
// deleted inventory's), one DELETE each, so that the run needs no right
// beyond those it records them with.
func (s *Store) DeleteStored(ctx context.Context, inv *Inventory, list []*Revision) error {
	var errs []error
	for _, rv := range list {
		rv.Inventory, rv.Namespace = inv.Name, inv.Namespace
		payloads := rv.Payloads
		if len(payloads) == 0 && rv.Artifact == "" {
			// Its objects could not be stored: a write that was
			// carried out without an answer may have stored them.
			payloads = map[string]string{"": ""}
		}
		for ns := range payloads {
			secNS := cmpOr(ns, inv.Namespace)
			err := s.Client.CoreV1().Secrets(secNS).Delete(ctx, rv.secretName(ns), metav1.DeleteOptions{})
			if err != nil && !apierrors.IsNotFound(err) {
				errs = append(errs, fmt.Errorf("deleting %s (Secret %s/%s): %w", rv.ref(), secNS, rv.secretName(ns), err))
			}
		}
	}
	return errors.Join(errs...)
}

// DeleteRevisions removes every revision of an inventory, as delete and
// release remove the inventory itself: those it records, and the Secrets
// of gantry's type and name labelled as its revisions (left by a run
// that did not finish), whose objects would otherwise stay behind.
func (s *Store) DeleteRevisions(ctx context.Context, inv *Inventory) error {
	list, err := s.Client.CoreV1().Secrets(inv.Namespace).List(ctx, metav1.ListOptions{LabelSelector: RevisionOfLabel + "=" + inv.Name})
	if apierrors.IsForbidden(err) {
		// Revisions another run recorded may be there, with the objects
		// (Secrets too) they hold: say so rather than leave them behind.
		return fmt.Errorf("the revisions of inventory %s/%s cannot be listed (Secrets of type %s): %w; give the run the right to list and delete Secrets in %s, or delete them by hand, then run again", inv.Namespace, inv.Name, RevisionType, err, inv.Namespace)
	}
	if err != nil {
		return fmt.Errorf("listing the revisions of inventory %s/%s: %w", inv.Namespace, inv.Name, err)
	}
	errs := []error{s.DeleteStored(ctx, inv, inv.Revisions)}
	prefix := RevisionName(inv.Name, 0)
	prefix = prefix[:len(prefix)-1]
	for _, sec := range list.Items {
		n, err := strconv.Atoi(strings.TrimPrefix(sec.Name, prefix))
		if sec.Type != RevisionType || !strings.HasPrefix(sec.Name, prefix) || err != nil || inv.Find(n) != nil {
			continue
		}
		err = s.Client.CoreV1().Secrets(inv.Namespace).Delete(ctx, sec.Name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("deleting Secret %s/%s: %w", inv.Namespace, sec.Name, err))
		}
	}
	return errors.Join(errs...)
}
