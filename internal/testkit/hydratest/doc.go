// Package hydratest holds the test of buyers' tokens issued by a real
// OpenID Connect provider: ORY Hydra, which scripts/hydra.sh builds from
// the Go module proxy and starts. The service finds the provider's keys by
// discovery (SECKILL_BUYER_ISSUER), buyers get tokens from it by the
// client-credentials grant, and the provider rotates its signing key while
// the service runs. Without SECKILL_TEST_HYDRA_ISSUER the test is skipped:
// run make test-hydra. It has no code of its own outside its tests.
package hydratest
