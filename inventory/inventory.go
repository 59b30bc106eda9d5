// Package inventory owns the record, kept in the cluster, of what a gantry
// inventory applied: a ConfigMap whose entries use Flux's id form
// (<namespace>_<name>_<group>_<kind> plus version), so prune knows what a
// later run no longer has; and a Lease that keeps two runs on the same
// inventory from interleaving.
package inventory

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"time"

	"github.com/fluxcd/cli-utils/pkg/object"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"

	"github.com/gantry-dev/gantry/kube"
)

// Labels and keys gantry puts on what it manages.
const (
	// ManagedByLabel marks inventories and applied objects.
	ManagedByLabel = "app.kubernetes.io/managed-by"
	ManagedByValue = "gantry"
	// NameLabel and NamespaceLabel tie an applied object to its inventory.
	NameLabel      = "gantry.dev/inventory-name"
	NamespaceLabel = "gantry.dev/inventory-namespace"
	// InventoryLabel marks the inventory ConfigMap itself.
	InventoryLabel = "gantry.dev/inventory"

	// ConfigMapPrefix prefixes the inventory ConfigMap's and Lease's name,
	// so they cannot collide with the user's own objects.
	ConfigMapPrefix = "gantry-"

	dataEntries = "entries"
	dataSource  = "source"
	dataRev     = "revision"
	dataVersion = "gantryVersion"
	dataApplied = "lastAppliedTime"
	dataDigest  = "artifactDigest"
	dataHolder  = "writtenBy"
	dataRevs    = "revisions"
	dataAdopted = "adopted"
)

// Entry is one object in an inventory, in Flux's form.
type Entry struct {
	ID      string `json:"id"`
	Version string `json:"v"`
}

// EntryFor returns the entry of an object.
func EntryFor(u *unstructured.Unstructured) Entry {
	return Entry{ID: object.UnstructuredToObjMetadata(u).String(), Version: u.GroupVersionKind().Version}
}

// Parse returns the identity of the entry's object. gantry writes ids as
// Flux does (EntryFor); an id that is not written back the same way (one
// edited by hand, such as a name with both ':' and '_' that the format
// cannot tell apart) is refused, so that it cannot name one object when
// read and another when written.
func (e Entry) Parse() (object.ObjMetadata, error) {
	m, err := object.ParseObjMetadata(e.ID)
	if err != nil {
		return m, err
	}
	if m.String() != e.ID {
		return object.ObjMetadata{}, fmt.Errorf("inventory id %q is not in the form gantry writes (%q)", e.ID, m.String())
	}
	return m, nil
}

// GroupVersionKind of the entry's object.
func (e Entry) GroupVersionKind() (schema.GroupVersionKind, error) {
	m, err := e.Parse()
	if err != nil {
		return schema.GroupVersionKind{}, err
	}
	return m.GroupKind.WithVersion(e.Version), nil
}

// Inventory is the record of one named inventory.
type Inventory struct {
	Name      string
	Namespace string
	Entries   []Entry
	// Source and Revision say what was applied (path or artifact, git
	// commit); ArtifactDigest is set when it came from an OCI artifact.
	Source, Revision, ArtifactDigest string
	GantryVersion                    string
	LastApplied                      time.Time
	// WrittenBy is the run that saved it last, as its Lease names it.
	WrittenBy string
	// Revisions are the revisions kept, newest first: the record of
	// which exist (Begin, Finish).
	Revisions []*Revision
	// Adopted are the ids of entries whose objects existed before gantry
	// applied them (made by hand, or taken over): an undo releases them
	// rather than delete them.
	Adopted []string

	resourceVersion string
}

// Exists reports whether the inventory was loaded from the cluster.
func (inv *Inventory) Exists() bool { return inv.resourceVersion != "" }

// SameVersion reports whether inv and other were read as the same stored
// version of the inventory (or both found absent).
func (inv *Inventory) SameVersion(other *Inventory) bool {
	return inv.resourceVersion == other.resourceVersion
}

// ConfigMapName is the name of the ConfigMap that stores an inventory.
func ConfigMapName(name string) string { return ConfigMapPrefix + name }

// Store reads and writes inventories.
type Store struct {
	Client kubernetes.Interface
	// Metadata, when set, lists revisions by their metadata alone: a
	// revision can hold a megabyte, and every apply lists them.
	Metadata metadata.Interface
	// Key, when the workflow gives record-key, signs the revisions this
	// run records and authenticates those it writes from (record.go).
	Key *RecordKey
}

