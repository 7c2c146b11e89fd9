// Command pstest-server serves Google's in-memory Pub/Sub fake (pstest) on a TCP port so that
// processes other than the one that created it (Python clients, fake-gcs-server) can use it as a
// Pub/Sub emulator via PUBSUB_EMULATOR_HOST.
//
// Why not pstest.NewServerWithPort: pstest builds its gRPC server without options, so it keeps
// gRPC's 4 MiB default message limit. Real Pub/Sub accepts 10 MB messages, so we serve pstest's
// service implementation from our own grpc.Server with the limits raised.
package main

import (
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"os/signal"
	"syscall"

	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"cloud.google.com/go/pubsub/v2/pstest"
	"google.golang.org/grpc"
)

// maxMessageBytes is real Pub/Sub's request limit (10 MB) plus headroom for the request envelope.
const maxMessageBytes = 10*1024*1024 + 64*1024

func main() {
	host := flag.String("host", "127.0.0.1", "address to bind to")
	port := flag.Int("port", 8085, "port to serve the Pub/Sub gRPC API on")
	maxBytes := flag.Int("max-message-bytes", maxMessageBytes, "gRPC max send/receive message size")
	flag.Parse()

	// pstest starts its own (4 MiB) server on an ephemeral loopback port. We close that server
	// right away (no subscriptions exist yet, so Close only stops its listener) and keep its
	// service implementation, which is fully initialised and independent of the listener.
	fake := pstest.NewServerWithAddress("127.0.0.1:0")
	if err := fake.Close(); err != nil {
		log.Fatalf("closing pstest's internal server: %v", err)
	}

	lis, err := net.Listen("tcp", net.JoinHostPort(*host, fmt.Sprint(*port)))
	if err != nil {
		log.Fatalf("listen on %s:%d: %v", *host, *port, err)
	}
	srv := grpc.NewServer(grpc.MaxRecvMsgSize(*maxBytes), grpc.MaxSendMsgSize(*maxBytes))
	pubsubpb.RegisterPublisherServer(srv, &fake.GServer)
	pubsubpb.RegisterSubscriberServer(srv, &fake.GServer)
	pubsubpb.RegisterSchemaServiceServer(srv, &fake.GServer)

	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		s := <-sigs
		log.Printf("pstest-server: %v, stopping", s)
		srv.Stop()
	}()

	log.Printf("pstest-server: serving Pub/Sub fake on %s (max message %d bytes)", lis.Addr(), *maxBytes)
	if err := srv.Serve(lis); err != nil {
		log.Fatalf("serve: %v", err)
	}
}
