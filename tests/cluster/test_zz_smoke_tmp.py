import json, time, os, sys, signal
import cluster_util as cl

def test_failover(cluster, tmp_path):
    cluster.start(4)
    cl.kafka_tool("org.apache.kafka.tools.TopicCommand", "--bootstrap-server", cluster.bootstrap(), "--create", "--topic", "t", "--replica-assignment", "1:2,2:3")
    cluster.wait_converged(topics=["t"])
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": cluster.bootstrap(), "acks": "all"})
    for i in range(2000):
        p.produce("t", value=b"x" * 500, partition=i % 2)
    p.flush(30)
    ctl = cluster.controller_id()
    print("controller", ctl, cluster.assignment("t"))
    cluster.broker(4).stop()
    other = [b for b in (1, 2, 3) if b != ctl][0]
    target = [other, 4]
    zk = cluster.zk
    zk.create(cluster.path("/admin/reassign_partitions"), json.dumps({"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": target}]}).encode(), makepath=True)
    cluster.wait_for(lambda: cluster.zk_json("/brokers/topics/t")["adding_replicas"].get("0") == [r for r in target if r not in (1, 2)], 20, "reassignment started")
    print(cluster.zk_json("/brokers/topics/t"))
    victim = cluster.controller_id()
    cluster.broker(victim).kill9()
    cluster.broker(4).start()
    cluster.wait_for(lambda: cluster.zk_json("/brokers/topics/t")["partitions"]["0"] == target and not cluster.zk_json("/brokers/topics/t")["adding_replicas"], 60, "reassignment done")
    print(cluster.zk_json("/brokers/topics/t"), cluster.controller_id())
    assert not cluster.zk_exists("/admin/reassign_partitions")
