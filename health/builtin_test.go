package health

import (
	"context"
	"strings"
	"testing"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"
)

// shape is an object of a kind as its controller leaves it in one
// outcome, written from the kind's documented status.
type shape struct {
	name string
	want status.Status
	// says is what the verdict's message must hold.
	says string
	yaml string
}

func obj(t *testing.T, apiVersion, kind, body string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	doc := "apiVersion: " + apiVersion + "\nkind: " + kind + "\nmetadata:\n  name: x\n  namespace: ns\n  generation: 2\n" + body
	// As the API server's answer is decoded: whole numbers are int64.
	j, err := yaml.YAMLToJSON([]byte(doc))
	if err == nil {
		err = u.UnmarshalJSON(j)
	}
	if err != nil {
		t.Fatalf("%s: %v\n%s", kind, err, doc)
	}
	return u
}

func conditions(conds ...string) string {
	return "status:\n  conditions:\n" + strings.Join(conds, "")
}

func c(typ, st, reason, message string) string {
	return "  - type: " + typ + "\n    status: \"" + st + "\"\n    reason: " + reason + "\n    message: \"" + message + "\"\n"
}

func cg(typ, st string, gen int) string {
	return "  - type: " + typ + "\n    status: \"" + st + "\"\n    observedGeneration: " + string(rune('0'+gen)) + "\n"
}

