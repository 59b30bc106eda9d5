package pipeline

import (
	"errors"
	"maps"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	fakediscovery "k8s.io/client-go/discovery/fake"
	clienttesting "k8s.io/client-go/testing"
)

// partialDiscovery answers like a cluster whose aggregated API server for
// metrics.example.com is down.
type partialDiscovery struct{ *fakediscovery.FakeDiscovery }

func (d partialDiscovery) ServerGroupsAndResources() ([]*metav1.APIGroup, []*metav1.APIResourceList, error) {
	groups, lists, _ := d.FakeDiscovery.ServerGroupsAndResources()
	return groups, lists, &discovery.ErrGroupDiscoveryFailed{Groups: map[schema.GroupVersion]error{
		{Group: "metrics.example.com", Version: "v1"}: errors.New("service unavailable"),
	}}
}

func TestServedKinds(t *testing.T) {
	t.Parallel()
	fake := &fakediscovery.FakeDiscovery{Fake: &clienttesting.Fake{Resources: []*metav1.APIResourceList{
		{GroupVersion: "v1", APIResources: []metav1.APIResource{{Name: "configmaps", Kind: "ConfigMap"}, {Name: "pods/status", Kind: "Pod"}}},
		{GroupVersion: "shop.example.com/v1", APIResources: []metav1.APIResource{{Name: "carts", Kind: "Cart"}}},
	}}}
	want := map[schema.GroupKind]bool{{Kind: "ConfigMap"}: true, {Group: "shop.example.com", Kind: "Cart"}: true}

	kinds, failed := servedKinds(fake)
	if !maps.Equal(kinds, want) || len(failed) != 0 {
		t.Errorf("served %v, failed %v; want %v and none", kinds, failed, want)
	}
	kinds, failed = servedKinds(partialDiscovery{fake})
	if !maps.Equal(kinds, want) || !maps.Equal(failed, map[string]bool{"metrics.example.com": true}) {
		t.Errorf("partial: served %v, failed %v", kinds, failed)
	}
}
