package inventory

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// The record is evidence, not authority. Whoever may update ConfigMaps
// and Secrets in the inventory's namespace can write any revision list
// and any payload with digests to match: digests prove only that a
// payload is the one the list names. What a rollback, a drift
// correction or an atomic undo writes must come from a revision this
// workflow recorded, so each revision carries a MAC made with a key only
// the workflow holds (record-key): over the inventory it belongs to, its
// number and every field it records (payload digests, artifact and the
// folder of it, outcome, the numbers kept beside it, the objects that
// existed before gantry), so that it can neither be changed nor moved to
// another inventory or number. A run that holds the key signs only the
// revisions it records itself: a revision it read is never signed again,
// so a forged one stays forged.

// MinRecordKeyLength is the shortest record-key taken: 32 characters,
// what `openssl rand -base64 24` prints.
const MinRecordKeyLength = 32

// RecordKey authenticates the revisions of inventories, and seals what
// they hold of secret values.
type RecordKey struct {
	mac  []byte
	seal cipher.AEAD
}

// NewRecordKey derives the key revisions are signed with from the
// workflow's secret.
func NewRecordKey(secret string) (*RecordKey, error) {
	if len(strings.TrimSpace(secret)) < MinRecordKeyLength {
		return nil, fmt.Errorf("is %d characters long; a record key needs at least %d (openssl rand -base64 32 makes one)", len(strings.TrimSpace(secret)), MinRecordKeyLength)
	}
	derive := func(purpose string) []byte {
		m := hmac.New(sha256.New, []byte(strings.TrimSpace(secret)))
		m.Write([]byte(purpose))
		return m.Sum(nil)
	}
	block, err := aes.NewCipher(derive("gantry.dev/record/seal/v1"))
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &RecordKey{mac: derive("gantry.dev/record/mac/v1"), seal: aead}, nil
}

// sealed encrypts what a revision holds of secret values (AES-256-GCM,
// with a key derived from the record-key apart from the MAC's), bound to
// the inventory it belongs to. Whoever reads the revision's Secret
// without the record-key reads none of it; the MAC, over the payload's
// digest, says it is the one gantry wrote.
func (k *RecordKey) sealed(inventory string, plain []byte) []byte {
	nonce := make([]byte, k.seal.NonceSize(), k.seal.NonceSize()+len(plain)+k.seal.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		// crypto/rand does not fail on the platforms Go supports.
		panic(err)
	}
	return k.seal.Seal(nonce, nonce, plain, []byte(inventory))
}

// opened decrypts what sealed encrypted.
func (k *RecordKey) opened(inventory string, box []byte) ([]byte, error) {
	n := k.seal.NonceSize()
	if len(box) < n {
		return nil, errors.New("too short")
	}
	return k.seal.Open(nil, box[:n], box[n:], []byte(inventory))
}

// signed is what a revision's MAC covers.
type signed struct {
	Version   int       `json:"v"`
	Namespace string    `json:"namespace"`
	Inventory string    `json:"inventory"`
	Revision  *Revision `json:"revision"`
}

// sum is the MAC of rv as the revision of inventory namespace/name.
func (k *RecordKey) sum(namespace, name string, rv *Revision) string {
	cp := *rv
	cp.MAC = ""
	raw, err := json.Marshal(signed{Version: 1, Namespace: namespace, Inventory: name, Revision: &cp})
	if err != nil {
		// A Revision is plain data: it always marshals.
		panic(err)
	}
	m := hmac.New(sha256.New, k.mac)
	m.Write(raw)
	return "hmac-sha256:" + base64.RawStdEncoding.EncodeToString(m.Sum(nil))
}

// Kept pins a revision kept beside a signed one: its number and the MAC
// it had then.
type Kept struct {
	Number int    `json:"n"`
	MAC    string `json:"mac,omitempty"`
}

// sign sets the MAC of a revision this run records, with what it keeps
// beside it, each pinned by its MAC.
func (k *RecordKey) sign(inv *Inventory, rv *Revision) {
	rv.Kept = rv.Kept[:0:0]
	for _, o := range inv.Revisions {
		if o != rv {
			rv.Kept = append(rv.Kept, Kept{Number: o.Number, MAC: o.MAC})
		}
	}
	slices.SortFunc(rv.Kept, func(a, b Kept) int { return a.Number - b.Number })
	rv.Adopted = slices.Clone(inv.Adopted)
	slices.Sort(rv.Adopted)
	rv.Adopted = slices.Compact(rv.Adopted)
	for id := range rv.PriorAt {
		if !slices.Contains(rv.Adopted, id) {
			delete(rv.PriorAt, id)
		}
	}
	rv.MAC = k.sum(inv.Namespace, inv.Name, rv)
}

