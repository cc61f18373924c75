module github.com/tributarydb/tributary/charts/k8stest/loadgen

go 1.26.0
