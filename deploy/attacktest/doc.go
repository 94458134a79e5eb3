// Package attacktest is a standing attack suite: it starts the real
// federation-autoscaler binary on loopback (the broker with `pki init` /
// `pki join` material, a consumer agent against a simulated Kubernetes API,
// the one-process demo), each as a child process under a low
// file-descriptor limit, and attacks it from outside as an attacker or a
// careless operator would. Every test shows one hardened behaviour holding
// on the shipped binary (docs/operations.md, "Limits and hardening").
//
// The helpers live in harness_test.go: startBroker, startAgent,
// startAgentOn and startDemo start a process and return its endpoints
// (address, a healthy request, its client); startFlood floods a listener
// with raw TCP connections; measure and measureAll time healthy clients;
// testpoll.UntilNil polls a real condition. broker.caller (api_test.go) is an
// mTLS identity issued from the broker's CA, startFederation
// (agents_test.go) a broker with a provider and a consumer agent, login
// and startGuessFlood (agents_test.go, login_test.go) a console session
// and a wrong-token flood. An attack on another weakness is one more small
// *_test.go file built on them; docs/testing.md lists them.
//
// The package has no non-test code. It builds the binary once per test run
// (deploy/testbin), or attacks the one FA_ATTACKTEST_BINARY names (a
// release, or a build from before a fix), and needs Linux, loopback
// addresses beyond 127.0.0.1 (all of 127.0.0.0/8 is local on Linux) and
// util-linux's prlimit.
package attacktest
