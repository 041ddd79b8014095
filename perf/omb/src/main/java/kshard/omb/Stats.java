package kshard.omb;

import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.LongAdder;
import org.HdrHistogram.Histogram;
import org.HdrHistogram.Recorder;

/**
 * What producers and consumers record, drained into {@link Period}s by the reporting loop.
 * Latencies are in microseconds (as OMB's), capped at the histograms' range as OMB caps them;
 * 3 significant digits (OMB keeps 5; 0.1 % is finer than anything this machine resolves).
 */
final class Stats {
    static final long PUBLISH_MAX_US = TimeUnit.SECONDS.toMicros(60);
    static final long E2E_MAX_US = TimeUnit.HOURS.toMicros(12);
    static final int DIGITS = 3;

    private final Recorder publishLatencyUs = new Recorder(PUBLISH_MAX_US, DIGITS);
    private final Recorder publishDelayUs = new Recorder(PUBLISH_MAX_US, DIGITS);
    private final Recorder e2eLatencyUs = new Recorder(E2E_MAX_US, DIGITS);
    private final Recorder e2eFromIntendedUs = new Recorder(E2E_MAX_US, DIGITS);
    private final LongAdder sent = new LongAdder();
    private final LongAdder sentBytes = new LongAdder();
    private final LongAdder sendErrors = new LongAdder();
    private final LongAdder received = new LongAdder();
    private final LongAdder receivedBytes = new LongAdder();
    private final LongAdder totalSent = new LongAdder();
    private final LongAdder totalReceived = new LongAdder();

    /** A producer's acknowledgement: publish latency is ack minus send, delay send minus intended. */
    void recordSent(int bytes, long intendedNs, long sendNs, long ackNs) {
        sent.increment();
        totalSent.increment();
        sentBytes.add(bytes);
        publishLatencyUs.recordValue(Math.min(PUBLISH_MAX_US, TimeUnit.NANOSECONDS.toMicros(ackNs - sendNs)));
        publishDelayUs.recordValue(Math.min(PUBLISH_MAX_US, TimeUnit.NANOSECONDS.toMicros(sendNs - intendedNs)));
    }

    void recordSendError() {
        sendErrors.increment();
    }

    /** A consumed record, with the send and intended times its producer wrote into it. */
    void recordReceived(int bytes, long sendNs, long intendedNs, long nowNs) {
        received.increment();
        totalReceived.increment();
        receivedBytes.add(bytes);
        e2eLatencyUs.recordValue(Math.min(E2E_MAX_US, Math.max(0, TimeUnit.NANOSECONDS.toMicros(nowNs - sendNs))));
        e2eFromIntendedUs.recordValue(
                Math.min(E2E_MAX_US, Math.max(0, TimeUnit.NANOSECONDS.toMicros(nowNs - intendedNs))));
    }

    /** Records sent and not (yet) consumed, over the whole run. */
    long backlog() {
        return totalSent.sum() - totalReceived.sum();
    }

    /** Everything recorded since the previous drain. */
    Period drain() {
        return new Period(sent.sumThenReset(), sentBytes.sumThenReset(), sendErrors.sumThenReset(),
                received.sumThenReset(), receivedBytes.sumThenReset(),
                publishLatencyUs.getIntervalHistogram(), publishDelayUs.getIntervalHistogram(),
                e2eLatencyUs.getIntervalHistogram(), e2eFromIntendedUs.getIntervalHistogram());
    }

    /** Counts and latency histograms over some stretch of time. */
    static final class Period {
        long sent;
        long sentBytes;
        long sendErrors;
        long received;
        long receivedBytes;
        final Histogram publishLatencyUs;
        final Histogram publishDelayUs;
        final Histogram e2eLatencyUs;
        final Histogram e2eFromIntendedUs;

        Period() {
            this(0, 0, 0, 0, 0, new Histogram(PUBLISH_MAX_US, DIGITS), new Histogram(PUBLISH_MAX_US, DIGITS),
                    new Histogram(E2E_MAX_US, DIGITS), new Histogram(E2E_MAX_US, DIGITS));
        }

        Period(long sent, long sentBytes, long sendErrors, long received, long receivedBytes,
                Histogram publishLatencyUs, Histogram publishDelayUs, Histogram e2eLatencyUs,
                Histogram e2eFromIntendedUs) {
            this.sent = sent;
            this.sentBytes = sentBytes;
            this.sendErrors = sendErrors;
            this.received = received;
            this.receivedBytes = receivedBytes;
            this.publishLatencyUs = publishLatencyUs;
            this.publishDelayUs = publishDelayUs;
            this.e2eLatencyUs = e2eLatencyUs;
            this.e2eFromIntendedUs = e2eFromIntendedUs;
        }

        void add(Period p) {
            sent += p.sent;
            sentBytes += p.sentBytes;
            sendErrors += p.sendErrors;
            received += p.received;
            receivedBytes += p.receivedBytes;
            publishLatencyUs.add(p.publishLatencyUs);
            publishDelayUs.add(p.publishDelayUs);
            e2eLatencyUs.add(p.e2eLatencyUs);
            e2eFromIntendedUs.add(p.e2eFromIntendedUs);
        }
    }

    /** OMB's latency summary of one histogram, in milliseconds. */
    static Map<String, Object> quantilesMs(Histogram h) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("count", h.getTotalCount());
        m.put("avg", h.getTotalCount() == 0 ? 0.0 : h.getMean() / 1000.0);
        m.put("p50", h.getValueAtPercentile(50) / 1000.0);
        m.put("p75", h.getValueAtPercentile(75) / 1000.0);
        m.put("p95", h.getValueAtPercentile(95) / 1000.0);
        m.put("p99", h.getValueAtPercentile(99) / 1000.0);
        m.put("p999", h.getValueAtPercentile(99.9) / 1000.0);
        m.put("p9999", h.getValueAtPercentile(99.99) / 1000.0);
        m.put("max", h.getMaxValue() / 1000.0);
        return m;
    }
}
