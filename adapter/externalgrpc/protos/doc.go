// Package protos holds the Cluster Autoscaler externalgrpc protocol: the
// wire-compatible externalgrpc.proto and the Go code generated from it by
// generate.sh (`make generate`). Do not edit the *.pb.go files by hand.
package protos
