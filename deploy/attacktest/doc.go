// Package attacktest is a standing attack suite: it starts the real
// federation-autoscaler binary on loopback (the broker with `pki init` /
// `pki join` material, a consumer agent against a simulated Kubernetes API,
// the one-process demo), each as a child process under a low
// file-descriptor limit, and attacks it from outside as an attacker or a
// careless operator would. Every test shows one hardened behaviour holding
// on the shipped binary (docs/operations.md, "Limits and hardening").
//
// The helpers live in harness_test.go: startBroker, startAgent and
// startDemo start a process and return its endpoints (address, a healthy
// request, its client); startFlood floods a listener with raw TCP
// connections; measure and measureAll time healthy clients; eventually
// polls a real condition. An attack on another weakness is one more small
// *_test.go file built on them (flood_test.go is the first).
//
// The package has no non-test code. It builds the binary once per test run
// (deploy/testbin), or attacks the one FA_ATTACKTEST_BINARY names (a
// release, or a build from before a fix), and needs Linux, loopback
// addresses beyond 127.0.0.1 (all of 127.0.0.0/8 is local on Linux) and
// util-linux's prlimit.
package attacktest
