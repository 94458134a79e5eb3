package liqo

import corev1 "k8s.io/api/core/v1"

// NodeReady reports whether a (virtual) node's Ready condition is True:
// the one readiness rule of the agents (the consumer's projection of
// VirtualNodeStates and the consolidation's "room is Ready" both read it).
func NodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
