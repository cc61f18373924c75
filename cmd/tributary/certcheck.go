package main

import (
	"fmt"

	"github.com/tributarydb/tributary/internal/auth"
)

// replicationIdentity returns the identity the coordinators will read
// from --replicate-cert (auth.CertIdentity, as their intake does), or ""
// when replication runs without a certificate.
func (f *replicateFlags) replicationIdentity() (string, error) {
	if f.targets == "" || f.cert == "" {
		return "", nil
	}
	id, err := auth.CertFileIdentity(f.cert)
	if err != nil {
		return "", fmt.Errorf("%w: --replicate-cert: %v", errUsage, err)
	}
	return id, nil
}

// checkCertNamesNode refuses to start a node whose replication
// certificate names another node: the coordinators take the edge's
// identity from it and would refuse every segment (PermissionDenied) for
// as long as the node ran.
func checkCertNamesNode(certFile, certID, nodeID, how string) error {
	if certID == "" || certID == nodeID {
		return nil
	}
	return fmt.Errorf("%w: --replicate-cert %s names node %q (its first DNS SAN, else URI SAN, else common name), but this node is %q (%s): the coordinators would refuse every segment it ships; use the certificate issued for %q, or run as --node-id %q",
		errUsage, certFile, certID, nodeID, how, nodeID, certID)
}
