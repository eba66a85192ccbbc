package natstest

import (
	"net"
	"testing"

	"github.com/nats-io/nats.go"
)

// TestClusterRetriesWhenAPortIsTaken: the first route port handed out is
// held by another listener (as another test package may take it between
// pick and bind); Cluster starts again on fresh ports and the cluster
// serves JetStream.
func TestClusterRetriesWhenAPortIsTaken(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-server NATS cluster")
	}
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	real := freePort
	calls := 0
	freePort = func() (int, error) {
		calls++
		if calls == 2 { // server 0's route port
			return held.Addr().(*net.TCPAddr).Port, nil
		}
		return real()
	}
	defer func() { freePort = real }()

	urls := Cluster(t, 3)
	if calls <= 6 {
		t.Fatalf("Cluster picked %d ports: it did not start again after the taken port", calls)
	}
	nc, err := nats.Connect(urls[1])
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := nc.JetStream()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.AddStream(&nats.StreamConfig{Name: "probe", Subjects: []string{"probe"}, Replicas: 3}); err != nil {
		t.Fatalf("a replicated stream on the retried cluster: %v", err)
	}
	if _, err := js.Publish("probe", []byte("x")); err != nil {
		t.Fatal(err)
	}
}
