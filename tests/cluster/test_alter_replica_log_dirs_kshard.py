"""kshard-only AlterReplicaLogDirs behaviour (Kafka 3.9.1 differs, so these
do not run against it): a broker restarted in the middle of a move, cleanly
or killed, discards the future log at start-up (kshard keeps no record of
the request; Kafka loads the -future directory and resumes the move). The
current replica stays where it was with all its data, and a new request
moves it. One broker with log.dirs=<tmp>/d0,<tmp>/d1."""

import pytest

import cluster_util as cl
import log_dir_util as ldu
import reassign_util as ru
import test_dynamic_config as dc

pytestmark = pytest.mark.skipif(cl.TARGET == "kafka", reason="Kafka resumes the move instead (module doc)")

DIR_THROTTLE = "replica.alter.log.dirs.io.max.bytes.per.second"


@pytest.fixture(scope="module")
def one(module_cluster):
    ldu.start_two_dir_brokers(module_cluster, 1, {
        "offsets.topic.replication.factor": "1",
        "log.segment.delete.delay.ms": "1000",
    })
    return module_cluster


def set_throttle(cluster, b, value):
    op = (DIR_THROTTLE, dc.SET, value) if value is not None else (DIR_THROTTLE, dc.DELETE, None)
    assert dc.incremental_alter(b.port, [(dc.BROKER, str(b.broker_id), [op])]) == [
        (0, None, dc.BROKER, str(b.broker_id))]
    want = {DIR_THROTTLE: value} if value is not None else {}
    cluster.wait_for(lambda: ru.broker_dynamic(b.port, b.broker_id, (DIR_THROTTLE,)) == want, 15,
                     f"broker {b.broker_id} applying {want}")


@pytest.mark.parametrize("crash", [False, True], ids=["clean-stop", "kill9"])
def test_restart_mid_move_discards_the_future_log(one, crash):
    cluster = one
    t = f"ardk-restart-{int(crash)}"
    ru.create(cluster, t, {0: [1]})
    b1 = cluster.broker(1)
    x = ldu.replica_dirs(b1, t)[0]
    Y = b1.dirs[1 - x]
    ru.fill(b1.port, t, 0, 24)  # 3 MiB
    size = ldu.log_bytes(b1, x, t, 0)
    set_throttle(cluster, b1, "1")
    assert ldu.alter_replica_log_dirs(b1.port, [(Y, [(t, [0])])]) == {(t, 0): ldu.NONE}
    cluster.wait_for(lambda: [n for n in ldu.entries(b1, t)[1 - x] if n.endswith("-future")], 15,
                     "the -future directory")

    if crash:
        b1.kill9()
    else:
        assert b1.stop() == 0
    b1.start()
    cluster.wait_converged(topics=[t])
    cluster.wait_for(lambda: ldu.entries(b1, t) == {x: [f"{t}-0"], 1 - x: []}, 30,
                     "the future log discarded, the replica where it was")
    assert ru.end_offsets(cluster.bootstrap(), t, 1) == {0: 24 * 16}
    assert ldu.log_bytes(b1, x, t, 0) == size
    top, dirs = ldu.describe_log_dirs(b1.port, [(t, [0])])
    assert dirs[b1.dirs[x]]["replicas"] == {(t, 0): (size, 0, False)} and dirs[Y]["replicas"] == {}, dirs

    # The throttle survives the restart (a dynamic config); without it a
    # new request moves the replica.
    set_throttle(cluster, b1, None)
    assert ldu.alter_replica_log_dirs(b1.port, [(Y, [(t, [0])])]) == {(t, 0): ldu.NONE}
    cluster.wait_for(lambda: ldu.entries(b1, t) == {x: [], 1 - x: [f"{t}-0"]}, 30, f"{t}-0 moved to {Y}")
    assert ru.end_offsets(cluster.bootstrap(), t, 1) == {0: 24 * 16}
    assert ldu.log_bytes(b1, 1 - x, t, 0) == size
    ru.fill(b1.port, t, 0, 1)
    assert ru.end_offsets(cluster.bootstrap(), t, 1) == {0: 25 * 16}