// authentic reports whether rv carries the MAC k makes for it.
func (k *RecordKey) authentic(inv *Inventory, rv *Revision) bool {
	if k == nil || rv.MAC == "" {
		return false
	}
	return hmac.Equal([]byte(rv.MAC), []byte(k.sum(inv.Namespace, inv.Name, rv)))
}

// ErrNoRecordKey refuses to write from the record when the run has no
// record-key to authenticate it with.
var ErrNoRecordKey = errors.New("the run has no record-key, so nothing in the cluster's record proves that this workflow recorded it: give every run that applies the inventory the same record-key (a secret of 32 characters or more, such as `openssl rand -base64 32`), then apply once to record a revision it signs")

// UnauthenticatedError refuses a revision that this workflow's key did
// not sign as it stands: forged, changed, moved from another inventory,
// recorded without the key or with another one, or a record some of
// whose revisions were taken out.
type UnauthenticatedError struct {
	Inventory string
	Number    int
	Why       string
}

func (e *UnauthenticatedError) Error() string {
	return fmt.Sprintf("revision %d of inventory %s cannot be written from: %s. Nothing was written", e.Number, e.Inventory, e.Why)
}

// Authenticate checks that revision n of inv may be written from: the
// run has the record key, the revision and the inventory's newest one
// carry its MAC, and every revision the newest one was recorded beside
// is still in the record (none taken out to steer a rollback to an
// older one).
func (s *Store) Authenticate(inv *Inventory, n int) error {
	ref := inv.Namespace + "/" + inv.Name
	if s.Key == nil {
		return ErrNoRecordKey
	}
	newest := inv.Newest()
	rv := inv.Find(n)
	if rv == nil || newest == nil {
		return &UnauthenticatedError{Inventory: ref, Number: n, Why: "the inventory does not record it"}
	}
	why := func(r *Revision) string {
		if r.MAC == "" {
			return fmt.Sprintf("revision %d was recorded without record-key (by %s), or its MAC was taken out", r.Number, cmpOr(r.By, "a run that did not say who ran it"))
		}
		return fmt.Sprintf("revision %d is not as this workflow recorded it: its MAC does not match what it holds (changed by someone else than gantry, moved from another inventory, or recorded with another record-key)", r.Number)
	}
	seen := map[int]bool{}
	for _, o := range inv.Revisions {
		if seen[o.Number] {
			return &UnauthenticatedError{Inventory: ref, Number: n, Why: fmt.Sprintf("the record lists revision %d more than once (gantry never does)", o.Number)}
		}
		seen[o.Number] = true
	}
	if !s.Key.authentic(inv, newest) {
		return &UnauthenticatedError{Inventory: ref, Number: n, Why: "the inventory's newest revision cannot be trusted: " + why(newest)}
	}
	// The newest revision pins every other one as it was when it was
	// recorded: none taken out, none put back in an older version.
	pinned := map[int]string{}
	for _, k := range newest.Kept {
		pinned[k.Number] = k.MAC
		o := inv.Find(k.Number)
		switch {
		case o == nil:
			return &UnauthenticatedError{Inventory: ref, Number: n, Why: fmt.Sprintf("revision %d, which the newest revision (%d) was recorded beside, was taken out of the record by someone else than gantry", k.Number, newest.Number)}
		case o.MAC != k.MAC:
			return &UnauthenticatedError{Inventory: ref, Number: n, Why: fmt.Sprintf("revision %d is not the one the newest revision (%d) was recorded beside (an older version of it, or another, was put in its place by someone else than gantry)", k.Number, newest.Number)}
		}
	}
	for _, o := range inv.Revisions {
		if _, ok := pinned[o.Number]; !ok && o != newest {
			return &UnauthenticatedError{Inventory: ref, Number: n, Why: fmt.Sprintf("revision %d was added to the record after the newest revision (%d) was recorded, by someone else than gantry", o.Number, newest.Number)}
		}
	}
	if !s.Key.authentic(inv, rv) {
		return &UnauthenticatedError{Inventory: ref, Number: n, Why: why(rv)}
	}
	return nil
}

// mergeAdopted adds to the inventory's adopted entries those its
// authentic revisions recorded: taking an id out of the ConfigMap must
// not turn an object that existed before gantry into one an undo
// deletes. Ids added by hand only make an undo release what it would
// have deleted.
func (s *Store) mergeAdopted(inv *Inventory) {
	if s.Key == nil {
		return
	}
	for _, rv := range inv.Revisions {
		if len(rv.Adopted) > 0 && s.Key.authentic(inv, rv) {
			inv.Adopted = append(inv.Adopted, rv.Adopted...)
		}
	}
	slices.Sort(inv.Adopted)
	inv.Adopted = slices.Compact(inv.Adopted)
}
