module github.com/tributarydb/tributary/charts/k8stest/pause

go 1.26.0
