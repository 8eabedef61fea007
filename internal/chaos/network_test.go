package chaos

import (
	"bufio"
	"context"
	"testing"
	"time"
)

func TestRoutesRoundTrip(t *testing.T) {
	routes := Routes{"127.0.0.1:19193": "127.0.0.1:40001", "127.0.0.1:19192": "127.0.0.1:40000"}
	text := routes.String()
	if text != "127.0.0.1:19192=127.0.0.1:40000,127.0.0.1:19193=127.0.0.1:40001" {
		t.Fatalf("Routes.String() = %q; want the pairs sorted by broker", text)
	}
	got, err := ParseRoutes(text)
	if err != nil || len(got) != 2 || got["127.0.0.1:19193"] != "127.0.0.1:40001" {
		t.Fatalf("ParseRoutes(%q) = %v, %v; want the routes back", text, got, err)
	}
	// The single-broker form: one proxy for every broker.
	if got, err := ParseRoutes("127.0.0.1:40000"); err != nil || got["*"] != "127.0.0.1:40000" {
		t.Fatalf("ParseRoutes(one proxy) = %v, %v; want the route \"*\"", got, err)
	}
	for _, bad := range []string{"", "a=", "=b", "a=b,a=c"} {
		if _, err := ParseRoutes(bad); err == nil {
			t.Errorf("ParseRoutes(%q) = nil error; want an error", bad)
		}
	}
}

// TestMemberNetworkCutsEveryBroker: a member reaches each broker through
// its own proxy, and a cut of the member cuts it off all of them.
func TestMemberNetworkCutsEveryBroker(t *testing.T) {
	brokers := []string{newFrameBroker(t).addr, newFrameBroker(t).addr, newFrameBroker(t).addr}
	network, err := NewMemberNetwork(brokers)
	if err != nil {
		t.Fatal(err)
	}
	defer network.Close()
	routes := network.Routes()
	if len(routes) != 3 {
		t.Fatalf("Routes() = %v; want one proxy for each of 3 brokers", routes)
	}
	dialAll := func() []error {
		var errs []error
		for _, b := range brokers {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			conn, err := routes.Dial(ctx, "tcp", b)
			cancel()
			if err == nil {
				c := &kafkaClient{conn: conn, r: bufio.NewReader(conn)}
				if _, err = conn.Write(request(metadata, 1, "ping")); err == nil {
					var got string
					_, got, err = c.answer(300 * time.Millisecond)
					if err == nil && got != "ping" {
						t.Fatalf("round trip to %s = %q", b, got)
					}
				}
				conn.Close()
			}
			errs = append(errs, err)
		}
		return errs
	}
	for i, err := range dialAll() {
		if err != nil {
			t.Fatalf("broker %d through its proxy: %v", i, err)
		}
	}
	if _, err := routes.Dial(context.Background(), "tcp", "127.0.0.1:1"); err == nil {
		t.Fatal("Dial(an address with no route) = nil error; want an error, so nothing bypasses the proxies")
	}
	network.Cut(CutStall)
	for i, err := range dialAll() {
		if err == nil {
			t.Errorf("broker %d answered during a cut of the member", i)
		}
	}
	network.Heal()
	for i, err := range dialAll() {
		if err != nil {
			t.Errorf("broker %d after the heal: %v", i, err)
		}
	}
}
