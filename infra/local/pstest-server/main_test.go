package main

import (
	"context"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"cloud.google.com/go/pubsub/v2/pstest"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/durationpb"
)

// pstest alone drops a message nobody pulled 10 minutes after its publishing, whatever the
// subscription's retention. Behind keepForRetention it is kept for the retention (7 days when
// none is named), and its ack deadline still means what it says. pstest's own clock drives it.
func TestAnUnpulledMessageIsKeptForTheSubscriptionsRetention(t *testing.T) {
	fake := pstest.NewServer()
	defer fake.Close()
	var mu sync.Mutex
	now := time.Now()
	fake.SetTimeNowFunc(func() time.Time { mu.Lock(); defer mu.Unlock(); return now })
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }

	g, ctx := &fake.GServer, context.Background()
	topic := "projects/p/topics/t"
	if _, err := g.CreateTopic(ctx, &pubsubpb.Topic{Name: topic}); err != nil {
		t.Fatal(err)
	}
	create := keepForRetention(g)
	info := &grpc.UnaryServerInfo{FullMethod: pubsubpb.Subscriber_CreateSubscription_FullMethodName}
	handler := func(ctx context.Context, req any) (any, error) {
		return g.CreateSubscription(ctx, req.(*pubsubpb.Subscription))
	}
	week, hour := "projects/p/subscriptions/week", "projects/p/subscriptions/hour"
	for _, sub := range []*pubsubpb.Subscription{
		{Name: week, Topic: topic, AckDeadlineSeconds: 10},
		{Name: hour, Topic: topic, AckDeadlineSeconds: 10, MessageRetentionDuration: durationpb.New(time.Hour)},
	} {
		if _, err := create(ctx, sub, info, handler); err != nil {
			t.Fatal(err)
		}
	}
	message := &pubsubpb.PubsubMessage{Data: []byte("left unpulled")}
	if _, err := g.Publish(ctx, &pubsubpb.PublishRequest{Topic: topic, Messages: []*pubsubpb.PubsubMessage{message}}); err != nil {
		t.Fatal(err)
	}
	pulled := func(sub string) int {
		req := &pubsubpb.PullRequest{Subscription: sub, MaxMessages: 10, ReturnImmediately: true}
		resp, err := g.Pull(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		return len(resp.ReceivedMessages)
	}

	advance(pstestDropsAfter + time.Minute)
	if n, m := pulled(week), pulled(hour); n != 1 || m != 1 {
		t.Fatalf("unpulled for 11 minutes: %d and %d delivered, want 1 each", n, m)
	}
	if n := pulled(week); n != 0 {
		t.Fatalf("out for delivery within its ack deadline, delivered again (%d)", n)
	}
	advance(11 * time.Second) // past the 10 s ack deadline, not acked
	if n := pulled(week); n != 1 {
		t.Fatalf("not acked by its deadline: %d delivered again, want 1", n)
	}
	advance(time.Hour)
	if n, m := pulled(week), pulled(hour); n != 1 || m != 0 {
		t.Fatalf("an hour later: %d (7-day retention) and %d (1-hour) delivered, want 1 and 0", n, m)
	}
}
