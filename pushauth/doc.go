// Package pushauth verifies that a push request comes from your Pub/Sub
// subscription: a [Verifier] checks the OIDC token Pub/Sub sends (Google's
// signature, expiry, issuer, audience and service account), and its
// [Verifier.Middleware] goes in front of the gateway, so rejected requests
// never reach the store:
//
//	v, err := pushauth.New(&pushauth.Options{
//		Audience:            "https://orders-abc123-ew.a.run.app/",
//		ServiceAccountEmail: "pubsub-push@my-project.iam.gserviceaccount.com",
//	})
//	if err != nil {
//		log.Fatal(err)
//	}
//	http.Handle("POST /", v.Middleware(g.Idempotent(orders)))
//
// docs/security.md says when Cloud Run already checks the token and how to
// deploy with this package.
package pushauth