var shapes = map[string][]shape{
	"Certificate.cert-manager.io": {
		{"issued", status.CurrentStatus, "current", conditions(c("Ready", "True", "Ready", "Certificate is up to date and has not expired"))},
		{"issuing", status.InProgressStatus, "Issuing certificate as Secret does not exist", conditions(
			c("Ready", "False", "DoesNotExist", "Issuing certificate as Secret does not exist"), c("Issuing", "True", "DoesNotExist", "Issuing certificate as Secret does not exist"))},
		{"ready for an older spec", status.InProgressStatus, "in progress", conditions(cg("Ready", "True", 1))},
		{"issuance failed", status.FailedStatus, `The certificate request has failed to complete and will be retried: Failed to wait for order resource "x-1" to become ready`, conditions(
			c("Ready", "False", "DoesNotExist", "Issuing certificate as Secret does not exist"),
			c("Issuing", "False", "Failed", `The certificate request has failed to complete and will be retried: Failed to wait for order resource \"x-1\" to become ready`))},
		{"no status yet", status.InProgressStatus, "which the object does not have yet", "spec:\n  secretName: x\n"},
		{"no conditions yet", status.InProgressStatus, "in progress", "status: {}\n"},
	},
	"CertificateRequest.cert-manager.io": {
		{"signed", status.CurrentStatus, "current", conditions(c("Approved", "True", "cert-manager.io", "approved"), c("Ready", "True", "Issued", "Certificate fetched from issuer successfully"))},
		{"pending", status.InProgressStatus, `Referenced "Issuer" not found`, conditions(c("Ready", "False", "Pending", `Referenced \"Issuer\" not found: issuer.cert-manager.io \"missing\" not found`))},
		{"denied", status.FailedStatus, "policy: no", conditions(c("Denied", "True", "policy", "no"), c("Ready", "False", "Denied", "The CertificateRequest was denied by an approval controller"))},
		{"invalid", status.FailedStatus, "bad CSR", conditions(c("InvalidRequest", "True", "InvalidRequest", "bad CSR"))},
		{"no status yet", status.InProgressStatus, "does not have yet", "spec: {}\n"},
	},
	"Issuer.cert-manager.io": {
		{"ready", status.CurrentStatus, "current", conditions(c("Ready", "True", "IsReady", "Signing CA verified"))},
		{"broken key pair", status.InProgressStatus, "ErrGetKeyPair", conditions(c("Ready", "False", "ErrGetKeyPair", `Error getting keypair for CA issuer: secrets \"ca\" not found`))},
		{"no status yet", status.InProgressStatus, "does not have yet", "spec: {}\n"},
	},
	"ClusterIssuer.cert-manager.io": {
		{"ready", status.CurrentStatus, "current", conditions(c("Ready", "True", "IsReady", "The ACME account was registered with the ACME server"))},
		{"not ready", status.InProgressStatus, "ErrRegisterACMEAccount", conditions(c("Ready", "False", "ErrRegisterACMEAccount", "Failed to register ACME account"))},
		{"no status yet", status.InProgressStatus, "does not have yet", "spec: {}\n"},
	},
	"ExternalSecret.external-secrets.io": {
		{"synced", status.CurrentStatus, "current", conditions(c("Ready", "True", "SecretSynced", "secret synced"))},
		{"failed", status.FailedStatus, "SecretSyncedError: could not get secret data from provider", conditions(c("Ready", "False", "SecretSyncedError", "could not get secret data from provider"))},
		{"deleted", status.InProgressStatus, "SecretDeleted", conditions(c("Ready", "False", "SecretDeleted", "secret deleted due to DeletionPolicy"))},
		{"no status yet", status.InProgressStatus, "does not have yet", "spec: {}\n"},
	},
	"ClusterExternalSecret.external-secrets.io": {
		{"ready", status.CurrentStatus, "current", conditions(c("Ready", "True", "", ""))},
		{"no status yet", status.InProgressStatus, "does not have yet", "spec: {}\n"},
	},
	"SecretStore.external-secrets.io": {
		{"valid", status.CurrentStatus, "current", conditions(c("Ready", "True", "Valid", "store validated"))},
		{"invalid", status.FailedStatus, "InvalidProviderConfig: unable to create client", conditions(c("Ready", "False", "InvalidProviderConfig", "unable to create client"))},
		{"no status yet", status.InProgressStatus, "does not have yet", "spec: {}\n"},
	},
	"ClusterSecretStore.external-secrets.io": {
		{"valid", status.CurrentStatus, "current", conditions(c("Ready", "True", "Valid", "store validated"))},
		{"invalid", status.FailedStatus, "ValidationFailed", conditions(c("Ready", "False", "ValidationFailed", "unable to validate store"))},
		{"no status yet", status.InProgressStatus, "does not have yet", "spec: {}\n"},
	},
	"Provider.pkg.crossplane.io": {
		{"healthy", status.CurrentStatus, "current", conditions(c("Installed", "True", "ActivePackageRevision", ""), c("Healthy", "True", "HealthyPackageRevision", ""))},
		{"installed, not healthy yet", status.InProgressStatus, "UnhealthyPackageRevision", conditions(c("Installed", "True", "ActivePackageRevision", ""), c("Healthy", "False", "UnhealthyPackageRevision", "post establish runtime hook failed"))},
		{"no status yet", status.InProgressStatus, "does not have yet", "spec: {}\n"},
	},
	"Configuration.pkg.crossplane.io": {
		{"healthy", status.CurrentStatus, "current", conditions(c("Installed", "True", "ActivePackageRevision", ""), c("Healthy", "True", "HealthyPackageRevision", ""))},
		{"unpacking", status.InProgressStatus, "in progress", conditions(c("Installed", "False", "UnpackingPackage", ""))},
	},
	"Function.pkg.crossplane.io": {
		{"healthy", status.CurrentStatus, "current", conditions(c("Installed", "True", "ActivePackageRevision", ""), c("Healthy", "True", "HealthyPackageRevision", ""))},
		{"not installed", status.InProgressStatus, "in progress", conditions(c("Healthy", "True", "HealthyPackageRevision", ""))},
	},
	"CompositeResourceDefinition.apiextensions.crossplane.io": {
		{"established", status.CurrentStatus, "current", conditions(c("Established", "True", "WatchingCompositeResource", ""), c("Offered", "True", "WatchingCompositeResourceClaim", ""))},
		{"not yet", status.InProgressStatus, "in progress", conditions(c("Established", "False", "TerminatingCompositeResource", ""))},
	},
	"Cluster.cluster.x-k8s.io": {
		{"v1beta1 ready", status.CurrentStatus, "current", "status:\n  phase: Provisioned\n  conditions:\n" + c("Ready", "True", "", "")},
		{"v1beta2 available", status.CurrentStatus, "current", conditions(c("Available", "True", "Available", ""))},
		{"provisioning", status.InProgressStatus, "WaitingForInfrastructure", "status:\n  phase: Provisioning\n  conditions:\n" + c("Ready", "False", "WaitingForInfrastructure", "")},
		{"failed", status.FailedStatus, "failed", "status:\n  phase: Failed\n  failureReason: InvalidConfiguration\n  failureMessage: bad\n"},
		{"no status yet", status.InProgressStatus, "does not have yet", "spec: {}\n"},
	},
	"MachineDeployment.cluster.x-k8s.io": {
		{"ready", status.CurrentStatus, "current", "status:\n  phase: Running\n  conditions:\n" + c("Ready", "True", "", "")},
		{"scaling up", status.InProgressStatus, "in progress", "status:\n  phase: ScalingUp\n  conditions:\n" + c("Ready", "False", "WaitingForAvailableMachines", "Minimum availability requires 3 replicas")},
		{"failed", status.FailedStatus, "failed", "status:\n  phase: Failed\n"},
	},
	"Machine.cluster.x-k8s.io": {
		{"ready", status.CurrentStatus, "current", "status:\n  phase: Running\n  conditions:\n" + c("Ready", "True", "", "")},
		{"provisioning", status.InProgressStatus, "in progress", "status:\n  phase: Provisioning\n"},
		{"failed", status.FailedStatus, "failed", "status:\n  phase: Failed\n  failureReason: CreateError\n"},
	},
	"Rollout.argoproj.io": {
		{"healthy", status.CurrentStatus, "current", "status:\n  phase: Healthy\n  observedGeneration: \"7bd9\"\n"},
		{"progressing", status.InProgressStatus, "in progress", "status:\n  phase: Progressing\n  message: more replicas need to be updated\n"},
		{"paused at a step", status.InProgressStatus, "CanaryPauseStep", "status:\n  phase: Paused\n  message: CanaryPauseStep\n"},
		{"degraded", status.FailedStatus, "RolloutAborted", "status:\n  phase: Degraded\n  message: 'RolloutAborted: Rollout aborted update to revision 2'\n"},
		{"no status yet", status.InProgressStatus, "does not have yet", "spec: {}\n"},
	},
	"Cluster.postgresql.cnpg.io": {
		{"healthy", status.CurrentStatus, "current", "status:\n  phase: Cluster in healthy state\n  conditions:\n" + c("Ready", "True", "ClusterIsReady", "Cluster is Ready")},
		{"setting up", status.InProgressStatus, "Setting up primary: Creating primary instance x-1", "status:\n  phase: Setting up primary\n  phaseReason: Creating primary instance x-1\n  conditions:\n" + c("Ready", "False", "ClusterIsNotReady", "Cluster Is Not Ready")},
		{"unrecoverable", status.FailedStatus, "Cluster is unrecoverable and needs manual intervention: Missing primary PVC", "status:\n  phase: Cluster is unrecoverable and needs manual intervention\n  phaseReason: Missing primary PVC\n  conditions:\n" + c("Ready", "False", "ClusterIsNotReady", "Cluster Is Not Ready")},
		{"invalid definition", status.FailedStatus, "Invalid cluster definition", "status:\n  phase: Invalid cluster definition\n  phaseReason: 'spec.instances: Invalid value'\n  conditions:\n" + c("Ready", "False", "ClusterIsNotReady", "Cluster Is Not Ready")},
		{"ready before, now a switchover", status.InProgressStatus, "Switchover in progress", "status:\n  phase: Switchover in progress\n  phaseReason: Switching over to x-2\n  conditions:\n" + c("Ready", "False", "ClusterIsNotReady", "Cluster Is Not Ready")},
		{"no status yet", status.InProgressStatus, "does not have yet", "spec: {}\n"},
	},
	"Kafka.kafka.strimzi.io": {
		{"ready", status.CurrentStatus, "current", conditions(c("Ready", "True", "", ""))},
		{"creating", status.InProgressStatus, "Creating", conditions(c("NotReady", "True", "Creating", "Kafka cluster is being deployed"))},
		{"reconciliation failed", status.FailedStatus, "InvalidResourceException: Kafka resource is invalid", conditions(c("NotReady", "True", "InvalidResourceException", "Kafka resource is invalid"))},
		{"reconciliation failed, with a warning first", status.FailedStatus, "TimeoutException", conditions(c("Warning", "True", "KafkaStorage", "deprecated"), c("NotReady", "True", "TimeoutException", "Exceeded timeout of 300000ms while waiting for Pods"))},
		{"no status yet", status.InProgressStatus, "does not have yet", "spec: {}\n"},
	},
	"KafkaUser.kafka.strimzi.io": {
		{"ready", status.CurrentStatus, "current", conditions(c("Ready", "True", "", ""))},
		{"no status yet", status.InProgressStatus, "does not have yet", "spec: {}\n"},
		{"reconciliation failed", status.FailedStatus, "InvalidResourceException", conditions(c("NotReady", "True", "InvalidResourceException", "Simple authorization ACL rules are configured but not supported"))},
	},
	"KafkaTopic.kafka.strimzi.io": {
		{"ready", status.CurrentStatus, "current", conditions(c("Ready", "True", "", ""))},
		{"error", status.FailedStatus, "KafkaError: Invalid config", conditions(c("Ready", "False", "KafkaError", "Invalid config"))},
		{"not reconciled yet", status.InProgressStatus, "in progress", "status:\n  observedGeneration: 1\n  conditions:\n" + c("Ready", "True", "", "")},
	},
	"ScaledObject.keda.sh": {
		{"ready", status.CurrentStatus, "current", conditions(c("Ready", "True", "ScaledObjectReady", "ScaledObject is defined correctly and is ready for scaling"), c("Active", "False", "ScalerNotActive", ""))},
		{"bad target", status.FailedStatus, "ScaledObjectCheckFailed", conditions(c("Ready", "False", "ScaledObjectCheckFailed", "ScaledObject doesn't have correct scaleTargetRef specification"))},
		{"no status yet", status.InProgressStatus, "does not have yet", "spec: {}\n"},
	},
	"ScaledJob.keda.sh": {
		{"ready", status.CurrentStatus, "current", conditions(c("Ready", "True", "ScaledJobReady", ""))},
		{"no conditions yet", status.InProgressStatus, "in progress", "status: {}\n"},
		{"bad trigger", status.FailedStatus, "ScaledJobCheckFailed", conditions(c("Ready", "False", "ScaledJobCheckFailed", "Failed to ensure ScaledJob is correctly created"))},
	},
}

