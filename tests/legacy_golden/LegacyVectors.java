// Prints golden vectors for kshard's legacy-version codecs
// (src/protocol/legacy): requests and responses at the versions the
// kafka-protocol crate no longer knows, serialized by Apache Kafka 3.9.1's
// own generated message classes. The samples must match the ones in
// src/protocol/legacy/tests.rs field for field. See README.md.

import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

import org.apache.kafka.common.message.CreateTopicsRequestData;
import org.apache.kafka.common.message.CreateTopicsResponseData;
import org.apache.kafka.common.message.DeleteTopicsRequestData;
import org.apache.kafka.common.message.DeleteTopicsResponseData;
import org.apache.kafka.common.message.DescribeConfigsRequestData;
import org.apache.kafka.common.message.DescribeConfigsResponseData;
import org.apache.kafka.common.message.ListOffsetsRequestData;
import org.apache.kafka.common.message.ListOffsetsResponseData;
import org.apache.kafka.common.message.OffsetCommitRequestData;
import org.apache.kafka.common.message.OffsetCommitResponseData;
import org.apache.kafka.common.message.OffsetFetchRequestData;
import org.apache.kafka.common.message.OffsetFetchResponseData;
import org.apache.kafka.common.message.OffsetForLeaderEpochRequestData;
import org.apache.kafka.common.message.OffsetForLeaderEpochResponseData;
import org.apache.kafka.common.protocol.ByteBufferAccessor;
import org.apache.kafka.common.protocol.Message;
import org.apache.kafka.common.protocol.ObjectSerializationCache;

public class LegacyVectors {
    // Multi-byte UTF-8, so string lengths are byte counts, not char counts.
    static final String TOPIC_2 = "t\u00f8pic";

