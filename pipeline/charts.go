package pipeline

import (
	"errors"
	"fmt"

	"k8s.io/client-go/discovery"
)

// chartCapabilities gives a chart's rendering the cluster's Kubernetes
// version and the API versions it serves (group/version and
// group/version/Kind, as Helm's .Capabilities.APIVersions holds them),
// as helm install renders against the cluster it installs into.
func (r *run) chartCapabilities() (kubeVersion string, apiVersions []string, err error) {
	if err := r.ensureClients(); err != nil {
		return "", nil, err
	}
	d := r.clients.Kube.Discovery()
	v, err := d.ServerVersion()
	if err != nil {
		return "", nil, fmt.Errorf("reading the cluster's version for the chart's .Capabilities: %w", err)
	}
	_, lists, err := d.ServerGroupsAndResources()
	var partial *discovery.ErrGroupDiscoveryFailed
	if err != nil && !errors.As(err, &partial) {
		return "", nil, fmt.Errorf("reading the cluster's API versions for the chart's .Capabilities: %w", err)
	}
	for _, l := range lists {
		apiVersions = append(apiVersions, l.GroupVersion)
		for _, res := range l.APIResources {
			apiVersions = append(apiVersions, l.GroupVersion+"/"+res.Kind)
		}
	}
	return v.GitVersion, apiVersions, nil
}
