// Package testutil holds the helpers tests share: one clock every test derives its times
// from (Clock, Now), waiting on a condition instead of sleeping (WaitUntil), and the thread
// CPU timer benchmarks report beside wall time (StartCPU).
package testutil
