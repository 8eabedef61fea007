package kafkacodes

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// TestErrorResponseOfEveryKeyRoundTrips: for every key of the table, at
// its lowest and highest stable version, a request with a topic, a
// partition and an id goes through ReadRequest, ErrorResponse and
// AppendResponse, and the answer decodes at its version, in a frame of
// the right size.
func TestErrorResponseOfEveryKeyRoundTrips(t *testing.T) {
	formatter := kmsg.NewRequestFormatter(kmsg.FormatterClientID("test"))
	for key, codes := range Codes {
		hi, ok := kversion.Stable().LookupMaxKeyVersion(key.Int16())
		if !ok {
			t.Fatalf("%s: not in kversion.Stable", key.Name())
		}
		for _, version := range []int16{hi, max(hi-3, 0)} {
			req := fill(kmsg.RequestForKey(key.Int16()), version)
			frame := formatter.AppendRequest(nil, req, 42)
			got, corr, err := ReadRequest(frame)
			if err != nil || corr != 42 || got.Key() != key.Int16() || got.GetVersion() != version {
				t.Fatalf("%s v%d: ReadRequest = %v, %d, %v", key.Name(), version, got, corr, err)
			}
			code := codes[len(codes)-1].Code
			resp, err := ErrorResponse(got, code)
			if err != nil {
				t.Fatalf("%s v%d: %v", key.Name(), version, err)
			}
			out := AppendResponse(nil, 42, resp)
			body := out[8:]
			if resp.IsFlexible() && key != kmsg.ApiVersions {
				body = body[1:]
			}
			back := req.ResponseKind()
			back.SetVersion(version)
			if err := back.ReadFrom(body); err != nil {
				t.Fatalf("%s v%d: the answer does not decode: %v", key.Name(), version, err)
			}
			if n := int(out[0])<<24 | int(out[1])<<16 | int(out[2])<<8 | int(out[3]); n != len(out)-4 {
				t.Fatalf("%s v%d: frame size %d, want %d", key.Name(), version, n, len(out)-4)
			}
		}
	}
	if _, err := ErrorResponse(kmsg.NewPtrHeartbeatRequest(), 1); err == nil {
		t.Fatal("ErrorResponse of a Heartbeat: no error; want one naming the key")
	}
}

// fill gives a request of the table a topic, a partition and an id.
func fill(req kmsg.Request, version int16) kmsg.Request {
	req.SetVersion(version)
	switch r := req.(type) {
	case *kmsg.ProduceRequest:
		t := kmsg.NewProduceRequestTopic()
		t.Topic = "t"
		p := kmsg.NewProduceRequestTopicPartition()
		t.Partitions = append(t.Partitions, p)
		r.Topics = append(r.Topics, t)
	case *kmsg.FetchRequest:
		t := kmsg.NewFetchRequestTopic()
		t.Topic = "t"
		t.Partitions = append(t.Partitions, kmsg.NewFetchRequestTopicPartition())
		r.Topics = append(r.Topics, t)
	case *kmsg.ListOffsetsRequest:
		t := kmsg.NewListOffsetsRequestTopic()
		t.Topic = "t"
		t.Partitions = append(t.Partitions, kmsg.NewListOffsetsRequestTopicPartition())
		r.Topics = append(r.Topics, t)
	case *kmsg.MetadataRequest:
		t := kmsg.NewMetadataRequestTopic()
		t.Topic = kmsg.StringPtr("t")
		r.Topics = append(r.Topics, t)
	case *kmsg.FindCoordinatorRequest:
		r.CoordinatorKey, r.CoordinatorKeys, r.CoordinatorType = "role", []string{"role"}, 1
	case *kmsg.AddPartitionsToTxnRequest:
		r.TransactionalID = "role"
		t := kmsg.NewAddPartitionsToTxnRequestTopic()
		t.Topic, t.Partitions = "t", []int32{0}
		r.Topics = append(r.Topics, t)
		txn := kmsg.NewAddPartitionsToTxnRequestTransaction()
		txn.TransactionalID = "role"
		tt := kmsg.NewAddPartitionsToTxnRequestTransactionTopic()
		tt.Topic, tt.Partitions = "t", []int32{0}
		txn.Topics = append(txn.Topics, tt)
		r.Transactions = append(r.Transactions, txn)
	case *kmsg.EndTxnRequest:
		r.TransactionalID = "role"
	case *kmsg.InitProducerIDRequest:
		r.TransactionalID = kmsg.StringPtr("role")
	case *kmsg.CreateTopicsRequest:
		t := kmsg.NewCreateTopicsRequestTopic()
		t.Topic = "t"
		r.Topics = append(r.Topics, t)
	case *kmsg.DescribeConfigsRequest:
		res := kmsg.NewDescribeConfigsRequestResource()
		res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeTopic, "t"
		r.Resources = append(r.Resources, res)
	case *kmsg.DescribeTransactionsRequest:
		r.TransactionalIDs = []string{"role"}
	}
	return req
}
