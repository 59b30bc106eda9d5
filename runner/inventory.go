package runner

import (
	"context"
	"fmt"
	"io"

	"github.com/gantry-dev/gantry/config"
	"github.com/gantry-dev/gantry/inventory"
)

// Inventories lists the inventories of cfg's inventory namespace, or the
// one cfg names (an error when it does not exist). The API server's
// warnings print on warnings.
func (s *Session) Inventories(ctx context.Context, cfg *config.Config, warnings io.Writer) ([]*inventory.Inventory, error) {
	clients, err := s.Connect(cfg, warnings)()
	if err != nil {
		return nil, err
	}
	store := &inventory.Store{Client: clients.Kube}
	if cfg.Inventory == "" {
		return store.List(ctx, cfg.InventoryNamespace)
	}
	inv, err := store.Load(ctx, cfg.InventoryNamespace, cfg.Inventory)
	if err != nil {
		return nil, err
	}
	if !inv.Exists() {
		return nil, fmt.Errorf("inventory %s/%s not found", cfg.InventoryNamespace, cfg.Inventory)
	}
	return []*inventory.Inventory{inv}, nil
}

// Revisions lists the revisions of cfg's inventory, newest first; never
// nil.
func (s *Session) Revisions(ctx context.Context, cfg *config.Config, warnings io.Writer) ([]*inventory.Revision, error) {
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	clients, err := s.Connect(cfg, warnings)()
	if err != nil {
		return nil, err
	}
	store := &inventory.Store{Client: clients.Kube, Metadata: clients.Metadata}
	inv, err := store.Load(ctx, cfg.InventoryNamespace, cfg.Inventory)
	if err != nil {
		return []*inventory.Revision{}, err
	}
	if !inv.Exists() {
		return []*inventory.Revision{}, fmt.Errorf("inventory %s/%s not found: no apply has recorded it in namespace %s (gantry inventory --inventory-namespace %s lists those there)",
			cfg.InventoryNamespace, cfg.Inventory, cfg.InventoryNamespace, cfg.InventoryNamespace)
	}
	// The inventory records which revisions exist; a Secret that only
	// looks like one is named, never listed.
	if strays, err := store.Strays(ctx, inv); err == nil && len(strays) > 0 {
		fmt.Fprintln(warnings, "gantry: warning: "+inventory.StrayWarning(inv, strays))
	}
	if inv.Revisions == nil {
		return []*inventory.Revision{}, nil // [] in JSON, not null
	}
	return inv.Revisions, nil
}
