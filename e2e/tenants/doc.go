// Package tenants holds the attacks of one authenticated tenant on
// another (issue #10), each written as a test against a real deployment:
// kfake, a coordinator with its badger store, and gateways, all on
// loopback, talking real HTTP (e2e/sdk's StartCluster). Each test is the
// attack as an outsider would run it; it failed on the code before the
// fix it guards.
package tenants
