package gateway

import (
	"context"
	"errors"
	"testing"
)

// TestFetchCtx: the fetch context is a context.Context whose cancel keeps
// its first cause, closes Done (made before or after), runs registered
// functions once and not those stopped in time; context.AfterFunc and
// context.Cause work on it like on any context.
func TestFetchCtx(t *testing.T) {
	var c fetchCtx
	early := c.Done()
	if c.Err() != nil || c.Cause() != nil {
		t.Fatal("cancelled before cancel")
	}
	ran := 0
	c.AfterFunc(func() { ran++ })
	stop := c.AfterFunc(func() { t.Error("a stopped function ran") })
	if !stop() || stop() {
		t.Fatal("stop: want true once, then false")
	}
	viaContext := make(chan struct{})
	context.AfterFunc(&c, func() { close(viaContext) })

	c.cancel(errFenced)
	c.cancel(errClientGone)
	select {
	case <-early:
	default:
		t.Fatal("Done not closed")
	}
	<-c.Done()
	<-viaContext
	if ran != 1 || !errors.Is(c.Cause(), errFenced) || !errors.Is(c.Err(), context.Canceled) || !errors.Is(context.Cause(&c), context.Canceled) {
		t.Fatalf("ran %d, cause %v, err %v", ran, c.Cause(), c.Err())
	}
	late := make(chan struct{})
	if stop := c.AfterFunc(func() { close(late) }); stop() {
		t.Fatal("stop after cancel reported true")
	}
	<-late
}
