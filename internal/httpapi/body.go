package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
)

var errEOF = io.EOF

// heldBody is a request's body once wrap read it whole: handlers may
// decode the bytes themselves (decodePush).
type heldBody struct {
	*bytes.Reader
	b []byte
}

func (*heldBody) Close() error { return nil }

// bodyBytes is the request's body as wrap read it (nil when it was not).
func bodyBytes(r *http.Request) ([]byte, bool) {
	rb, ok := r.Body.(*heldBody)
	if !ok {
		return nil, false
	}
	return rb.b, true
}

// decodeBody reads the JSON body into v: 400 {"error":"bad body: ..."}
// when it does not parse. An empty body is allowed when optional. (The
// body limit, budget and text checks ran in wrap, which read the body.)
func decodeBody(r *http.Request, v any, optional bool) error {
	dec := json.NewDecoder(r.Body)
	if err := dec.Decode(v); err != nil {
		if optional && errors.Is(err, errEOF) {
			return nil
		}
		return badRequest("bad body: " + err.Error())
	}
	if dec.More() {
		return badRequest("bad body: trailing data after the JSON value")
	}
	return nil
}
