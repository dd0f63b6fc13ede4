// Package storetest holds what the tests of the store packages share: one time base derived
// from the test clock (BaseTime), the flows of the shared captures and synthetic ones, the
// demo traffic of the benchmarks, and checks against the embedded engine. Only tests import
// it.
package storetest
