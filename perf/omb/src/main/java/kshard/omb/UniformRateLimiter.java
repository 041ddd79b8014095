package kshard.omb;

import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;

/**
 * Intended send times on a fixed grid, shared by all producer threads: send number i is due
 * at start + i / rate, whatever happened before it. A sender that stalls therefore does not
 * lower the offered rate; it shows up as publish delay (send time minus intended time), the
 * coordinated-omission check OMB reports.
 */
final class UniformRateLimiter {
    private final AtomicLong nextSend = new AtomicLong();
    private final long startNs;
    private final double intervalNs;

    UniformRateLimiter(double sendsPerS, long startNs) {
        if (!(sendsPerS > 0) || Double.isInfinite(sendsPerS)) {
            throw new IllegalArgumentException("rate must be positive and finite: " + sendsPerS);
        }
        this.startNs = startNs;
        this.intervalNs = 1e9 / sendsPerS;
    }

    /** The intended send time (System.nanoTime) of the next send. */
    long acquire() {
        return startNs + (long) (nextSend.getAndIncrement() * intervalNs);
    }

    static void sleepUntil(long deadlineNs) {
        long leftNs;
        while ((leftNs = deadlineNs - System.nanoTime()) > 0) {
            LockSupport.parkNanos(leftNs);
        }
    }
}
