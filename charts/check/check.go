// Package check renders the Tributary Helm charts (charts/tributary and the
// k3s edge chart) and reads the k3s manifests, and decodes every object
// strictly, so that a misspelt or misplaced field fails a test instead of
// being dropped by the API server.
//
// Kinds built into Kubernetes are decoded with the apimachinery strict
// serializer over client-go's scheme: unknown fields, fields in the wrong
// case (ContainerPort) and duplicate keys are errors. The custom resources
// the charts use (cert-manager Certificate, prometheus-operator
// ServiceMonitor, k3s HelmChart) are decoded strictly, and case-sensitively,
// into the small Go structs in schema.go, which hold exactly the fields of
// their schemas that these charts may use: a field outside that allowlist
// fails too. Any other kind is an error.
//
// It is a separate Go module so that the main module does not depend on
// Helm and Kubernetes. Functions are safe for concurrent use.
package check

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/releaseutil"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kjson "k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/client-go/kubernetes/scheme"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// Object is one decoded manifest.
type Object struct {
	Source string // template or file it came from
	GVK    schema.GroupVersionKind
	Name   string
	// Obj is a typed Kubernetes object (*appsv1.StatefulSet, ...) or a
	// pointer to one of the custom resource structs of schema.go.
	Obj any
	// Raw is the document as rendered, converted to JSON: what an API
	// server would be sent (the apply package creates objects from it).
	Raw []byte
}

// RenderOptions name the release a chart is rendered as.
type RenderOptions struct {
	ReleaseName string // default "tributary"
	Namespace   string // default "tributary"
}

// Validate fills in defaults; no value is refused.
func (o *RenderOptions) Validate() error {
	if o.ReleaseName == "" {
		o.ReleaseName = "tributary"
	}
	if o.Namespace == "" {
		o.Namespace = "tributary"
	}
	return nil
}

// Render renders the chart in dir with values (merged over its
// values.yaml) as helm install would, and decodes every object strictly.
func Render(dir string, values map[string]any, opts RenderOptions) ([]Object, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	ch, err := loader.Load(dir)
	if err != nil {
		return nil, fmt.Errorf("load chart %s: %w", dir, err)
	}
	caps := chartutil.DefaultCapabilities.Copy()
	rv, err := chartutil.ToRenderValues(ch, values, chartutil.ReleaseOptions{
		Name: opts.ReleaseName, Namespace: opts.Namespace, Revision: 1, IsInstall: true,
	}, caps)
	if err != nil {
		return nil, fmt.Errorf("values of chart %s: %w", dir, err)
	}
	eng := engine.Engine{Strict: true}
	files, err := eng.Render(ch, rv)
	if err != nil {
		return nil, fmt.Errorf("render chart %s: %w", dir, err)
	}
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)
	var out []Object
	for _, name := range names {
		if !strings.HasSuffix(name, ".yaml") && !strings.HasSuffix(name, ".yml") {
			continue // NOTES.txt, helpers
		}
		objs, err := DecodeAll(name, []byte(files[name]))
		if err != nil {
			return nil, err
		}
		out = append(out, objs...)
	}
	return out, nil
}

// ReadManifests reads and strictly decodes every object of the YAML files
// in dir (not recursive).
func ReadManifests(dir string) ([]Object, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, fmt.Errorf("list manifests in %s: %w", dir, err)
	}
	if len(paths) == 0 {
		return nil, fmt.Errorf("list manifests in %s: no *.yaml file", dir)
	}
	var out []Object
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("read manifest: %w", err)
		}
		objs, err := DecodeAll(filepath.Base(p), data)
		if err != nil {
			return nil, err
		}
		out = append(out, objs...)
	}
	return out, nil
}

