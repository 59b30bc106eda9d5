package inventory

import "testing"

// Any id read back from an inventory ConfigMap (which anyone with write
// access to it can edit) parses or fails cleanly, and an id that parses
// names the same object when written again.
func FuzzEntryID(f *testing.F) {
	f.Add("shop_web_apps_Deployment")
	f.Add("_shop_Namespace")
	f.Add("_system::controller__view_rbac.authorization.k8s.io_ClusterRole")
	f.Add("___")
	f.Add("a_b_c_d_e")
	f.Fuzz(func(t *testing.T, id string) {
		m, err := Entry{ID: id}.Parse()
		if err != nil {
			return
		}
		again, err := Entry{ID: m.String()}.Parse()
		if err != nil || again != m {
			t.Fatalf("%q parses as %+v, written back as %q, which parses as %+v (%v)", id, m, m.String(), again, err)
		}
		if _, err := (Entry{ID: id, Version: "v1"}).GroupVersionKind(); err != nil {
			t.Fatalf("%q parses but has no GroupVersionKind: %v", id, err)
		}
	})
}