// Every built-in rule is tested on shapes of each outcome it decides:
// ready, in progress, failed where it has a failed expression, and the
// fields it reads missing; and every built-in kind has shapes.
func TestBuiltInRulesOnStatusShapes(t *testing.T) {
	set, warnings, err := Compile(nil, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(warnings) > 0 {
		t.Errorf("built-in rules warn: %v", warnings)
	}
	covered := map[schema.GroupKind]bool{}
	for gk, list := range shapes {
		parsed := schema.ParseGroupKind(gk)
		rule := set.For(parsed)
		if rule == nil {
			t.Errorf("%s: no built-in rule", gk)
			continue
		}
		covered[rule.groupKind()] = true
		outcomes := map[status.Status]bool{}
		for _, s := range list {
			u := obj(t, rule.APIVersion, parsed.Kind, s.yaml)
			v, ok := set.Evaluate(context.Background(), u)
			if !ok {
				t.Fatalf("%s: no verdict", gk)
			}
			outcomes[v.Result.Status] = true
			if v.Result.Status != s.want || !strings.Contains(v.Result.Message, s.says) {
				t.Errorf("%s, %s: %s %q; want %s, saying %q", gk, s.name, v.Result.Status, v.Result.Message, s.want, s.says)
			}
			if v.Rule.Origin != BuiltIn || !strings.HasPrefix(v.Result.Message, "built-in rule for ") {
				t.Errorf("%s, %s: decided by %q (%q), want the built-in rule named", gk, s.name, v.Rule.Origin, v.Result.Message)
			}
		}
		if !outcomes[status.CurrentStatus] || !outcomes[status.InProgressStatus] || rule.Failed != "" && !outcomes[status.FailedStatus] {
			t.Errorf("%s: shapes cover %v; want current, in progress and (the rule has failed) failed", gk, outcomes)
		}
	}
	for _, r := range BuiltInRules() {
		if !covered[r.groupKind()] {
			t.Errorf("built-in rule for %s: no status shapes", r.what())
		}
	}
}