// DecodeAll splits a multi-document YAML stream and decodes each non-empty
// document with Decode.
func DecodeAll(source string, data []byte) ([]Object, error) {
	docs := releaseutil.SplitManifests(string(data))
	keys := make([]string, 0, len(docs))
	for k := range docs {
		keys = append(keys, k)
	}
	sort.Sort(releaseutil.BySplitManifestsOrder(keys))
	var out []Object
	for i, k := range keys {
		doc := docs[k]
		if isEmptyDoc(doc) {
			continue
		}
		obj, err := Decode(fmt.Sprintf("%s document %d", source, i+1), []byte(doc))
		if err != nil {
			return nil, err
		}
		out = append(out, obj)
	}
	return out, nil
}

// isEmptyDoc reports whether a YAML document holds only comments.
func isEmptyDoc(doc string) bool {
	for _, line := range strings.Split(doc, "\n") {
		if t := strings.TrimSpace(line); t != "" && !strings.HasPrefix(t, "#") {
			return false
		}
	}
	return true
}

// strictSerializer is the apimachinery YAML serializer in strict mode.
var strictSerializer = kjson.NewSerializerWithOptions(kjson.DefaultMetaFactory, scheme.Scheme, scheme.Scheme,
	kjson.SerializerOptions{Yaml: true, Strict: true})

// ErrUnknownKind is returned for an object whose kind is neither built into
// Kubernetes nor one of the custom resources of schema.go.
var ErrUnknownKind = errors.New("unknown kind")

// Decode strictly decodes one YAML document.
func Decode(source string, doc []byte) (Object, error) {
	var tm struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct {
			Name string `json:"name"`
		} `json:"metadata"`
	}
	if err := yaml.Unmarshal(doc, &tm); err != nil {
		return Object{}, fmt.Errorf("decode %s: %w", source, err)
	}
	gv, err := schema.ParseGroupVersion(tm.APIVersion)
	if err != nil || tm.Kind == "" {
		return Object{}, fmt.Errorf("decode %s: apiVersion %q kind %q: want both", source, tm.APIVersion, tm.Kind)
	}
	gvk := gv.WithKind(tm.Kind)
	o := Object{Source: source, GVK: gvk, Name: tm.Metadata.Name}
	if tm.Metadata.Name == "" {
		return Object{}, fmt.Errorf("decode %s (%s): metadata.name is empty", source, gvk.Kind)
	}
	js, err := yaml.YAMLToJSON(doc)
	if err != nil {
		return Object{}, fmt.Errorf("decode %s (%s %s): %w", source, gvk.Kind, o.Name, err)
	}
	o.Raw = js
	if newCustom, ok := customKinds[gvk]; ok {
		v := newCustom()
		strictErrs, err := sigsjson.UnmarshalStrict(js, v, sigsjson.DisallowUnknownFields)
		if err == nil && len(strictErrs) > 0 {
			err = errors.Join(strictErrs...)
		}
		if err != nil {
			return Object{}, fmt.Errorf("decode %s (%s %s): %w", source, gvk.Kind, o.Name, err)
		}
		o.Obj = v
		return o, nil
	}
	if !scheme.Scheme.Recognizes(gvk) {
		return Object{}, fmt.Errorf("decode %s: %s: %w", source, gvk, ErrUnknownKind)
	}
	obj, _, err := strictSerializer.Decode(doc, nil, nil)
	if err != nil {
		return Object{}, fmt.Errorf("decode %s (%s %s): %w", source, gvk.Kind, o.Name, err)
	}
	o.Obj = obj
	return o, nil
}

// Lint runs Helm's chart linter on dir with values in strict mode (as
// `helm lint --strict`: warnings fail too) and returns every finding.
func Lint(dir string, values map[string]any) error {
	l := action.NewLint()
	l.Strict = true
	l.Namespace = "tributary"
	res := l.Run([]string{dir}, values)
	if len(res.Errors) == 0 {
		return nil
	}
	var b bytes.Buffer
	for _, m := range res.Messages {
		fmt.Fprintf(&b, "\n  %s", m)
	}
	return fmt.Errorf("lint %s: %w%s", dir, errors.Join(res.Errors...), b.String())
}