    static byte[] serialize(Message m, short v) {
        ObjectSerializationCache cache = new ObjectSerializationCache();
        ByteBuffer buf = ByteBuffer.allocate(m.size(cache, v));
        m.write(new ByteBufferAccessor(buf), cache, v);
        if (buf.hasRemaining()) throw new IllegalStateException("size() disagrees with write()");
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

    static Message listOffsetsRequest() {
        ListOffsetsRequestData d = new ListOffsetsRequestData().setReplicaId(-1);
        ListOffsetsRequestData.ListOffsetsTopic t = new ListOffsetsRequestData.ListOffsetsTopic().setName("foo");
        t.partitions().add(new ListOffsetsRequestData.ListOffsetsPartition().setPartitionIndex(0).setTimestamp(-1L).setMaxNumOffsets(10));
        t.partitions().add(new ListOffsetsRequestData.ListOffsetsPartition().setPartitionIndex(3).setTimestamp(1700000000000L).setMaxNumOffsets(1));
        d.topics().add(t);
        d.topics().add(new ListOffsetsRequestData.ListOffsetsTopic().setName(TOPIC_2));
        return d;
    }

    static Message listOffsetsResponse() {
        ListOffsetsResponseData d = new ListOffsetsResponseData();
        ListOffsetsResponseData.ListOffsetsTopicResponse t = new ListOffsetsResponseData.ListOffsetsTopicResponse().setName("foo");
        t.partitions().add(new ListOffsetsResponseData.ListOffsetsPartitionResponse()
            .setPartitionIndex(0).setErrorCode((short) 0).setOldStyleOffsets(new ArrayList<>(Arrays.asList(42L, 7L, 0L))));
        t.partitions().add(new ListOffsetsResponseData.ListOffsetsPartitionResponse()
            .setPartitionIndex(3).setErrorCode((short) 3));
        d.topics().add(t);
        return d;
    }

    static Message createTopicsRequest(short v) {
        CreateTopicsRequestData d = new CreateTopicsRequestData().setTimeoutMs(30000);
        if (v >= 1) d.setValidateOnly(true);
        CreateTopicsRequestData.CreatableTopic a = new CreateTopicsRequestData.CreatableTopic()
            .setName("foo").setNumPartitions(3).setReplicationFactor((short) 1);
        a.configs().add(new CreateTopicsRequestData.CreatableTopicConfig().setName("cleanup.policy").setValue("compact"));
        a.configs().add(new CreateTopicsRequestData.CreatableTopicConfig().setName("retention.ms").setValue(null));
        d.topics().add(a);
        CreateTopicsRequestData.CreatableTopic b = new CreateTopicsRequestData.CreatableTopic()
            .setName(TOPIC_2).setNumPartitions(-1).setReplicationFactor((short) -1);
        b.assignments().add(new CreateTopicsRequestData.CreatableReplicaAssignment()
            .setPartitionIndex(0).setBrokerIds(new ArrayList<>(Arrays.asList(1, 2))));
        d.topics().add(b);
        return d;
    }

    static Message createTopicsResponse(short v) {
        CreateTopicsResponseData d = new CreateTopicsResponseData();
        d.topics().add(new CreateTopicsResponseData.CreatableTopicResult().setName("foo").setErrorCode((short) 0)
            .setErrorMessage(null));
        d.topics().add(new CreateTopicsResponseData.CreatableTopicResult().setName(TOPIC_2).setErrorCode((short) 36)
            .setErrorMessage(v >= 1 ? "Topic 't\u00f8pic' already exists." : null));
        return d;
    }

    static Message deleteTopicsRequest() {
        return new DeleteTopicsRequestData().setTopicNames(new ArrayList<>(Arrays.asList("foo", TOPIC_2))).setTimeoutMs(15000);
    }

    static Message deleteTopicsResponse() {
        DeleteTopicsResponseData d = new DeleteTopicsResponseData();
        d.responses().add(new DeleteTopicsResponseData.DeletableTopicResult().setName("foo").setErrorCode((short) 0));
        d.responses().add(new DeleteTopicsResponseData.DeletableTopicResult().setName(TOPIC_2).setErrorCode((short) 3));
        return d;
    }

    static Message offsetCommitRequest(short v) {
        OffsetCommitRequestData d = new OffsetCommitRequestData().setGroupId("grp");
        if (v >= 1) d.setGenerationIdOrMemberEpoch(5).setMemberId("member-1");
        OffsetCommitRequestData.OffsetCommitRequestTopic t = new OffsetCommitRequestData.OffsetCommitRequestTopic().setName("foo");
        OffsetCommitRequestData.OffsetCommitRequestPartition p0 = new OffsetCommitRequestData.OffsetCommitRequestPartition()
            .setPartitionIndex(0).setCommittedOffset(100L).setCommittedMetadata("meta");
        OffsetCommitRequestData.OffsetCommitRequestPartition p1 = new OffsetCommitRequestData.OffsetCommitRequestPartition()
            .setPartitionIndex(1).setCommittedOffset(7L).setCommittedMetadata(null);
        if (v == 1) p0.setCommitTimestamp(1700000000000L);
        t.partitions().add(p0);
        t.partitions().add(p1);
        d.topics().add(t);
        return d;
    }

    static Message offsetCommitResponse() {
        OffsetCommitResponseData d = new OffsetCommitResponseData();
        OffsetCommitResponseData.OffsetCommitResponseTopic t = new OffsetCommitResponseData.OffsetCommitResponseTopic().setName("foo");
        t.partitions().add(new OffsetCommitResponseData.OffsetCommitResponsePartition().setPartitionIndex(0).setErrorCode((short) 0));
        t.partitions().add(new OffsetCommitResponseData.OffsetCommitResponsePartition().setPartitionIndex(1).setErrorCode((short) 3));
        d.topics().add(t);
        return d;
    }

    static Message offsetFetchRequest() {
        OffsetFetchRequestData d = new OffsetFetchRequestData().setGroupId("grp");
        d.topics().add(new OffsetFetchRequestData.OffsetFetchRequestTopic().setName("foo")
            .setPartitionIndexes(new ArrayList<>(Arrays.asList(0, 1))));
        return d;
    }

    static Message offsetFetchResponse() {
        OffsetFetchResponseData d = new OffsetFetchResponseData();
        OffsetFetchResponseData.OffsetFetchResponseTopic t = new OffsetFetchResponseData.OffsetFetchResponseTopic().setName("foo");
        t.partitions().add(new OffsetFetchResponseData.OffsetFetchResponsePartition()
            .setPartitionIndex(0).setCommittedOffset(100L).setMetadata("").setErrorCode((short) 0));
        t.partitions().add(new OffsetFetchResponseData.OffsetFetchResponsePartition()
            .setPartitionIndex(1).setCommittedOffset(-1L).setMetadata("").setErrorCode((short) 0));
        d.topics().add(t);
        return d;
    }

    static Message offsetForLeaderEpochRequest() {
        OffsetForLeaderEpochRequestData d = new OffsetForLeaderEpochRequestData();
        OffsetForLeaderEpochRequestData.OffsetForLeaderTopic t = new OffsetForLeaderEpochRequestData.OffsetForLeaderTopic().setTopic("foo");
        t.partitions().add(new OffsetForLeaderEpochRequestData.OffsetForLeaderPartition().setPartition(0).setLeaderEpoch(3));
        t.partitions().add(new OffsetForLeaderEpochRequestData.OffsetForLeaderPartition().setPartition(2).setLeaderEpoch(0));
        d.topics().add(t);
        return d;
    }

    static Message offsetForLeaderEpochResponse(short v) {
        OffsetForLeaderEpochResponseData d = new OffsetForLeaderEpochResponseData();
        OffsetForLeaderEpochResponseData.OffsetForLeaderTopicResult t = new OffsetForLeaderEpochResponseData.OffsetForLeaderTopicResult().setTopic("foo");
        OffsetForLeaderEpochResponseData.EpochEndOffset a = new OffsetForLeaderEpochResponseData.EpochEndOffset()
            .setErrorCode((short) 0).setPartition(0).setEndOffset(55L);
        if (v >= 1) a.setLeaderEpoch(3);
        t.partitions().add(a);
        t.partitions().add(new OffsetForLeaderEpochResponseData.EpochEndOffset()
            .setErrorCode((short) 3).setPartition(2).setEndOffset(-1L));
        d.topics().add(t);
        return d;
    }

    static Message describeConfigsRequest() {
        DescribeConfigsRequestData d = new DescribeConfigsRequestData();
        d.resources().add(new DescribeConfigsRequestData.DescribeConfigsResource()
            .setResourceType((byte) 2).setResourceName("foo")
            .setConfigurationKeys(new ArrayList<>(Arrays.asList("cleanup.policy", "retention.ms"))));
        d.resources().add(new DescribeConfigsRequestData.DescribeConfigsResource()
            .setResourceType((byte) 4).setResourceName("1").setConfigurationKeys(null));
        return d;
    }

    static Message describeConfigsResponse() {
        DescribeConfigsResponseData d = new DescribeConfigsResponseData().setThrottleTimeMs(0);
        DescribeConfigsResponseData.DescribeConfigsResult r = new DescribeConfigsResponseData.DescribeConfigsResult()
            .setErrorCode((short) 0).setErrorMessage(null).setResourceType((byte) 2).setResourceName("foo");
        r.configs().add(new DescribeConfigsResponseData.DescribeConfigsResourceResult()
            .setName("cleanup.policy").setValue("compact").setReadOnly(false).setIsSensitive(false));
        r.configs().add(new DescribeConfigsResponseData.DescribeConfigsResourceResult()
            .setName("secret").setValue(null).setReadOnly(true).setIsSensitive(true));
        d.results().add(r);
        d.results().add(new DescribeConfigsResponseData.DescribeConfigsResult()
            .setErrorCode((short) 3).setErrorMessage("Topic t\u00f8pic does not exist.").setResourceType((byte) 2).setResourceName(TOPIC_2));
        return d;
    }

    public static void main(String[] args) {
        System.out.println("# Generated by tests/legacy_golden/LegacyVectors.java with kafka-clients 3.9.1; do not edit.");
        System.out.println("# <message> <version> <hex body>");
        emit("ListOffsetsRequest", 0, listOffsetsRequest());
        emit("ListOffsetsResponse", 0, listOffsetsResponse());
        for (short v = 0; v <= 1; v++) {
            emit("CreateTopicsRequest", v, createTopicsRequest(v));
            emit("CreateTopicsResponse", v, createTopicsResponse(v));
            emit("OffsetCommitRequest", v, offsetCommitRequest(v));
            emit("OffsetCommitResponse", v, offsetCommitResponse());
            emit("OffsetForLeaderEpochRequest", v, offsetForLeaderEpochRequest());
            emit("OffsetForLeaderEpochResponse", v, offsetForLeaderEpochResponse(v));
        }
        emit("DeleteTopicsRequest", 0, deleteTopicsRequest());
        emit("DeleteTopicsResponse", 0, deleteTopicsResponse());
        emit("OffsetFetchRequest", 0, offsetFetchRequest());
        emit("OffsetFetchResponse", 0, offsetFetchResponse());
        emit("DescribeConfigsRequest", 0, describeConfigsRequest());
        emit("DescribeConfigsResponse", 0, describeConfigsResponse());
    }
}
