package fakeclock

import (
	"testing"
	"time"
)

func TestClock(t *testing.T) {
	start := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	c := At(start)
	c.Advance(time.Second)
	if got, again := c.Now(), c.Now(); !got.Equal(start.Add(time.Second)) || !again.Equal(got) {
		t.Errorf("At(start) advanced 1s reads %v then %v; want %v twice", got, again, start.Add(time.Second))
	}
	s := Stepping(start, time.Millisecond)
	if a, b := s.Now(), s.Now(); !a.Equal(start) || b.Sub(a) != time.Millisecond {
		t.Errorf("Stepping reads %v then %v; want %v, then a millisecond later", a, b, start)
	}
}
