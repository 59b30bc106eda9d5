package sources

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"filippo.io/age"
	"github.com/getsops/sops/v3"
	"github.com/getsops/sops/v3/aes"
	sopsage "github.com/getsops/sops/v3/age"
	"github.com/getsops/sops/v3/cmd/sops/formats"
	"github.com/getsops/sops/v3/config"
	"github.com/getsops/sops/v3/keyservice"
	sopsdotenv "github.com/getsops/sops/v3/stores/dotenv"
	sopsini "github.com/getsops/sops/v3/stores/ini"
	sopsjson "github.com/getsops/sops/v3/stores/json"
	sopsyaml "github.com/getsops/sops/v3/stores/yaml"
	"google.golang.org/grpc"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// sopsKeys decrypts SOPS data keys with the age identities it is given and
// nothing else: no environment variables, key files or cloud KMS, so what
// a run can decrypt is exactly what its inputs allow.
type sopsKeys struct {
	ids sopsage.ParsedIdentities
}

var _ keyservice.KeyServiceClient = sopsKeys{}

func (sopsKeys) Encrypt(context.Context, *keyservice.EncryptRequest, ...grpc.CallOption) (*keyservice.EncryptResponse, error) {
	return nil, errors.New("gantry only decrypts")
}

func (k sopsKeys) Decrypt(_ context.Context, req *keyservice.DecryptRequest, _ ...grpc.CallOption) (*keyservice.DecryptResponse, error) {
	ak := req.GetKey().GetAgeKey()
	if ak == nil {
		return nil, errors.New("only age keys are supported")
	}
	mk := &sopsage.MasterKey{Recipient: ak.GetRecipient(), EncryptedKey: string(req.GetCiphertext())}
	k.ids.ApplyToMasterKey(mk)
	plain, err := mk.Decrypt()
	if err != nil {
		return nil, err
	}
	return &keyservice.DecryptResponse{Plaintext: plain}, nil
}

// The markers SOPS writes into an encrypted file, per format. A file is
// taken as encrypted only when its metadata sits where SOPS puts it: a
// top-level sops key (YAML, JSON and the binary format's JSON envelope), a
// [sops] section (INI) or sops_ keys (dotenv).
var (
	sopsYAMLMarker   = regexp.MustCompile(`(?m)^sops:[ \t]*\r?$`)
	sopsJSONMarker   = regexp.MustCompile(`"sops"\s*:\s*\{`)
	sopsINIMarker    = regexp.MustCompile(`(?m)^\[sops\][ \t]*\r?$`)
	sopsDotenvMarker = regexp.MustCompile(`(?m)^sops_mac=`)
	sopsMACMarker    = regexp.MustCompile(`mac"?\s*[:=]\s*"?ENC\[`)
)

// sopsFormatOf says in which of SOPS' formats data is encrypted, reading
// the markers SOPS writes, and ok=false when it is not encrypted. name
// decides between formats that look alike: a JSON envelope is SOPS' binary
// format unless the file is named .json (or .yaml, which reads JSON too).
func sopsFormatOf(name string, data []byte) (f formats.Format, ok bool) {
	if !sopsMACMarker.Match(data) {
		return 0, false
	}
	switch {
	case sopsDotenvMarker.Match(data):
		return formats.Dotenv, true
	case sopsINIMarker.Match(data):
		return formats.Ini, true
	case sopsYAMLMarker.Match(data):
		return formats.Yaml, true
	case sopsJSONMarker.Match(data):
		switch formats.FormatForPath(name) {
		case formats.Json:
			return formats.Json, true
		case formats.Yaml:
			return formats.Yaml, true
		}
		var top map[string]json.RawMessage
		if json.Unmarshal(data, &top) == nil && len(top) == 2 && top["data"] != nil && top["sops"] != nil {
			return formats.Binary, true
		}
		return formats.Json, true
	}
	return 0, false
}

func sopsStore(f formats.Format) sops.Store {
	switch f {
	case formats.Yaml:
		return sopsyaml.NewStore(&config.YAMLStoreConfig{})
	case formats.Json:
		return sopsjson.NewStore(&config.JSONStoreConfig{})
	case formats.Dotenv:
		return sopsdotenv.NewStore(&config.DotenvStoreConfig{})
	case formats.Ini:
		return sopsini.NewStore(&config.INIStoreConfig{})
	default:
		return sopsjson.NewBinaryStore(&config.JSONBinaryStoreConfig{})
	}
}

