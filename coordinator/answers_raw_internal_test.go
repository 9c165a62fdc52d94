package coordinator

import (
	"bufio"
	"bytes"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/capgate/capgate/internal/answerheld"
)

// A large answer set uncopied (SetBodyRaw, as the shared /openapi.json)
// and counted is sent whole, and its bytes come back once written: SwapBody
// takes the response's buffer, not a raw body, so such an answer went out
// empty and its count was held for ever.
func TestCountedRawAnswerIsSentAndGivenBack(t *testing.T) {
	c := &Coordinator{answers: answerheld.New(1<<20, 1<<20)}
	answer := bytes.Repeat([]byte("x"), 2*answerheld.Min)
	var ctx fasthttp.RequestCtx
	ctx.Response.SetBodyRaw(answer)
	c.answers.Force("t", int64(len(ctx.Response.Body())))
	c.streamAnswer(&ctx, "t")
	var out bytes.Buffer
	w := bufio.NewWriter(&out)
	if err := ctx.Response.Write(w); err != nil || w.Flush() != nil {
		t.Fatal(err)
	}
	var sent fasthttp.Response
	if err := sent.Read(bufio.NewReader(&out)); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(sent.Body(), answer) {
		t.Fatalf("sent %d bytes, want the answer's %d", len(sent.Body()), len(answer))
	}
	if held := c.answers.Held(); held != 0 {
		t.Fatalf("%d bytes still held after the answer was written", held)
	}
}
