package store

import (
	"errors"
	"fmt"
)

// ErrNotWon is wrapped by the errors of Complete, Release, Extend and
// CompleteTx, in every store of this module, for a claim whose Status is
// not Won: its fence may be another holder's, so it proves no ownership.
// The store touches nothing.
var ErrNotWon = errors.New("store: the claim was not won")

// CheckWon returns an error wrapping ErrNotWon unless c.Status is Won.
// Stores call it first in Complete, Release, Extend and CompleteTx.
func CheckWon(c Claim) error {
	if c.Status != Won {
		return notWon(c.Status)
	}
	return nil
}

// notWon is kept out of CheckWon so that CheckWon stays small enough to
// inline.
func notWon(s Status) error {
	return fmt.Errorf("%w: its status is %v", ErrNotWon, s)
}
