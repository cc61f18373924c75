// Command kube-apiserver is the Kubernetes API server of the k8s.io/kubernetes
// release pinned in go.mod, built so that make k8s-test can apply the
// rendered charts and manifests to a real API server.
package main

import (
	"os"
	_ "time/tzdata" // time zones of CronJob, as in the upstream binary

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"          // --logging-format=json
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // client-go metrics
	_ "k8s.io/component-base/metrics/prometheus/version"  // version metric
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
)

func main() {
	os.Exit(cli.Run(app.NewAPIServerCommand()))
}
