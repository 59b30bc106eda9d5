// Package sources turns a workspace's configuration into objects: a
// kustomization (kustomize in-process, no plugin that runs code), a plain
// folder of manifests, SOPS-encrypted files decrypted as Flux decrypts
// them, strict ${VAR} substitution, and the limits a pull request's files
// are held to. It knows nothing of clusters, inventories or the run's
// order: the stages that talk to a cluster take what it returns, and the
// offline commands use it alone.
package sources
