package storeurl

import (
	"cmp"
	"context"
	"fmt"
	"net/url"
	"os"
	"slices"
	"strings"

	"cloud.google.com/go/datastore"

	"github.com/idemgate/idemgate/store/datastorestore"
)

// openDatastore opens datastore://[project][?database=…&namespace=…&kind=…].
func openDatastore(ctx context.Context, rawURL string) (*Opened, error) {
	project, q, err := googleURL(rawURL, "database", "namespace", "kind")
	if err != nil {
		return nil, badURL(err)
	}
	client, err := datastore.NewClientWithDatabase(ctx, cmp.Or(project, datastore.DetectProjectID), q["database"])
	if err != nil {
		return nil, err
	}
	st, err := datastorestore.New(client, &datastorestore.Options{Kind: q["kind"], Namespace: q["namespace"]})
	if err != nil {
		client.Close()
		return nil, badURL(err) // New does no I/O: its parameters are the URL's
	}
	kind := cmp.Or(q["kind"], "IdemgateRecord") // datastorestore's default
	records := orDefault("kind "+kind, q["kind"] != "") + ", " + orDefault(fmt.Sprintf("namespace %q", q["namespace"]), q["namespace"] != "")
	return &Opened{Store: st, close: client.Close, Addr: googleAddr("datastore", project, q["database"], "DATASTORE_EMULATOR_HOST"), Records: records}, nil
}

// googleAddr names a Google store's project, database and emulator.
func googleAddr(scheme, project, database, emulator string) string {
	a := scheme + "://" + cmp.Or(project, "(project from the credentials)")
	if database != "" {
		a += "?database=" + database
	}
	if host := os.Getenv(emulator); host != "" {
		a += " (emulator at " + host + ")"
	}
	return a
}

// googleURL splits scheme://project?param=… into the project and the
// parameters, each among known and given once.
func googleURL(rawURL string, known ...string) (project string, params map[string]string, err error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "", nil, err
	}
	if u.User != nil || u.Port() != "" || (u.Path != "" && u.Path != "/") || u.Fragment != "" {
		return "", nil, fmt.Errorf("%q: want %s://project?param=value…, with nothing but the project before the query", u.Redacted(), u.Scheme)
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return "", nil, err
	}
	params = make(map[string]string, len(q))
	for name, vs := range q {
		if err := misspelled([]string{name}, known...); err != nil {
			return "", nil, err
		}
		if !slices.Contains(known, name) {
			return "", nil, fmt.Errorf("unknown parameter %q (known: %s)", name, strings.Join(known, ", "))
		}
		if len(vs) != 1 {
			return "", nil, fmt.Errorf("parameter %q given %d times", name, len(vs))
		}
		params[name] = vs[0]
	}
	return u.Hostname(), params, nil
}
