package diffs

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// No byte of a Secret's values survives into a diff, whatever the keys
// and values: data, stringData, and kubectl's last-applied annotation
// (which holds them all again), on creation, change and deletion.
func FuzzSecretValuesNeverInDiffs(f *testing.F) {
	f.Add("password", "hunter2-long-enough", "token", "app")
	f.Add("a", "", "b", "x")
	f.Add(".dockerconfigjson", `{"auths":{"r":{"auth":"dXNlcjpwYXNz"}}}`, "ca.crt", "tls")
	f.Add("k", "line one\nline two\r\n", "k2", "multi")
	f.Fuzz(func(t *testing.T, key, value, key2, name string) {
		if strings.Contains(key+key2+name, "CANARY") || key == "" || key2 == "" {
			t.Skip()
		}
		secret := "CANARY" + value
		secret2 := "CANARY" + value + "-2"
		secretObj := func(v, v2 string) *unstructured.Unstructured {
			applied, _ := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "Secret", "stringData": map[string]any{key: v}, "data": map[string]any{key2: base64.StdEncoding.EncodeToString([]byte(v2))}})
			return &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "v1", "kind": "Secret",
				"metadata": map[string]any{"name": name, "namespace": "ns", "annotations": map[string]any{
					"kubectl.kubernetes.io/last-applied-configuration": string(applied)}},
				"stringData": map[string]any{key: v},
				"data":       map[string]any{key2: base64.StdEncoding.EncodeToString([]byte(v2))},
			}}
		}
		live, desired := secretObj(secret, secret2), secretObj(secret2, secret)
		for _, pair := range [][2]*unstructured.Unstructured{{nil, desired}, {live, desired}, {live, nil}} {
			d, err := Object("Secret/ns/"+name, pair[0], pair[1])
			if err != nil {
				continue
			}
			for _, leak := range []string{"CANARY", base64.StdEncoding.EncodeToString([]byte(secret)), base64.StdEncoding.EncodeToString([]byte(secret2))} {
				if strings.Contains(d, leak) {
					t.Fatalf("the diff holds %q:\n%s", leak, d)
				}
			}
		}
	})
}