// Load reads an inventory; one that does not exist yet is returned empty.
func (s *Store) Load(ctx context.Context, namespace, name string) (*Inventory, error) {
	cm, err := s.Client.CoreV1().ConfigMaps(namespace).Get(ctx, ConfigMapName(name), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return &Inventory{Name: name, Namespace: namespace}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading inventory %s/%s: %w", namespace, name, err)
	}
	inv, err := fromConfigMap(cm)
	if err != nil {
		return nil, err
	}
	if inv.Name != name {
		// Relabelled: another inventory's record under this one's name.
		return nil, fmt.Errorf("ConfigMap %s/%s is labelled as inventory %q, not %q (changed by someone else than gantry); refusing to use it", namespace, cm.Name, inv.Name, name)
	}
	s.mergeAdopted(inv)
	return inv, nil
}

func fromConfigMap(cm *corev1.ConfigMap) (*Inventory, error) {
	name := cm.Labels[InventoryLabel]
	if cm.Labels[ManagedByLabel] != ManagedByValue || name == "" {
		return nil, fmt.Errorf("ConfigMap %s/%s is not a gantry inventory (label %s=%s missing); refusing to use it", cm.Namespace, cm.Name, ManagedByLabel, ManagedByValue)
	}
	inv := &Inventory{
		Name:            name,
		Namespace:       cm.Namespace,
		Source:          cm.Data[dataSource],
		Revision:        cm.Data[dataRev],
		ArtifactDigest:  cm.Data[dataDigest],
		GantryVersion:   cm.Data[dataVersion],
		WrittenBy:       cm.Data[dataHolder],
		resourceVersion: cm.ResourceVersion,
	}
	if t, err := time.Parse(time.RFC3339, cm.Data[dataApplied]); err == nil {
		inv.LastApplied = t
	}
	if raw := cm.Data[dataEntries]; raw != "" {
		if err := json.Unmarshal([]byte(raw), &inv.Entries); err != nil {
			return nil, fmt.Errorf("inventory %s/%s: decoding entries: %w", cm.Namespace, name, err)
		}
	}
	if raw := cm.Data[dataRevs]; raw != "" {
		if err := json.Unmarshal([]byte(raw), &inv.Revisions); err != nil {
			return nil, fmt.Errorf("inventory %s/%s: decoding revisions: %w", cm.Namespace, name, err)
		}
	}
	inv.Revisions = slices.DeleteFunc(inv.Revisions, func(rv *Revision) bool { return rv == nil || rv.Number <= 0 })
	sort.Slice(inv.Revisions, func(i, j int) bool { return inv.Revisions[i].Number > inv.Revisions[j].Number })
	for _, rv := range inv.Revisions {
		rv.Inventory, rv.Namespace = inv.Name, inv.Namespace
	}
	if raw := cm.Data[dataAdopted]; raw != "" {
		if err := json.Unmarshal([]byte(raw), &inv.Adopted); err != nil {
			return nil, fmt.Errorf("inventory %s/%s: decoding adopted entries: %w", cm.Namespace, name, err)
		}
	}
	return inv, nil
}

// Save writes the inventory with optimistic concurrency: it fails if the
// stored inventory changed since it was loaded.
func (s *Store) Save(ctx context.Context, inv *Inventory) error {
	entries := append([]Entry(nil), inv.Entries...)
	sort.Slice(entries, func(i, j int) bool { return entries[i].ID < entries[j].ID })
	raw, err := json.Marshal(entries)
	if err != nil {
		return err
	}
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Name:            ConfigMapName(inv.Name),
			Namespace:       inv.Namespace,
			ResourceVersion: inv.resourceVersion,
			Labels: map[string]string{
				ManagedByLabel: ManagedByValue,
				InventoryLabel: inv.Name,
			},
		},
		Data: map[string]string{
			dataEntries: string(raw),
			dataSource:  inv.Source,
			dataRev:     inv.Revision,
			dataVersion: inv.GantryVersion,
			dataApplied: inv.LastApplied.UTC().Format(time.RFC3339),
		},
	}
	if inv.ArtifactDigest != "" {
		cm.Data[dataDigest] = inv.ArtifactDigest
	}
	if inv.WrittenBy != "" {
		cm.Data[dataHolder] = inv.WrittenBy
	}
	if len(inv.Adopted) > 0 {
		listed := map[string]bool{}
		for _, e := range entries {
			listed[e.ID] = true
		}
		// Only what the inventory still lists.
		adopted := slices.DeleteFunc(slices.Clone(inv.Adopted), func(id string) bool { return !listed[id] })
		slices.Sort(adopted)
		inv.Adopted = slices.Compact(adopted)
		if len(inv.Adopted) > 0 {
			raw, err := json.Marshal(inv.Adopted)
			if err != nil {
				return err
			}
			cm.Data[dataAdopted] = string(raw)
		}
	}
	if len(inv.Revisions) > 0 {
		// Oldest first: a revision pins the MACs of those before it as
		// they are saved.
		for _, rv := range slices.Backward(inv.Revisions) {
			switch {
			case rv.own && s.Key != nil:
				s.Key.sign(inv, rv)
			case rv.own:
				rv.MAC, rv.Kept, rv.Adopted = "", nil, nil
			}
		}
		revs, err := json.Marshal(inv.Revisions)
		if err != nil {
			return err
		}
		cm.Data[dataRevs] = string(revs)
	}
	out, err := s.write(ctx, cm)
	if apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("writing inventory %s/%s: it was changed by someone else during this run: %w", inv.Namespace, inv.Name, err)
	}
	if err != nil {
		return fmt.Errorf("writing inventory %s/%s: %w", inv.Namespace, inv.Name, err)
	}
	inv.Entries = entries
	inv.resourceVersion = out.ResourceVersion
	return nil
}

