package check

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The custom resources the charts and manifests use, as the subset of
// their schemas that they may use (an allowlist: every other field is an
// error). Field names and types follow the CRDs: cert-manager.io/v1
// Certificate, monitoring.coreos.com/v1 ServiceMonitor, helm.cattle.io/v1
// HelmChart.

// customKinds maps each custom kind to a constructor of its struct.
var customKinds = map[schema.GroupVersionKind]func() any{
	{Group: "cert-manager.io", Version: "v1", Kind: "Certificate"}:          func() any { return new(Certificate) },
	{Group: "monitoring.coreos.com", Version: "v1", Kind: "ServiceMonitor"}: func() any { return new(ServiceMonitor) },
	{Group: "helm.cattle.io", Version: "v1", Kind: "HelmChart"}:             func() any { return new(HelmChart) },
}

// Certificate is cert-manager.io/v1 Certificate.
type Certificate struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		SecretName  string   `json:"secretName"`
		CommonName  string   `json:"commonName,omitempty"`
		DNSNames    []string `json:"dnsNames,omitempty"`
		URIs        []string `json:"uris,omitempty"`
		IPAddresses []string `json:"ipAddresses,omitempty"`
		Duration    string   `json:"duration,omitempty"`
		RenewBefore string   `json:"renewBefore,omitempty"`
		Usages      []string `json:"usages,omitempty"`
		IsCA        bool     `json:"isCA,omitempty"`
		PrivateKey  *struct {
			Algorithm      string `json:"algorithm,omitempty"`
			Size           int    `json:"size,omitempty"`
			Encoding       string `json:"encoding,omitempty"`
			RotationPolicy string `json:"rotationPolicy,omitempty"`
		} `json:"privateKey,omitempty"`
		IssuerRef struct {
			Name  string `json:"name"`
			Kind  string `json:"kind,omitempty"`
			Group string `json:"group,omitempty"`
		} `json:"issuerRef"`
	} `json:"spec"`
}

// ServiceMonitor is monitoring.coreos.com/v1 ServiceMonitor.
type ServiceMonitor struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		JobLabel          string               `json:"jobLabel,omitempty"`
		Selector          metav1.LabelSelector `json:"selector"`
		NamespaceSelector struct {
			Any        bool     `json:"any,omitempty"`
			MatchNames []string `json:"matchNames,omitempty"`
		} `json:"namespaceSelector,omitempty"`
		Endpoints []struct {
			Port          string `json:"port,omitempty"`
			Path          string `json:"path,omitempty"`
			Scheme        string `json:"scheme,omitempty"`
			Interval      string `json:"interval,omitempty"`
			ScrapeTimeout string `json:"scrapeTimeout,omitempty"`
			Authorization *struct {
				Type        string  `json:"type,omitempty"`
				Credentials *KeyRef `json:"credentials,omitempty"`
			} `json:"authorization,omitempty"`
			TLSConfig *struct {
				ServerName         string         `json:"serverName,omitempty"`
				InsecureSkipVerify bool           `json:"insecureSkipVerify,omitempty"`
				CA                 *SecretOrCMRef `json:"ca,omitempty"`
				Cert               *SecretOrCMRef `json:"cert,omitempty"`
				KeySecret          *KeyRef        `json:"keySecret,omitempty"`
			} `json:"tlsConfig,omitempty"`
		} `json:"endpoints"`
	} `json:"spec"`
}

// SecretOrCMRef is prometheus-operator's SecretOrConfigMap.
type SecretOrCMRef struct {
	Secret    *KeyRef `json:"secret,omitempty"`
	ConfigMap *KeyRef `json:"configMap,omitempty"`
}

// KeyRef selects a key of a Secret or ConfigMap.
type KeyRef struct {
	Name     string `json:"name"`
	Key      string `json:"key"`
	Optional *bool  `json:"optional,omitempty"`
}

// HelmChart is helm.cattle.io/v1 HelmChart, k3s's helm-controller.
type HelmChart struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		TargetNamespace string            `json:"targetNamespace,omitempty"`
		CreateNamespace bool              `json:"createNamespace,omitempty"`
		Chart           string            `json:"chart,omitempty"`
		Version         string            `json:"version,omitempty"`
		Repo            string            `json:"repo,omitempty"`
		ChartContent    string            `json:"chartContent,omitempty"`
		Set             map[string]string `json:"set,omitempty"`
		ValuesContent   string            `json:"valuesContent,omitempty"`
		HelmVersion     string            `json:"helmVersion,omitempty"`
		Bootstrap       bool              `json:"bootstrap,omitempty"`
		Timeout         string            `json:"timeout,omitempty"`
		FailurePolicy   string            `json:"failurePolicy,omitempty"`
	} `json:"spec"`
}
