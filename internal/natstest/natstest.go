// Package natstest starts in-process NATS servers for tests: a JetStream
// cluster on loopback, as several loopd share in production.
//
// A JetStream cluster needs every server's route port before any starts,
// so the ports are picked by binding :0 and closing. go test runs packages
// in parallel, and another process can take such a port before the server
// binds it; the server then never becomes ready (CI once saw "server 2 not
// ready in 30s"). Cluster therefore checks each listener and, when one did
// not come up, stops the attempt and starts again on fresh ports.
package natstest

import (
	"fmt"
	"net"
	"net/url"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// attempts is how many sets of ports Cluster tries before it fails the test.
const attempts = 5

// freePort picks a port the kernel says is free now (a variable so the
// test can hand out a taken one).
var freePort = func() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Cluster starts n NATS servers with JetStream clustered on loopback, in
// process, waits for a JetStream meta leader, and returns the client URLs.
// The servers stop at the end of the test.
func Cluster(t testing.TB, n int) []string {
	t.Helper()
	return ClusterWith(t, n, nil)
}

// ClusterWith is Cluster with each server's options edited by configure
// (i is the server's index) before it starts: authentication, TLS on the
// client port and the routes. A server that requires TLS on its routes
// dials them with TLS too (its Cluster.TLSConfig).
func ClusterWith(t testing.TB, n int, configure func(i int, o *server.Options)) []string {
	t.Helper()
	var lastErr error
	for range attempts {
		servers, urls, err := start(t, n, configure)
		t.Cleanup(func() {
			for _, s := range servers {
				s.Shutdown()
				s.WaitForShutdown()
			}
		})
		if err == nil {
			return urls
		}
		for _, s := range servers {
			s.Shutdown()
			s.WaitForShutdown()
		}
		lastErr = err
		t.Logf("natstest: %v; retrying on fresh ports", err)
	}
	t.Fatalf("natstest: no cluster of %d after %d attempts: %v", n, attempts, lastErr)
	return nil
}

// start is one attempt: pick ports, start the servers, wait for listeners,
// full routes and a JetStream meta leader. It returns what it started, even
// on error, for the caller to stop.
func start(t testing.TB, n int, configure func(int, *server.Options)) ([]*server.Server, []string, error) {
	cports, rports := make([]int, n), make([]int, n)
	for i := range n {
		var err error
		if cports[i], err = freePort(); err != nil {
			return nil, nil, fmt.Errorf("free port: %w", err)
		}
		if rports[i], err = freePort(); err != nil {
			return nil, nil, fmt.Errorf("free port: %w", err)
		}
	}
	var routes []*url.URL
	for i := range n {
		u, _ := url.Parse(fmt.Sprintf("nats://127.0.0.1:%d", rports[i]))
		routes = append(routes, u)
	}
	var servers []*server.Server
	for i := range n {
		o := &server.Options{
			ServerName: fmt.Sprintf("n%d", i), Host: "127.0.0.1", Port: cports[i],
			JetStream: true, StoreDir: t.TempDir(), NoLog: true, NoSigs: true,
			MaxPayload: 8 << 20, // as examples/cluster recommends (loopd embeds with the same)
			Cluster:    server.ClusterOpts{Name: "theloop", Host: "127.0.0.1", Port: rports[i]},
			Routes:     routes,
		}
		if configure != nil {
			configure(i, o)
		}
		s, err := server.NewServer(o)
		if err != nil {
			return servers, nil, fmt.Errorf("server %d: %w", i, err)
		}
		s.Start()
		servers = append(servers, s)
	}
	var urls []string
	for i, s := range servers {
		// A port taken by someone else shows in well under a second; a
		// loaded 2-core machine still binds loopback listeners in that time.
		if !s.ReadyForConnections(10 * time.Second) {
			return servers, nil, fmt.Errorf("server %d (client port %d, route port %d) not ready in 10s", i, cports[i], rports[i])
		}
		urls = append(urls, s.ClientURL())
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		for _, s := range servers {
			if s.JetStreamIsLeader() {
				return servers, urls, nil
			}
		}
		if time.Now().After(deadline) {
			return servers, nil, fmt.Errorf("no JetStream meta leader in 60s")
		}
		time.Sleep(100 * time.Millisecond)
	}
}
