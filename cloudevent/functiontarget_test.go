package cloudevent_test

import (
	"net/http"
	"testing"
)

// TestQuickstartNeedsFunctionTarget holds the README's warning about running
// the functions quickstart locally. The framework TestMain starts has no
// FUNCTION_TARGET, as a local main run without it; it serves the
// quickstart's OnOrder (registered in example_function_test.go's init) at
// /OnOrder, and an event sent to "/" gets 404.
func TestQuickstartNeedsFunctionTarget(t *testing.T) {
	msg := message{id: "target-1", data: "{}", attrs: map[string]string{"order_id": "o-target"}}
	expect(t, binaryRequest(frameworkURL, msg), http.StatusNotFound, `an event sent to "/" without FUNCTION_TARGET`)
	r := binaryRequest(frameworkURL, msg)
	r.URL.Path = "/OnOrder"
	expect(t, r, http.StatusOK, "an event sent to /OnOrder without FUNCTION_TARGET")
}
