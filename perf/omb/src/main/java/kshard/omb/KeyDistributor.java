package kshard.omb;

import java.util.Base64;
import java.util.Random;

/**
 * Record keys, as OMB's key distributors choose them. NO_KEY sends null keys (the producer's
 * default partitioner then fills one partition's batch at a time); RANDOM_NANO picks one of
 * 10,000 random 7-byte keys (base64url, no padding) by System.nanoTime() modulo 10,000, so
 * records of one batch go to many partitions.
 */
enum KeyDistributor {
    NO_KEY,
    RANDOM_NANO;

    private static final int UNIQUE_KEYS = 10_000;
    private static final int KEY_BYTES = 7;

    /** Filled once per JVM, as OMB does. */
    private static final class Keys {
        static final String[] ALL = make();

        private static String[] make() {
            Random random = new Random();
            Base64.Encoder enc = Base64.getUrlEncoder().withoutPadding();
            String[] keys = new String[UNIQUE_KEYS];
            byte[] raw = new byte[KEY_BYTES];
            for (int i = 0; i < keys.length; i++) {
                random.nextBytes(raw);
                keys[i] = enc.encodeToString(raw);
            }
            return keys;
        }
    }

    String next() {
        switch (this) {
            case NO_KEY:
                return null;
            case RANDOM_NANO:
                return Keys.ALL[Math.abs((int) (System.nanoTime() % UNIQUE_KEYS))];
            default:
                throw new AssertionError(this);
        }
    }
}
