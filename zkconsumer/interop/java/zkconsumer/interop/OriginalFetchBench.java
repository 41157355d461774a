package zkconsumer.interop;

import java.io.BufferedReader;
import java.io.FileDescriptor;
import java.io.FileInputStream;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.lang.management.ManagementFactory;
import java.nio.charset.StandardCharsets;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicLong;

import kafka.consumer.Consumer;
import kafka.consumer.ConsumerConfig;
import kafka.consumer.ConsumerIterator;
import kafka.consumer.KafkaStream;
import kafka.javaapi.consumer.ConsumerConnector;
import kafka.message.MessageAndMetadata;

/**
 * The original Kafka 0.8.2.2 high-level consumer under benchmarks/bench_fetch.py: consumes exactly N messages of one
 * topic from K streams (one thread each) and prints one JSON line with its timings and the JVM's CPU time.
 *
 * <pre>
 * OriginalFetchBench --config consumer.properties --topic T --streams K (--messages N | --wait-go)
 * </pre>
 *
 * stdout, one JSON object per line: {"event":"ready"} once createMessageStreams has returned (the first rebalance is
 * done), then {"event":"result", ...}. With --wait-go the streams are not iterated until a line "go N" arrives on
 * stdin (the bench waits until a group has settled, then says how many messages this member's partitions hold). End
 * of stdin means the bench is gone: the JVM exits, so it never outlives it.
 */
public final class OriginalFetchBench {
    private final AtomicLong consumed = new AtomicLong();
    private final CountDownLatch done = new CountDownLatch(1);
    private volatile long target = Long.MAX_VALUE;
    private volatile double firstAt;
    private volatile double halfAt;
    private volatile double lastAt;
    private volatile double cpuAtFirst;
    private volatile double cpuAtHalf;
    private volatile double cpuAtLast;
    private volatile long keyBytes;
    private volatile long valueBytes;

    private OriginalFetchBench() {
    }

    public static void main(String[] args) throws Exception {
        PrintStream out = new PrintStream(new FileOutputStream(FileDescriptor.out), true, "UTF-8");
        System.setOut(System.err); // a library printing on stdout must not corrupt the JSON lines
        String config = null;
        String topic = null;
        int streams = 1;
        long messages = -1;
        boolean waitGo = false;
        for (int i = 0; i < args.length; i++) {
            switch (args[i]) {
                case "--config": config = args[++i]; break;
                case "--topic": topic = args[++i]; break;
                case "--streams": streams = Integer.parseInt(args[++i]); break;
                case "--messages": messages = Long.parseLong(args[++i]); break;
                case "--wait-go": waitGo = true; break;
                default: throw new IllegalArgumentException("unknown argument " + args[i]);
            }
        }
        if (config == null || topic == null || (messages < 0 && !waitGo)) {
            throw new IllegalArgumentException("usage: --config FILE --topic T --streams K (--messages N | --wait-go)");
        }
        Properties props = new Properties();
        try (FileInputStream in = new FileInputStream(config)) {
            props.load(in);
        }
        new OriginalFetchBench().run(out, props, topic, streams, messages, waitGo);
    }

