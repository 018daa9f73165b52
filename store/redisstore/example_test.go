package redisstore_test

import (
	"cmp"
	"context"
	"crypto/rand"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/redisstore"
)

func ExampleNew() {
	client := redis.NewClient(&redis.Options{Addr: cmp.Or(os.Getenv("REDIS_ADDR"), "localhost:6379")})
	defer client.Close()

	ctx := context.Background()
	// New checks that Redis never evicts (maxmemory-policy noeviction).
	s, err := redisstore.New(ctx, client, &redisstore.Options{
		Prefix: "example-" + rand.Text() + ":", // a fresh namespace for each run
		TTL:    24 * time.Hour,                 // suppress duplicates for a day
	})
	if err != nil {
		log.Fatal(err)
	}

	c, err := s.Claim(ctx, "order-42", time.Minute, store.ClaimOptions{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(c.Status, c.Fence > 0) // the fence: the server's clock in microseconds
	// … run the side effect while holding the claim, then:
	done, err := s.Complete(ctx, c)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(done)

	dup, err := s.Claim(ctx, "order-42", time.Minute, store.ClaimOptions{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(dup.Status, dup.Fence == c.Fence)
	// Output:
	// won true
	// true
	// already_done true
}