// errNoSOPSKey is the refusal of an encrypted file or object when no
// identities were given.
var errNoSOPSKey = errors.New("encrypted with SOPS: give sops-age-key to decrypt it; nothing encrypted is ever applied")

// sopsDecrypt decrypts data, encrypted in format in, with the sops
// library's own store for that format, and emits it in format out. With
// checkMAC, the file's MAC must match what was decrypted: anything added,
// removed, reordered or changed since SOPS wrote it is refused.
func sopsDecrypt(data []byte, in, out formats.Format, ids []age.Identity, checkMAC bool, reveal func([]string)) (plain []byte, err error) {
	return sopsDecryptWith(data, in, out, ids, checkMAC, reveal, nil, nil)
}

// sopsDecryptWith is sopsDecrypt; taint, when set, changes the values
// decrypted (by their paths) before they are emitted.
//
// identity, when set, is told the values decrypted at an object's
// identity (identityPaths): the only names and namespaces its objects may
// take from what was decrypted.
func sopsDecryptWith(data []byte, in, out formats.Format, ids []age.Identity, checkMAC bool, reveal func([]string), taint func(sops.TreeBranches, map[string]bool), identity func([]string)) (plain []byte, err error) {
	if len(ids) == 0 {
		return nil, errNoSOPSKey
	}
	// Crafted input can make the stores panic: a refusal, not a crash.
	defer func() {
		if r := recover(); r != nil {
			plain, err = nil, fmt.Errorf("reading it as SOPS-encrypted data failed: %v", r)
		}
	}()
	if in == formats.Yaml {
		// SOPS' YAML store follows aliases as it builds its tree, and
		// bounds them in the first document only: an encrypted file
		// inside an object (a Secret's data) has passed no other check.
		if err := checkAliases(data); err != nil {
			return nil, err
		}
	}
	tree, err := sopsStore(in).LoadEncryptedFile(data)
	if err != nil {
		return nil, fmt.Errorf("reading SOPS metadata: %w", err)
	}
	key, err := tree.Metadata.GetDataKeyWithKeyServices([]keyservice.KeyServiceClient{sopsKeys{ids: ids}}, sops.DefaultDecryptionOrder)
	if err != nil {
		return nil, errors.New("none of the sops-age-key identities can decrypt it (it was encrypted for other recipients)")
	}
	encrypted := map[string]bool{}
	walkSOPSTree(tree.Branches, func(path string, v any) {
		if s, ok := v.(string); ok && isSOPSValue(s) {
			encrypted[path] = true
		}
	})
	cipher := aes.NewCipher()
	mac, err := tree.Decrypt(key, cipher)
	if err != nil {
		return nil, errors.New("decrypting its values failed: a value was changed, or moved to another key, after it was encrypted")
	}
	if checkMAC {
		stored, err := cipher.Decrypt(tree.Metadata.MessageAuthenticationCode, key, tree.Metadata.LastModified.Format(time.RFC3339))
		if err != nil || stored != mac {
			return nil, errors.New("SOPS integrity check (MAC) failed: the file was changed after it was encrypted (edit it with sops, not by hand)")
		}
	}
	if reveal != nil || identity != nil {
		ids := identityPaths(tree.Branches)
		var values, names []string
		walkSOPSTree(tree.Branches, func(path string, v any) {
			switch {
			case encrypted[path] && ids[path]:
				if strings.HasSuffix(path, "\x00metadata\x00name") || strings.HasSuffix(path, "\x00metadata\x00namespace") {
					names = append(names, fmt.Sprint(v))
				}
			case encrypted[path]:
				values = append(values, fmt.Sprint(v))
			}
		})
		if reveal != nil {
			reveal(values)
		}
		if identity != nil {
			identity(names)
		}
	}
	if taint != nil {
		taint(tree.Branches, encrypted)
	}
	return sopsStore(out).EmitPlainFile(tree.Branches)
}

