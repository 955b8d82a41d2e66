package example;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.redisson.Redisson;
import org.redisson.api.RLock;
import org.redisson.api.RedissonClient;
import org.redisson.config.Config;

/** Redisson against keylock: leases run out by moving keylock's clock, not by sleeping. */
class LeaseTest {
    static Process keylock;
    static int port;
    static RedissonClient app1;
    static RedissonClient app2;

    @BeforeAll
    static void startKeylock() throws IOException {
        String binary = System.getProperty("keylock.bin", "keylock");
        keylock = new ProcessBuilder(binary, "--port", "0").redirectErrorStream(true).start();
        // The first line is "listening on 127.0.0.1:PORT", printed once bound.
        String line = new BufferedReader(new InputStreamReader(keylock.getInputStream(), StandardCharsets.UTF_8)).readLine();
        port = Integer.parseInt(line.substring(line.lastIndexOf(':') + 1));
        app1 = client();
        app2 = client();
    }

    static RedissonClient client() {
        Config config = new Config();
        config.useSingleServer().setAddress("redis://127.0.0.1:" + port);
        return Redisson.create(config);
    }

    /** Sends one KEYLOCK control and returns the first line of its reply. */
    static String keylock(String... args) throws IOException {
        StringBuilder request = new StringBuilder("*" + (args.length + 1) + "\r\n$7\r\nKEYLOCK\r\n");
        for (String arg : args) {
            request.append('$').append(arg.length()).append("\r\n").append(arg).append("\r\n");
        }
        try (Socket socket = new Socket("127.0.0.1", port)) {
            socket.getOutputStream().write(request.toString().getBytes(StandardCharsets.UTF_8));
            return new BufferedReader(new InputStreamReader(socket.getInputStream(), StandardCharsets.UTF_8)).readLine();
        }
    }

    @BeforeEach
    void freshServer() throws IOException {
        assertEquals("+OK", keylock("RESET"));
    }

    @AfterAll
    static void stopKeylock() {
        app1.shutdown();
        app2.shutdown();
        keylock.destroy();
    }

    @Test
    void aLeaseRunsOutAndAnotherInstanceTakesTheLock() throws Exception {
        RLock held = app1.getLock("order-42");
        assertTrue(held.tryLock(0, 30, TimeUnit.SECONDS));
        RLock wanted = app2.getLock("order-42");
        assertFalse(wanted.tryLock(0, 30, TimeUnit.SECONDS));

        keylock("CLOCK", "ADVANCE", "30001"); // 30 s pass at once

        assertTrue(wanted.tryLock(0, 30, TimeUnit.SECONDS));
    }

    @Test
    void aLostUnlockAcknowledgementStillReleasesTheLock() throws Exception {
        RLock lock = app1.getLock("order-42");
        assertTrue(lock.tryLock(0, 30, TimeUnit.SECONDS));
        lock.unlock();
        assertTrue(lock.tryLock(0, 30, TimeUnit.SECONDS));
        // The next unlock runs, and its reply never arrives.
        keylock("FAULT", "ADD", "DISCONNECT", "evalsha", "AFTER", "COUNT", "1");
        try {
            lock.unlock();
        } catch (RuntimeException expected) {
            // Redisson reports the lost connection; the lock is released anyway.
        }
        assertTrue(app2.getLock("order-42").tryLock(0, 30, TimeUnit.SECONDS));
    }
}
