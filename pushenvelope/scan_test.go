package pushenvelope

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// TestScanWireTakesPubSubBodies pins which bodies take the fast path: the
// ones Pub/Sub writes do, and what they decode to is what encoding/json
// decodes.
func TestScanWireTakesPubSubBodies(t *testing.T) {
	for _, body := range []string{
		`{"message":{"data":"aGk=","messageId":"1","message_id":"1","publishTime":"2025-01-02T03:04:05.678Z","publish_time":"2025-01-02T03:04:05.678Z","attributes":{"a":"b","ünï":"cødé"}},"subscription":"projects/p/subscriptions/s"}`,
		`{"message":{"attributes":{"k":"v"},"messageId":"2","publishTime":"2025-01-02T03:04:05Z"},"subscription":"projects/p/subscriptions/s","deliveryAttempt":12}`,
		"{\n  \"message\": {\n    \"data\": \"\",\n    \"orderingKey\": \"o\",\n    \"ordering_key\": \"o\"\n  },\n  \"delivery_attempt\": 0\n}\n",
		`{"message":{}}`,
		`{"message":{"attributes":{}},"subscription":""}`,
		`{"message":{"attributes":{"note":"paid in full"},"messageId":"3"}}`,
		`{"message":{},"deliveryAttempt":123456789}`, // nine digits, the most it reads
	} {
		w, ok := scanned([]byte(body))
		if !ok {
			t.Errorf("scanWire refused a body as Pub/Sub writes it:\n%s", body)
			continue
		}
		sameAsJSON(t, []byte(body), w)
	}
}

// TestScanWireLeavesTheRestToJSON lists bodies the fast path must hand to
// encoding/json: valid JSON it does not read the same way, and invalid
// JSON whose error encoding/json explains.
func TestScanWireLeavesTheRestToJSON(t *testing.T) {
	for _, body := range []string{
		`{"message":{"messageId":"a\/b"}}`,                 // an escape
		`{"message":{"messageId":"1","extra":1}}`,          // an unknown key
		`{"message":{"messageId":"1"},"futureField":true}`, // one at the top
		`{"message":{"MessageId":"1"}}`,                    // a key in another case
		`{"message":{"messageId":"1","messageId":"2"}}`,    // a repeated key
		`{"message":{"attributes":{"a":"1","a":"2"}}}`,     // a repeated attribute
		`{"message":{"messageId":"1"},"message":{}}`,       // a repeated message
		`{"message":null}`,                                 // null
		`{"message":{"messageId":null}}`,                   // null
		`{"subscription":"s"}`,                             // no message
		`{"message":{},"deliveryAttempt":-1}`,              // negative
		`{"message":{},"deliveryAttempt":1.0}`,             // not an integer
		`{"message":{},"deliveryAttempt":1e2}`,             // not an integer
		`{"message":{},"deliveryAttempt":01}`,              // not JSON
		`{"message":{},"deliveryAttempt":1234567890}`,      // ten digits
		`{"message":{"data":"not base64!"}}`,               // bad base64
		"{\"message\":{\"messageId\":\"\xff\"}}",           // not UTF-8
		"{\"message\":{\"messageId\":\"a\tb\"}}",           // a raw control byte
		`{"message":{}} x`,                                 // trailing bytes
		`{"message":{},}`,                                  // trailing comma
		`{"message":{"messageId":"1"}`,                     // truncated
		`{"message":{},"deliveryAttempt":12`,               // truncated in a number
		`[{"message":{}}]`,                                 // not an object
		"\ufeff{\"message\":{}}",                           // a byte-order mark
		`{"message":{"attributes":{"a":1}}}`,               // not a string
	} {
		if _, ok := scanned([]byte(body)); ok {
			t.Errorf("scanWire took a body it must leave to encoding/json:\n%s", body)
		}
	}
}

// FuzzScanWire compares the fast path with encoding/json: whenever
// scanWire takes a body, encoding/json must decode it to the same values.
func FuzzScanWire(f *testing.F) {
	files, err := filepath.Glob(filepath.Join("..", "testdata", "push", "*.http"))
	if err != nil || len(files) == 0 {
		f.Fatalf("no fixtures: %v", err)
	}
	for _, name := range files {
		raw, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		if _, body, ok := bytes.Cut(raw, []byte("\n\n")); ok && strings.Contains(name, "wrapped") {
			f.Add(body)
			if json.Valid(body) {
				f.Add(compact(f, body))
			}
		}
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if w, ok := scanned(body); ok {
			sameAsJSON(t, body, w)
		}
	})
}

// scanned runs the fast path on a fresh wirePush.
func scanned(body []byte) (wirePush, bool) {
	var w wirePush
	ok := scanWire(body, &w)
	return w, ok
}

// sameAsJSON fails unless encoding/json decodes body to w.
func sameAsJSON(t *testing.T, body []byte, w wirePush) {
	t.Helper()
	var want wirePush
	if err := json.Unmarshal(body, &want); err != nil {
		t.Fatalf("scanWire took %q, which encoding/json refuses: %v", body, err)
	}
	if !reflect.DeepEqual(w, want) {
		t.Fatalf("scanWire and encoding/json disagree on %q:\nscanWire: %+v %+v\njson:     %+v %+v", body, w, w.Message, want, want.Message)
	}
}

// compact returns body without insignificant white space.
func compact(tb testing.TB, body []byte) []byte {
	var b bytes.Buffer
	if err := json.Compact(&b, body); err != nil {
		tb.Fatal(err)
	}
	return b.Bytes()
}