// identityPaths are the paths of a SOPS tree that name an object rather
// than hold its content: the apiVersion, kind, metadata.name and
// metadata.namespace of each document that is an object. A file
// encrypted whole (sops without --encrypted-regex) encrypts them too, but
// they are printed in every report as the object's name, so they are
// never masked as secrets.
func identityPaths(branches sops.TreeBranches) map[string]bool {
	out := map[string]bool{}
	for i, b := range branches {
		var hasAPI, hasKind bool
		var meta sops.TreeBranch
		for _, item := range b {
			switch item.Key {
			case "apiVersion":
				hasAPI = true
			case "kind":
				hasKind = true
			case "metadata":
				meta, _ = item.Value.(sops.TreeBranch)
			}
		}
		if !hasAPI || !hasKind {
			continue
		}
		doc := fmt.Sprint(i)
		out[doc+"\x00apiVersion"], out[doc+"\x00kind"] = true, true
		for _, item := range meta {
			if item.Key == "name" || item.Key == "namespace" {
				out[doc+"\x00metadata\x00"+item.Key.(string)] = true
			}
		}
	}
	return out
}

// walkSOPSTree calls fn with every leaf value of a SOPS tree and its path.
func walkSOPSTree(branches sops.TreeBranches, fn func(path string, v any)) {
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch t := v.(type) {
		case sops.TreeBranch:
			for _, item := range t {
				if k, ok := item.Key.(string); ok {
					walk(path+"\x00"+k, item.Value)
				}
			}
		case []any:
			for i, e := range t {
				walk(fmt.Sprintf("%s\x00%d", path, i), e)
			}
		default:
			fn(path, v)
		}
	}
	for i, b := range branches {
		walk(fmt.Sprint(i), b)
	}
}

// sopsFS is the file system a build reads: a file that SOPS encrypted is
// decrypted as it is read, in its own format and with its MAC checked, so
// that kustomize sees plain text wherever the file is used (resources,
// patches, components, generator sources of every format), as Flux's
// kustomize-controller decrypts them. Without identities it either refuses
// encrypted files (apply) or lets them through as they are (keep, for a
// push that packs what is in git).
type sopsFS struct {
	filesys.FileSystem
	ids    []age.Identity
	keep   bool
	packed bool
	// reveal is told the values decrypted, which output must then mask.
	reveal func([]string)
	// display names a file for errors.
	display func(string) string

	// taint changes every value decrypted (provenance.go).
	taint taintVariant

	mu        sync.Mutex
	err       error           // the first refusal, clearer than kustomize's wrapping of it
	encrypted map[string]bool // display names of the encrypted files read
	decrypted map[string]bool // those of them decrypted
	values    map[string]bool // the values decrypted
	inputs    map[string]bool // display names of secrets given other than by a file (secretInput)
	// identities are, by display name of the file, the values decrypted
	// at its objects' identities (apiVersion, kind, name, namespace).
	identities map[string]map[string]bool
}

// hideIn is err with the values this build decrypted hidden in what it
// says (hideValues), whatever their length; err itself when nothing was
// decrypted. A BuildError keeps its file.
func (f *sopsFS) hideIn(err error) error {
	if err == nil {
		return nil
	}
	f.mu.Lock()
	values := make([]string, 0, len(f.values))
	for v := range f.values {
		values = append(values, v)
		if f.taint != notTainted {
			// A build with other values holds them changed: its
			// messages are masked of those, so that they compare with
			// the real build's (a whole value masked in both).
			values = append(values, f.taint.String(v))
		}
	}
	f.mu.Unlock()
	if len(values) == 0 {
		return err
	}
	slices.SortStableFunc(values, func(a, b string) int { return len(b) - len(a) })
	var be *BuildError
	if errors.As(err, &be) && be.Err != nil && err == error(be) {
		return &BuildError{File: be.File, Err: &HiddenError{Err: be.Err, Msg: HideValues(be.Err.Error(), values)}}
	}
	return &HiddenError{Err: err, Msg: HideValues(err.Error(), values)}
}

