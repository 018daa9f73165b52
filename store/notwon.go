package store

import (
	"errors"
	"fmt"
)

// ErrNotWon is returned (wrapped) by Complete, Release and Extend, and by
// the CompleteTx methods, of every store in this module when the claim
// passed in is not a won one (its Status is not Won). Such a claim proves
// no ownership: an AlreadyDone or HeldByOther claim carries the fence the
// record has, which may be another holder's, so acting on it could
// complete or release somebody else's claim. The store refuses it without
// reading or writing the record.
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
