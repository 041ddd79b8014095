// Prints golden vectors for Produce v0-v2 and Fetch v0-v3 (kshard's
// src/protocol/legacy/produce_fetch.rs and protocol/fetch_encoder.rs),
// serialized by Apache Kafka 3.9.1's generated message classes, with magic
// 0/1 message sets built by its MemoryRecords. The samples must match
// src/protocol/legacy/produce_fetch_tests.rs. See README.md.

import java.nio.ByteBuffer;

import org.apache.kafka.common.compress.Compression;
import org.apache.kafka.common.message.FetchRequestData;
import org.apache.kafka.common.message.FetchResponseData;
import org.apache.kafka.common.message.ProduceRequestData;
import org.apache.kafka.common.message.ProduceResponseData;
import org.apache.kafka.common.protocol.ByteBufferAccessor;
import org.apache.kafka.common.protocol.Message;
import org.apache.kafka.common.protocol.ObjectSerializationCache;
import org.apache.kafka.common.record.MemoryRecords;
import org.apache.kafka.common.record.SimpleRecord;
import org.apache.kafka.common.record.TimestampType;

public class OldFormatVectors {
    static byte[] serialize(Message m, short v) {
        ObjectSerializationCache cache = new ObjectSerializationCache();
        ByteBuffer buf = ByteBuffer.allocate(m.size(cache, v));
        m.write(new ByteBufferAccessor(buf), cache, v);
        return buf.array();
    }

    static String hex(byte[] bytes) {
        StringBuilder sb = new StringBuilder();
        for (byte b : bytes) sb.append(String.format("%02x", b));
        return sb.toString();
    }

    static void emit(String name, int v, Message m) {
        System.out.println(name + " " + v + " " + hex(serialize(m, (short) v)));
    }

    // One magic-1 message (offset 0, timestamp 1000, key "k", value "v").
    static MemoryRecords records() {
        return MemoryRecords.withRecords((byte) 1, 0L, Compression.NONE, TimestampType.CREATE_TIME,
            new SimpleRecord(1000L, "k".getBytes(), "v".getBytes()));
    }

    public static void main(String[] args) {
        for (int v = 0; v <= 2; v++) {
            ProduceRequestData r = new ProduceRequestData().setAcks((short) -1).setTimeoutMs(30000);
            ProduceRequestData.TopicProduceData t = new ProduceRequestData.TopicProduceData().setName("foo");
            t.partitionData().add(new ProduceRequestData.PartitionProduceData().setIndex(2).setRecords(records()));
            t.partitionData().add(new ProduceRequestData.PartitionProduceData().setIndex(3).setRecords(null));
            r.topicData().add(t);
            emit("produce_request", v, r);
            ProduceResponseData p = new ProduceResponseData().setThrottleTimeMs(0);
            ProduceResponseData.TopicProduceResponse tr = new ProduceResponseData.TopicProduceResponse().setName("foo");
            tr.partitionResponses().add(new ProduceResponseData.PartitionProduceResponse()
                .setIndex(2).setErrorCode((short) 0).setBaseOffset(41L).setLogAppendTimeMs(1700000000000L));
            tr.partitionResponses().add(new ProduceResponseData.PartitionProduceResponse()
                .setIndex(3).setErrorCode((short) 87).setBaseOffset(-1L).setLogAppendTimeMs(-1L));
            p.responses().add(tr);
            emit("produce_response", v, p);
        }
        for (int v = 0; v <= 3; v++) {
            FetchRequestData r = new FetchRequestData().setReplicaId(-1).setMaxWaitMs(500).setMinBytes(1);
            if (v >= 3) r.setMaxBytes(1000000);
            FetchRequestData.FetchTopic t = new FetchRequestData.FetchTopic().setTopic("foo");
            t.partitions().add(new FetchRequestData.FetchPartition().setPartition(2).setFetchOffset(41L).setPartitionMaxBytes(65536));
            r.topics().add(t);
            emit("fetch_request", v, r);
            FetchResponseData p = new FetchResponseData().setThrottleTimeMs(0);
            FetchResponseData.FetchableTopicResponse tr = new FetchResponseData.FetchableTopicResponse().setTopic("foo");
            tr.partitions().add(new FetchResponseData.PartitionData().setPartitionIndex(2).setErrorCode((short) 0)
                .setHighWatermark(42L).setRecords(records()));
            tr.partitions().add(new FetchResponseData.PartitionData().setPartitionIndex(3).setErrorCode((short) 76)
                .setHighWatermark(-1L).setRecords(null));
            p.responses().add(tr);
            emit("fetch_response", v, p);
        }
    }
}