// longEnough tells reveal only the decrypted values of at least
// MinSecretDataMask characters, the ones worth masking wherever they
// appear: a short one ("true", "shop", a port) would mask every such word
// of every report and log, gantry's own outputs and names included. A
// value of any length is masked where it is: in a Secret's data by its
// kind, elsewhere in the fields it was decrypted into (Object's
// DecryptedFields), which provenance finds without matching values.
func longEnough(reveal func([]string)) func([]string) {
	if reveal == nil {
		return nil
	}
	return func(values []string) {
		var long []string
		for _, v := range values {
			if len(strings.TrimSpace(v)) >= MinSecretDataMask {
				long = append(long, v)
			}
		}
		if len(long) > 0 {
			reveal(long)
		}
	}
}

func newSOPSFS(fs filesys.FileSystem, opts BuildOptions, display func(string) string) *sopsFS {
	return &sopsFS{FileSystem: fs, ids: opts.SOPSIdentities, keep: opts.KeepSOPSEncrypted && len(opts.SOPSIdentities) == 0, packed: opts.Packed,
		reveal: longEnough(opts.Decrypted), display: display, encrypted: map[string]bool{},
		decrypted: map[string]bool{}, values: map[string]bool{}, identities: map[string]map[string]bool{}, taint: opts.taint}
}

func (f *sopsFS) ReadFile(name string) ([]byte, error) {
	data, err := f.FileSystem.ReadFile(name)
	if err != nil {
		var limit *LimitError
		if errors.As(err, &limit) {
			err = &BuildError{File: f.display(name), Err: err}
			f.mu.Lock()
			if f.err == nil {
				f.err = err
			}
			f.mu.Unlock()
		}
		return nil, err
	}
	format, ok := sopsFormatOf(name, data)
	if !ok {
		return data, nil
	}
	shown := f.display(name)
	f.mu.Lock()
	f.encrypted[shown] = true
	f.mu.Unlock()
	mixed := format == formats.Yaml && mixedYAMLDocuments(data)
	if mixed && !f.packed {
		// A document added to a file SOPS wrote (a plain one, or one
		// of another file) would take the file out of its MAC's reach.
		err := &BuildError{File: shown, Err: errors.New("this file joins documents SOPS encrypted with others (plain, or encrypted as another file): SOPS checks a file's integrity (its MAC) as a whole, so such a file is refused; keep each encrypted file as sops wrote it, and the others beside it")}
		f.mu.Lock()
		if f.err == nil {
			f.err = err
		}
		f.mu.Unlock()
		return nil, err
	}
	if f.keep {
		return data, nil
	}
	if mixed {
		// An artifact's objects joined in one stream: no file MAC covers
		// them; each object is decrypted after the build.
		return data, nil
	}
	reveal := func(values []string) {
		f.mu.Lock()
		f.decrypted[shown] = true
		for _, v := range values {
			f.values[v] = true
		}
		f.mu.Unlock()
		if f.reveal != nil {
			f.reveal(values)
		}
	}
	var taint func(sops.TreeBranches, map[string]bool)
	if f.taint != notTainted {
		taint = f.taint.taintSOPSTree
	}
	identity := func(names []string) {
		f.mu.Lock()
		defer f.mu.Unlock()
		for _, n := range names {
			if f.identities[shown] == nil {
				f.identities[shown] = map[string]bool{}
			}
			f.identities[shown][n] = true
		}
	}
	plain, err := sopsDecryptWith(data, format, format, f.ids, true, reveal, taint, identity)
	if err != nil {
		err = &BuildError{File: shown, Err: err}
		f.mu.Lock()
		if f.err == nil {
			f.err = err
		}
		f.mu.Unlock()
		return nil, err
	}
	return plain, nil
}

// refusal is the first file the build could not decrypt.
func (f *sopsFS) refusal() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err
}

