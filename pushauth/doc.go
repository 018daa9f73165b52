// Package pushauth verifies that a push request comes from your Pub/Sub
// subscription.
//
// A push subscription configured with a service account sends each
// delivery with an OIDC ID token in "Authorization: Bearer", signed by
// Google. A [Verifier] checks it: signature and expiry with
// google.golang.org/api/idtoken, then what idtoken leaves to the caller —
// the issuer, the audience the subscription was configured with, and the
// subscription's service account as the verified email. Its
// [Verifier.Middleware] goes in front of the gateway, so that requests it
// rejects never reach the store:
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
// On Cloud Run with authentication required, the platform already checks
// the token and the invoker role before the request reaches the service;
// this middleware is then defence in depth. It is the only check when the
// service allows unauthenticated access, or when the request comes in
// through a front door that does not check Google tokens. See
// docs/security.md.
package pushauth