// Confirm checks that the stored inventory is still the version inv was
// loaded or last saved as (or still absent, when inv was): a run that
// leaves its inventory unwritten must still notice that another run wrote
// it meanwhile.
func (s *Store) Confirm(ctx context.Context, inv *Inventory) error {
	cm, err := s.Client.CoreV1().ConfigMaps(inv.Namespace).Get(ctx, ConfigMapName(inv.Name), metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err) && !inv.Exists():
		return nil
	case err != nil && !apierrors.IsNotFound(err):
		return fmt.Errorf("reading inventory %s/%s: %w", inv.Namespace, inv.Name, err)
	case err == nil && cm.ResourceVersion == inv.resourceVersion:
		return nil
	}
	return fmt.Errorf("inventory %s/%s was changed by someone else during this run", inv.Namespace, inv.Name)
}

// write creates or updates the inventory's ConfigMap. When the answer is
// lost (the connection broke, the server restarted), the write may have
// been stored or not: it reads the ConfigMap back, and sends the write
// again only while the stored one is still the version it replaces,
// until ctx ends.
func (s *Store) write(ctx context.Context, cm *corev1.ConfigMap) (*corev1.ConfigMap, error) {
	cms := s.Client.CoreV1().ConfigMaps(cm.Namespace)
	wait := 250 * time.Millisecond
	for {
		var out *corev1.ConfigMap
		var err error
		if cm.ResourceVersion == "" {
			out, err = cms.Create(ctx, cm, metav1.CreateOptions{FieldManager: "gantry"})
		} else {
			out, err = cms.Update(ctx, cm, metav1.UpdateOptions{FieldManager: "gantry"})
		}
		if !kube.Unanswered(err) || ctx.Err() != nil {
			return out, err
		}
		// The answer was lost: read the ConfigMap back once the server
		// answers again.
		var stored *corev1.ConfigMap
		gerr := err
		for kube.Unanswered(gerr) {
			if serr := kube.Sleep(ctx, wait); serr != nil {
				return nil, err
			}
			wait = min(2*wait, 2*time.Second)
			stored, gerr = cms.Get(ctx, cm.Name, metav1.GetOptions{})
		}
		switch {
		case gerr == nil && maps.Equal(stored.Data, cm.Data) && maps.Equal(stored.Labels, cm.Labels):
			return stored, nil // the lost answer was a success
		case gerr == nil && stored.ResourceVersion == cm.ResourceVersion,
			apierrors.IsNotFound(gerr) && cm.ResourceVersion == "":
			// not stored: send it again
		case gerr != nil:
			return nil, gerr
		default:
			// Someone else wrote it meanwhile.
			return nil, apierrors.NewConflict(corev1.Resource("configmaps"), cm.Name, err)
		}
	}
}

// Delete removes the stored inventory.
func (s *Store) Delete(ctx context.Context, inv *Inventory) error {
	if !inv.Exists() {
		return nil
	}
	err := s.Client.CoreV1().ConfigMaps(inv.Namespace).Delete(ctx, ConfigMapName(inv.Name), metav1.DeleteOptions{
		Preconditions: &metav1.Preconditions{ResourceVersion: &inv.resourceVersion},
	})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting inventory %s/%s: %w", inv.Namespace, inv.Name, err)
	}
	return nil
}

// List returns the inventories in a namespace ("" for all namespaces).
func (s *Store) List(ctx context.Context, namespace string) ([]*Inventory, error) {
	list, err := s.Client.CoreV1().ConfigMaps(namespace).List(ctx, metav1.ListOptions{
		LabelSelector: ManagedByLabel + "=" + ManagedByValue + "," + InventoryLabel,
	})
	if err != nil {
		return nil, fmt.Errorf("listing inventories: %w", err)
	}
	var out []*Inventory
	var errs []error
	for i := range list.Items {
		inv, err := fromConfigMap(&list.Items[i])
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, inv)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Namespace != out[j].Namespace {
			return out[i].Namespace < out[j].Namespace
		}
		return out[i].Name < out[j].Name
	})
	return out, errors.Join(errs...)
}