// encryptedFiles lists the encrypted files read, sorted.
func (f *sopsFS) encryptedFiles() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]string, 0, len(f.encrypted))
	for n := range f.encrypted {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// mixedYAMLDocuments reports whether a YAML stream has documents that
// carry another SOPS MAC, or none: not one file that SOPS wrote (it writes
// the same metadata into every document), but objects joined into one
// stream, as an artifact holds them.
func mixedYAMLDocuments(data []byte) bool {
	var first string
	for _, doc := range yamlSeparator.Split(string(data), -1) {
		if strings.TrimSpace(doc) == "" {
			continue
		}
		m := sopsYAMLMAC.FindString(doc)
		if m == "" {
			return true
		}
		if first == "" {
			first = m
		} else if m != first {
			return true
		}
	}
	return false
}

var (
	yamlSeparator = regexp.MustCompile(`(?m)^---[ \t]*\r?$`)
	sopsYAMLMAC   = regexp.MustCompile(`(?m)^[ \t]+mac: ENC\[[^\]]*\]`)
)

// decryptObject decrypts an object that still carries SOPS metadata after
// the build: objects joined into one stream, as an artifact holds them,
// possibly renamed or relabelled by kustomize on the way. Each value is
// authenticated with its own path as SOPS encrypted it; a file MAC cannot
// cover an object that was transformed, so it is not checked here, as
// Flux's kustomize-controller does not check it.
func decryptObject(o *Object, ids []age.Identity, reveal func([]string)) error {
	var fields []string
	WalkStrings(o.Object, "", func(path, v string) {
		if isSOPSValue(v) && !identityField(path) {
			fields = append(fields, path)
		}
	})
	b, err := o.MarshalJSON()
	if err != nil {
		return err
	}
	plain, err := sopsDecrypt(b, formats.Json, formats.Json, ids, false, reveal)
	if err != nil {
		return err
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(plain); err != nil {
		return fmt.Errorf("reading what was decrypted: %w", err)
	}
	o.Unstructured = u
	o.DecryptedFields = append(o.DecryptedFields, fields...)
	return nil
}

// decryptSecretData decrypts the values of a Secret's data that are whole
// SOPS-encrypted files, as Flux's kustomize-controller does: a file that a
// generator or a hand-written manifest put into the Secret encrypted. The
// value is emitted in the format its key's name says (config.json as JSON,
// app.env as dotenv, anything else as it was encrypted).
func decryptSecretData(o *Object, ids []age.Identity, keep bool, reveal func([]string)) error {
	data, ok := o.Object["data"].(map[string]any)
	if !ok {
		return nil
	}
	keys := make([]string, 0, len(data))
	for k := range data {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		s, ok := data[k].(string)
		if !ok {
			continue
		}
		raw, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			continue // the server reports it
		}
		in, ok := sopsFormatOf(k, raw)
		if !ok {
			continue
		}
		if keep {
			o.Encrypted = true
			continue
		}
		out := formats.FormatForPath(k)
		if strings.HasSuffix(k, ".dockerconfigjson") {
			out = formats.Json
		}
		if out == formats.Binary && in != formats.Binary {
			out = in
		}
		plain, err := sopsDecrypt(raw, in, out, ids, true, reveal)
		if err != nil {
			return fmt.Errorf("data key %q: %w", k, err)
		}
		data[k] = base64.StdEncoding.EncodeToString(plain)
	}
	return nil
}

// sopsRemnant names where an object still holds SOPS-encrypted content
// ("" when nowhere): the sops key, a value SOPS encrypted, or the sops_
// keys an encrypted dotenv file leaves in a generated Secret or ConfigMap.
// Names only, never values.
func sopsRemnant(o *Object) string {
	if _, ok := o.Object["sops"]; ok {
		return "sops"
	}
	kind := o.GetKind()
	core := o.GroupVersionKind().Group == ""
	for _, field := range []string{"data", "stringData", "binaryData"} {
		m, ok := o.Object[field].(map[string]any)
		if !ok || !core || (kind != "Secret" && kind != "ConfigMap") {
			continue
		}
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if strings.HasPrefix(k, "sops_") {
				return field + "." + k
			}
			if s, ok := m[k].(string); ok && kind == "Secret" && field == "data" {
				if raw, err := base64.StdEncoding.DecodeString(s); err == nil && isSOPSValue(string(raw)) {
					return field + "." + k
				}
			}
		}
	}
	return findSOPSValue(o.Object, "")
}

