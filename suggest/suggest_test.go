package suggest

import "testing"

func TestClosest(t *testing.T) {
	t.Parallel()
	kinds := []string{"DaemonSet", "Deployment", "ReplicaSet", "StatefulSet"}
	for name, want := range map[string]string{
		"Deploymnet": "Deployment", "deployment": "Deployment", "StatefullSet": "StatefulSet", "Pod": "", "": "",
	} {
		if got := Closest(name, kinds); got != want {
			t.Errorf("Closest(%q) = %q, want %q", name, got, want)
		}
	}
}
