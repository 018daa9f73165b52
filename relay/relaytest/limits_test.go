package relaytest

import "testing"

// TestLimitsOnModel runs the cases with a Pub/Sub fake of their own on the
// correct model source.
func TestLimitsOnModel(t *testing.T) {
	for _, c := range limitCases {
		t.Run(c.name, func(t *testing.T) { c.run(t, modelEnv(t, bugs{})) })
	}
}
