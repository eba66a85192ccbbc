// Package natstest starts in-process NATS servers for tests: a JetStream
// cluster on loopback, as several loopd share in production.
package natstest

import (
	"fmt"
	"net"
	"net/url"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("natstest: free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// Cluster starts n NATS servers with JetStream clustered on loopback, in
// process, waits for a JetStream meta leader, and returns the client URLs.
// The servers stop at the end of the test.
func Cluster(t testing.TB, n int) []string {
	t.Helper()
	cports, rports := make([]int, n), make([]int, n)
	for i := range n {
		cports[i], rports[i] = freePort(t), freePort(t)
	}
	var routes []*url.URL
	for i := range n {
		u, _ := url.Parse(fmt.Sprintf("nats://127.0.0.1:%d", rports[i]))
		routes = append(routes, u)
	}
	var urls []string
	var servers []*server.Server
	t.Cleanup(func() {
		for _, s := range servers {
			s.Shutdown()
			s.WaitForShutdown()
		}
	})
	for i := range n {
		s, err := server.NewServer(&server.Options{
			ServerName: fmt.Sprintf("n%d", i), Host: "127.0.0.1", Port: cports[i],
			JetStream: true, StoreDir: t.TempDir(), NoLog: true, NoSigs: true,
			MaxPayload: 8 << 20, // as examples/cluster recommends (loopd embeds with the same)
			Cluster:    server.ClusterOpts{Name: "theloop", Host: "127.0.0.1", Port: rports[i]},
			Routes:     routes,
		})
		if err != nil {
			t.Fatalf("natstest: server %d: %v", i, err)
		}
		s.Start()
		servers = append(servers, s)
		urls = append(urls, s.ClientURL())
	}
	for i, s := range servers {
		if !s.ReadyForConnections(30 * time.Second) {
			t.Fatalf("natstest: server %d not ready in 30s", i)
		}
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		for _, s := range servers {
			if s.JetStreamIsLeader() {
				return urls
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("natstest: no JetStream meta leader in 60s")
		}
		time.Sleep(100 * time.Millisecond)
	}
}
