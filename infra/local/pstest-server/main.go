// Command pstest-server serves Google's in-memory Pub/Sub fake (pstest) on a TCP port so that
// processes other than the one that created it (Python clients, fake-gcs-server) can use it as a
// Pub/Sub emulator via PUBSUB_EMULATOR_HOST.
//
// Why not pstest.NewServerWithPort: pstest builds its gRPC server without options, so it keeps
// gRPC's 4 MiB default message limit. Real Pub/Sub accepts 10 MB messages, so we serve pstest's
// service implementation from our own grpc.Server with the limits raised.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"os/signal"
	"reflect"
	"runtime/debug"
	"sync"
	"syscall"
	"time"
	"unsafe"

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
	keep := flag.Duration("keep-published", 10*time.Minute,
		"forget the record of messages published longer ago than this (0: keep every one)")
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
	srv := grpc.NewServer(grpc.MaxRecvMsgSize(*maxBytes), grpc.MaxSendMsgSize(*maxBytes),
		grpc.UnaryInterceptor(keepForRetention(&fake.GServer)))
	pubsubpb.RegisterPublisherServer(srv, &fake.GServer)
	pubsubpb.RegisterSubscriberServer(srv, &fake.GServer)
	pubsubpb.RegisterSchemaServiceServer(srv, &fake.GServer)

	if *keep > 0 {
		go forgetPublishedEvery(&fake.GServer, *keep)
	}

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

// forgetPublishedEvery drops, every tenth of `age`, pstest's record of the messages published
// more than `age` ago. pstest keeps every message ever published (GServer.msgs and msgsByID,
// for its in-process inspection API and Seek) and never forgets one: ~2.6 KB a message,
// measured, so a long-running emulator grew by about a GB a night of CCDs. A subscription holds
// its own reference to each message it has not had acked, so delivery is unaffected: the record
// serves only pstest's in-process inspection and a Seek to a time, which nothing here uses.
func forgetPublishedEvery(g *pstest.GServer, age time.Duration) {
	interval := max(age/10, 100*time.Millisecond)
	for range time.Tick(interval) {
		n, err := forgetPublished(g, time.Now().Add(-age))
		if err != nil {
			log.Printf("pstest-server: not forgetting published messages: %v", err)
			return
		}
		if n > 0 {
			debug.FreeOSMemory()
		}
	}
}

// forgetPublished removes the messages published before `cut` from pstest's record, under its
// own lock, and returns how many. The fields are unexported (pstest is pinned by go.mod): they
// are reached by reflection, and checked, so a pstest that changed them is left alone.
func forgetPublished(g *pstest.GServer, cut time.Time) (int, error) {
	v := reflect.ValueOf(g).Elem()
	mu, msgs, byID := v.FieldByName("mu"), v.FieldByName("msgs"), v.FieldByName("msgsByID")
	if !mu.IsValid() || mu.Type() != reflect.TypeFor[sync.Mutex]() ||
		!msgs.IsValid() || msgs.Type() != reflect.TypeFor[[]*pstest.Message]() ||
		!byID.IsValid() || byID.Type() != reflect.TypeFor[map[string]*pstest.Message]() {
		return 0, fmt.Errorf("pstest's GServer has no mu, msgs and msgsByID of the expected types")
	}
	lock := (*sync.Mutex)(unsafe.Pointer(mu.UnsafeAddr()))
	published := (*[]*pstest.Message)(unsafe.Pointer(msgs.UnsafeAddr()))
	index := *(*map[string]*pstest.Message)(unsafe.Pointer(byID.UnsafeAddr()))
	lock.Lock()
	defer lock.Unlock()
	n := 0
	for n < len(*published) && (*published)[n].PublishTime.Before(cut) {
		delete(index, (*published)[n].ID)
		n++
	}
	if n > 0 { // a new array: the old one would keep the forgotten messages reachable
		*published = append([]*pstest.Message(nil), (*published)[n:]...)
	}
	return n, nil
}