    private void run(PrintStream out, Properties props, String topic, int streams, long messages, boolean waitGo)
            throws InterruptedException {
        BufferedReader stdin = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        ConsumerConnector connector = Consumer.createJavaConsumerConnector(new ConsumerConfig(props));
        List<KafkaStream<byte[], byte[]>> list = connector
                .createMessageStreams(Collections.singletonMap(topic, streams)).get(topic);
        out.println("{\"event\":\"ready\",\"t\":" + now() + "}");
        if (waitGo) {
            target = Long.parseLong(readLine(stdin).replaceFirst("^go ", "").trim());
        } else {
            target = messages;
        }
        // From here on, end of stdin means the bench is gone.
        Thread watchdog = new Thread(() -> {
            readLine(stdin);
            Runtime.getRuntime().halt(3);
        }, "bench-stdin-watchdog");
        watchdog.setDaemon(true);
        watchdog.start();

        List<Thread> threads = new ArrayList<>();
        for (int i = 0; i < list.size(); i++) {
            KafkaStream<byte[], byte[]> stream = list.get(i);
            Thread thread = new Thread(() -> drain(stream), "bench-stream-" + threads.size());
            threads.add(thread);
            thread.start();
        }
        if (target > 0) {
            done.await();
        }
        // Ends the iterators too; with auto.commit.enable at its default it commits once more, as ours does on close.
        connector.shutdown();
        for (Thread thread : threads) {
            thread.join();
        }
        long n = consumed.get();
        out.println("{\"event\":\"result\",\"messages\":" + n + ",\"target\":" + target + ",\"first\":" + firstAt
                + ",\"half\":" + halfAt + ",\"last\":" + lastAt + ",\"cpu_first\":" + cpuAtFirst
                + ",\"cpu_half\":" + cpuAtHalf + ",\"cpu_last\":" + cpuAtLast + ",\"cpu_end\":" + cpuSeconds()
                + ",\"key_bytes\":" + keyBytes + ",\"value_bytes\":" + valueBytes + ",\"start\":" + processStart()
                + ",\"streams\":" + list.size() + "}");
        // More than the target: a message handed out twice (0.8.2 may repeat a chunk's last message after a
        // rebalance, see docs/DESIGN.md); the bench reports it. Fewer: the run ended early.
        System.exit(n >= target ? 0 : 4);
    }

    private void drain(KafkaStream<byte[], byte[]> stream) {
        long keys = 0;
        long values = 0;
        try {
            ConsumerIterator<byte[], byte[]> it = stream.iterator();
            while (it.hasNext()) {
                MessageAndMetadata<byte[], byte[]> m = it.next();
                // What an application reads: both are copied out of the fetched buffer by MessageAndMetadata.
                byte[] key = m.key();
                byte[] value = m.message();
                keys += key == null ? 0 : key.length;
                values += value == null ? 0 : value.length;
                long n = consumed.incrementAndGet();
                if (n == 1) {
                    firstAt = now();
                    cpuAtFirst = cpuSeconds();
                }
                if (n == target / 2) { // the second half runs with the JIT's work mostly done
                    halfAt = now();
                    cpuAtHalf = cpuSeconds();
                }
                if (n == target) {
                    lastAt = now();
                    cpuAtLast = cpuSeconds();
                    done.countDown();
                }
            }
        } catch (RuntimeException e) { // the bench would otherwise wait for its timeout: end now, saying why
            System.err.println("stream failed: " + e);
            Runtime.getRuntime().halt(5);
        }
        synchronized (this) {
            keyBytes += keys;
            valueBytes += values;
        }
    }

    private static String readLine(BufferedReader in) {
        try {
            String line = in.readLine();
            if (line == null) {
                Runtime.getRuntime().halt(3);
            }
            return line;
        } catch (IOException e) {
            Runtime.getRuntime().halt(3);
            return null;
        }
    }

    private static double now() {
        Instant t = Instant.now();
        return t.getEpochSecond() + t.getNano() / 1e9;
    }

    /** The JVM's CPU time (every thread: consumer, fetchers, GC, JIT), the same as /proc/self/stat's utime+stime. */
    private static double cpuSeconds() {
        java.lang.management.OperatingSystemMXBean os = ManagementFactory.getOperatingSystemMXBean();
        if (os instanceof com.sun.management.OperatingSystemMXBean) {
            return ((com.sun.management.OperatingSystemMXBean) os).getProcessCpuTime() / 1e9;
        }
        return -1;
    }

    private static double processStart() {
        return ProcessHandle.current().info().startInstant().map(t -> t.getEpochSecond() + t.getNano() / 1e9)
                .orElse(-1.0);
    }
}
