package api

import "strings"

// NodeGroupID is the id of the node group of provider × chunk type:
// ng-<providerClusterId>-<type> (reference §6.1).
func NodeGroupID(providerClusterID string, t ChunkType) string {
	return "ng-" + providerClusterID + "-" + strings.ToLower(string(t))
}

// ParseNodeGroupID splits a node-group id into provider and chunk type. The
// chunk type is the last dash-separated element, so provider ids may contain
// dashes.
func ParseNodeGroupID(id string) (provider string, t ChunkType, ok bool) {
	rest, found := strings.CutPrefix(id, "ng-")
	if !found {
		return "", "", false
	}
	i := strings.LastIndexByte(rest, '-')
	if i <= 0 {
		return "", "", false
	}
	t = ChunkType(rest[i+1:])
	if t != ChunkStandard && t != ChunkGPU {
		return "", "", false
	}
	return rest[:i], t, true
}