// pstestDropsAfter is how long after its publishing pstest keeps a subscription's message that is
// not out for delivery, whatever the subscription's retention (fake.go's retentionDuration).
const pstestDropsAfter = 10 * time.Minute

// keepForRetention makes each new subscription keep its messages for its
// message_retention_duration (Pub/Sub's default, 7 days, when it names none), as Pub/Sub does:
// pstest dropped them 10 minutes after publishing, so a subscriber down longer lost its backlog.
// pstest compares the publish time with the subscription's own clock (its timeNowFunc, which
// otherwise only sets and expires ack deadlines), so that clock is set back by the difference.
// A later UpdateSubscription of the retention is not honoured.
func keepForRetention(g *pstest.GServer) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		resp, err := handler(ctx, req)
		sub, ok := resp.(*pubsubpb.Subscription)
		if err == nil && ok && info.FullMethod == pubsubpb.Subscriber_CreateSubscription_FullMethodName {
			back := sub.GetMessageRetentionDuration().AsDuration() - pstestDropsAfter
			if err := setBackClock(g, sub, back); err != nil {
				log.Printf("pstest-server: %s drops what is unpulled after 10 minutes: %v", sub.Name, err)
			}
		}
		return resp, err
	}
}

// setBackClock sets the clock of the subscription pstest made of `sub` `back` behind the
// server's, under pstest's lock, with the ack deadlines of messages out for delivery (a publish
// may have come first), which keep their meaning. The unexported fields are reached by
// reflection, and checked, so a pstest that changed them is left alone.
func setBackClock(g *pstest.GServer, sub *pubsubpb.Subscription, back time.Duration) error {
	v := reflect.ValueOf(g).Elem()
	mu, subs := v.FieldByName("mu"), v.FieldByName("subs")
	if !mu.IsValid() || mu.Type() != reflect.TypeFor[sync.Mutex]() || !subs.IsValid() ||
		subs.Kind() != reflect.Map || subs.Type().Key().Kind() != reflect.String {
		return errors.New("pstest's GServer has no mu and subs of the expected types")
	}
	lock := (*sync.Mutex)(unsafe.Pointer(mu.UnsafeAddr()))
	lock.Lock()
	defer lock.Unlock()
	s := subs.MapIndex(reflect.ValueOf(sub.Name))
	if !s.IsValid() || s.Kind() != reflect.Pointer || s.Elem().Kind() != reflect.Struct {
		return errors.New("no subscription of the expected type under that name")
	}
	s = s.Elem()
	proto, clock, msgs := s.FieldByName("proto"), s.FieldByName("timeNowFunc"), s.FieldByName("msgs")
	if !proto.IsValid() || proto.Type() != reflect.TypeFor[*pubsubpb.Subscription]() ||
		!clock.IsValid() || clock.Type() != reflect.TypeFor[func() time.Time]() ||
		!msgs.IsValid() || msgs.Kind() != reflect.Map || msgs.Type().Elem().Kind() != reflect.Pointer ||
		msgs.Type().Elem().Elem().Kind() != reflect.Struct {
		return errors.New("pstest's subscription has no proto, timeNowFunc and msgs of the expected types")
	}
	field, ok := msgs.Type().Elem().Elem().FieldByName("ackDeadline")
	if !ok || field.Type != reflect.TypeFor[time.Time]() {
		return errors.New("pstest's message has no ackDeadline of the expected type")
	}
	if *(**pubsubpb.Subscription)(unsafe.Pointer(proto.UnsafeAddr())) != sub {
		return errors.New("the subscription was made again meanwhile")
	}
	if back <= 0 {
		return nil
	}
	now := (*func() time.Time)(unsafe.Pointer(clock.UnsafeAddr()))
	server := *now
	*now = func() time.Time { return server().Add(-back) }
	for it := msgs.MapRange(); it.Next(); {
		deadline := (*time.Time)(unsafe.Pointer(it.Value().Elem().FieldByIndex(field.Index).UnsafeAddr()))
		if !deadline.IsZero() {
			*deadline = deadline.Add(-back)
		}
	}
	return nil
}