// findSOPSValue walks v for a string that SOPS encrypted and returns its
// path ("" when there is none). Paths are built only for a find: every
// object of a set is walked.
func findSOPSValue(v any, path string) string {
	switch t := v.(type) {
	case string:
		if isSOPSValue(t) {
			return path
		}
	case map[string]any:
		for k, e := range t {
			if !holdsSOPSValue(e) {
				continue
			}
			p := k
			if path != "" {
				p = path + "." + k
			}
			return findSOPSValue(e, p)
		}
	case []any:
		for i, e := range t {
			if holdsSOPSValue(e) {
				return findSOPSValue(e, fmt.Sprintf("%s[%d]", path, i))
			}
		}
	}
	return ""
}

// holdsSOPSValue reports whether v holds a string that SOPS encrypted.
func holdsSOPSValue(v any) bool {
	switch t := v.(type) {
	case string:
		return isSOPSValue(t)
	case map[string]any:
		for _, e := range t {
			if holdsSOPSValue(e) {
				return true
			}
		}
	case []any:
		for _, e := range t {
			if holdsSOPSValue(e) {
				return true
			}
		}
	}
	return false
}

func isSOPSValue(s string) bool {
	return strings.HasPrefix(strings.TrimLeft(s, " \t\r\n"), "ENC[AES256_GCM,data:")
}

// decryptBuilt decrypts what the build left encrypted and enforces the
// rule that nothing SOPS-encrypted goes further: applied, dry-run, printed
// or, decrypted, packed. With keep (a push without identities) encrypted
// objects stay as they are, each marked; an encrypted file that was not
// itself an object (a patch or a generator source) is refused then, since
// an artifact holds built objects and gantry never packs decrypted values.
func decryptBuilt(objects []*Object, fs *sopsFS) error {
	for _, o := range objects {
		if _, ok := o.Object["sops"]; !ok {
			continue
		}
		if fs.keep {
			o.Encrypted = true
			continue
		}
		if err := decryptObject(o, fs.ids, fs.reveal); err != nil {
			return &BuildError{File: o.Source, Err: fmt.Errorf("%s: %w", o.Ref(), err)}
		}
	}
	for _, o := range objects {
		if o.GetKind() != "Secret" || o.GroupVersionKind().Group != "" {
			continue
		}
		if err := decryptSecretData(o, fs.ids, fs.keep, fs.reveal); err != nil {
			return &BuildError{File: o.Source, Err: fmt.Errorf("%s: %w", o.Ref(), err)}
		}
	}
	if fs.keep {
		packed := map[string]bool{}
		for _, o := range objects {
			if o.Encrypted {
				packed[o.Source] = true
			}
		}
		for _, f := range fs.encryptedFiles() {
			if !packed[f] && !fs.isInput(f) {
				return &BuildError{File: f, Err: errors.New("this SOPS-encrypted file is a patch or a generator source, and a pushed artifact holds built objects: it could be packed only decrypted, which gantry never does; give sops-age-key to apply it from the folder, or keep it out of the pushed folder")}
			}
		}
	}
	for _, o := range objects {
		if o.Encrypted {
			continue
		}
		if where := sopsRemnant(o); where != "" {
			return &BuildError{File: o.Source, Err: fmt.Errorf("%s still holds SOPS-encrypted content at %s without the metadata to decrypt it (values pasted from an encrypted file, or a file encrypted in parts); encrypt the whole file with sops: nothing encrypted is ever applied", o.Ref(), where)}
		}
	}
	return nil
}

// workspace is the folder the build may read in (the bounded file
// system's first root).
func (f *sopsFS) workspace() string {
	if b, ok := f.FileSystem.(*boundedFS); ok {
		return b.root()
	}
	return ""
}

// secretInput records a value given as a secret other than by a file
// (a chart's secret-named set line): built with other values, and
// followed by provenance, as a decrypted one is. name stands for it in
// messages.
func (f *sopsFS) secretInput(name, value string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.inputs == nil {
		f.inputs = map[string]bool{}
	}
	f.inputs[name] = true
	f.encrypted[name] = true
	f.decrypted[name] = true
	f.values[value] = true
}

// isInput says whether name stands for a secret given other than by a
// file (a set line), which no artifact packs.
func (f *sopsFS) isInput(name string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.inputs[name]
}

// secretFiles are the files (and set lines) shown as their names whose
// values the build was given as secrets, sorted.
func (f *sopsFS) secretFiles() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]string, 0, len(f.decrypted))
	for name := range f.decrypted {
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}
