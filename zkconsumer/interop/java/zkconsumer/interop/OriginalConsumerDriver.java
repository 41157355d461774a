package zkconsumer.interop;

import java.io.BufferedReader;
import java.io.FileDescriptor;
import java.io.FileInputStream;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.lang.reflect.Field;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;

import kafka.consumer.Blacklist;
import kafka.consumer.Consumer;
import kafka.consumer.ConsumerConfig;
import kafka.consumer.KafkaStream;
import kafka.consumer.Whitelist;
import kafka.javaapi.consumer.ConsumerConnector;
import kafka.message.MessageAndMetadata;

/**
 * Runs the original Kafka 0.8.2.2 high-level consumer (kafka.consumer.ZookeeperConsumerConnector through
 * Consumer.createJavaConsumerConnector) as a member of a group, for differential tests against this project.
 *
 * <pre>
 * OriginalConsumerDriver --config consumer.properties
 *     (--topics t1=2,t2=1 | --whitelist REGEX --streams N | --blacklist REGEX --streams N) [--events FILE]
 * </pre>
 *
 * Events, one JSON object per line on stdout (or FILE), each with "event" and "ts" (epoch ms):
 * starting, connected (consumer_id), ready (after createMessageStreams returned, i.e. after the first rebalance),
 * owned (partitions "topic/partition" to thread id, whenever they change), message (topic, partition, offset,
 * stream, key_size, value_size), commit (id, offsets read back from ZooKeeper, consumed), stream_end, error,
 * parent_gone, shutdown. Commands, one per line on stdin: "commit ID", "shutdown". End of stdin means the parent
 * is gone: the driver exits (running the shutdown hook), so it never outlives the test that started it.
 */
public final class OriginalConsumerDriver {
    private static final long HALT_AFTER_MS = 30_000; // a shutdown hook that hangs must not keep an orphan alive

    private final Properties props;
    private final JsonLine events;
    private final Map<String, Long> consumed = new ConcurrentHashMap<>();
    private final List<Thread> streamThreads = new ArrayList<>();
    private volatile ConsumerConnector connector;
    private volatile OwnerPoller poller;

    private OriginalConsumerDriver(Properties props, JsonLine events) {
        this.props = props;
        this.events = events;
    }

    public static void main(String[] args) throws Exception {
        Map<String, String> opts = parseArgs(args);
        PrintStream eventOut = opts.containsKey("events")
                ? new PrintStream(new FileOutputStream(opts.get("events"), true), false, "UTF-8")
                : new PrintStream(new FileOutputStream(FileDescriptor.out), false, "UTF-8");
        // Anything a library prints on System.out would corrupt the event channel: send it to stderr instead.
        System.setOut(System.err);
        Properties props = new Properties();
        try (FileInputStream in = new FileInputStream(required(opts, "config"))) {
            props.load(in);
        }
        OriginalConsumerDriver driver = new OriginalConsumerDriver(props, new JsonLine(eventOut));
        driver.run(opts);
    }

    private void run(Map<String, String> opts) throws InterruptedException {
        events.emit(JsonLine.obj("event", "starting", "pid", ProcessHandle.current().pid()));
        Runtime.getRuntime().addShutdownHook(new Thread(this::onShutdown, "driver-shutdown-hook"));
        Thread stdin = new Thread(this::readCommands, "driver-stdin");
        stdin.setDaemon(true);
        stdin.start();

        String consumerId;
        try {
            connector = Consumer.createJavaConsumerConnector(new ConsumerConfig(props));
            consumerId = consumerIdOf(connector);
            // Started before the streams: the first rebalance runs inside createMessageStreams.
            poller = new OwnerPoller(props, consumerId, events);
            poller.start();
        } catch (RuntimeException e) { // a bad property, ZooKeeper unreachable: say why, and do not linger
            events.emit(JsonLine.obj("event", "error", "where", "connect", "error", describe(e)));
            exitSoon(2);
            return;
        }
        events.emit(JsonLine.obj("event", "connected", "consumer_id", consumerId));

        Map<String, KafkaStream<byte[], byte[]>> streams = new LinkedHashMap<>();
        try {
            if (opts.containsKey("topics")) {
                Map<String, Integer> counts = parseTopics(opts.get("topics"));
                Map<String, List<KafkaStream<byte[], byte[]>>> byTopic = connector.createMessageStreams(counts);
                for (Map.Entry<String, Integer> entry : counts.entrySet()) {
                    List<KafkaStream<byte[], byte[]>> list = byTopic.get(entry.getKey());
                    for (int i = 0; i < list.size(); i++) {
                        streams.put(entry.getKey() + "-" + i, list.get(i));
                    }
                }
            } else {
                int n = Integer.parseInt(opts.getOrDefault("streams", "1"));
                List<KafkaStream<byte[], byte[]>> list = opts.containsKey("whitelist")
                        ? connector.createMessageStreamsByFilter(new Whitelist(opts.get("whitelist")), n)
                        : connector.createMessageStreamsByFilter(new Blacklist(required(opts, "blacklist")), n);
                for (int i = 0; i < list.size(); i++) {
                    streams.put(String.valueOf(i), list.get(i));
                }
            }
        } catch (RuntimeException e) {
            events.emit(JsonLine.obj("event", "error", "where", "create_streams", "error", describe(e)));
            exitSoon(2);
            return;
        }
        for (Map.Entry<String, KafkaStream<byte[], byte[]>> entry : streams.entrySet()) {
            Thread thread = new Thread(() -> iterate(entry.getKey(), entry.getValue()),
                                       "driver-stream-" + entry.getKey());
            streamThreads.add(thread);
            thread.start();
        }
        events.emit(JsonLine.obj("event", "ready", "consumer_id", consumerId, "streams",
                                 new ArrayList<>(streams.keySet())));
        for (Thread thread : streamThreads) {
            thread.join();
        }
    }

    private void iterate(String label, KafkaStream<byte[], byte[]> stream) {
        try {
            for (MessageAndMetadata<byte[], byte[]> m : stream) {
                byte[] key = m.key();
                byte[] value = m.message();
                // The offset the connector will commit for this partition once this message is handed out.
                consumed.put(m.topic() + "/" + m.partition(), m.offset() + 1);
                events.emit(JsonLine.obj("event", "message", "topic", m.topic(), "partition", m.partition(),
                                         "offset", m.offset(), "stream", label,
                                         "key_size", key == null ? -1 : key.length,
                                         "value_size", value == null ? -1 : value.length));
            }
            events.emit(JsonLine.obj("event", "stream_end", "stream", label));
        } catch (RuntimeException e) {
            events.emit(JsonLine.obj("event", "error", "where", "stream " + label, "error", describe(e)));
        }
    }

    private void readCommands() {
        try (BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
            String line;
            while ((line = in.readLine()) != null) {
                String[] words = line.trim().split("\\s+");
                if (words[0].equals("commit")) {
                    commit(words.length > 1 ? words[1] : "");
                } else if (words[0].equals("shutdown")) {
                    exitSoon(0);
                } else if (!words[0].isEmpty()) {
                    events.emit(JsonLine.obj("event", "error", "where", "stdin", "error", "unknown command: " + line));
                }
            }
        } catch (IOException e) {
            events.emit(JsonLine.obj("event", "error", "where", "stdin", "error", describe(e)));
        }
        events.emit(JsonLine.obj("event", "parent_gone"));
        exitSoon(0);
    }

    private void commit(String id) {
        ConsumerConnector c = connector;
        OwnerPoller p = poller;
        if (c == null || p == null) {
            events.emit(JsonLine.obj("event", "error", "where", "commit " + id, "error", "no connector yet"));
            return;
        }
        try {
            c.commitOffsets(); // javaapi: underlying.commitOffsets(true), the KAFKA-1743 compatible call
            Map<String, String> owned = p.readOwned();
            Map<String, Object> mine = new LinkedHashMap<>();
            for (String key : owned.keySet()) {
                if (consumed.containsKey(key)) {
                    mine.put(key, consumed.get(key));
                }
            }
            events.emit(JsonLine.obj("event", "commit", "id", id, "offsets", p.readOffsets(owned.keySet()),
                                     "consumed", mine));
        } catch (RuntimeException e) {
            events.emit(JsonLine.obj("event", "error", "where", "commit " + id, "error", describe(e)));
        }
    }

    /** System.exit runs the shutdown hook; a watchdog halts the JVM should the hook hang. */
    private static void exitSoon(int status) {
        Thread watchdog = new Thread(() -> {
            try {
                Thread.sleep(HALT_AFTER_MS);
            } catch (InterruptedException e) {
                return;
            }
            Runtime.getRuntime().halt(3);
        }, "driver-halt-watchdog");
        watchdog.setDaemon(true);
        watchdog.start();
        System.exit(status);
    }

    private void onShutdown() {
        ConsumerConnector c = connector;
        if (c != null) {
            c.shutdown(); // stops fetchers, ends every stream, commits if auto-commit, closes ZooKeeper
        }
        for (Thread thread : streamThreads) {
            try {
                thread.join(TimeUnit.SECONDS.toMillis(5));
            } catch (InterruptedException e) {
                break;
            }
        }
        OwnerPoller p = poller;
        if (p != null) {
            p.close();
        }
        events.emit(JsonLine.obj("event", "shutdown"));
    }

    /** The connector's own id (generated when consumer.id is unset), from the javaapi wrapper's Scala connector. */
    private String consumerIdOf(ConsumerConnector c) {
        try {
            Field field = c.getClass().getDeclaredField("underlying");
            field.setAccessible(true);
            Object underlying = field.get(c);
            return (String) underlying.getClass().getMethod("consumerIdString").invoke(underlying);
        } catch (ReflectiveOperationException e) {
            String id = props.getProperty("consumer.id");
            if (id == null) {
                throw new IllegalStateException("cannot read the generated consumer id", e);
            }
            return props.getProperty("group.id") + "_" + id;
        }
    }

    static String describe(Throwable t) {
        return t.getClass().getName() + ": " + t.getMessage();
    }

    private static Map<String, Integer> parseTopics(String spec) {
        Map<String, Integer> counts = new LinkedHashMap<>(); // keeps the order given, as a Python dict does
        for (String item : spec.split(",")) {
            String[] kv = item.split("=");
            counts.put(kv[0], Integer.valueOf(kv.length > 1 ? kv[1] : "1"));
        }
        return counts;
    }

    private static Map<String, String> parseArgs(String[] args) {
        Map<String, String> opts = new LinkedHashMap<>();
        for (int i = 0; i < args.length; i += 2) {
            if (!args[i].startsWith("--") || i + 1 >= args.length) {
                throw new IllegalArgumentException("usage: --config FILE (--topics t=n,... | --whitelist RE "
                        + "--streams N | --blacklist RE --streams N) [--events FILE]; bad argument " + args[i]);
            }
            opts.put(args[i].substring(2), args[i + 1]);
        }
        return opts;
    }

    private static String required(Map<String, String> opts, String name) {
        String value = opts.get(name);
        if (value == null) {
            throw new IllegalArgumentException("missing --" + name);
        }
        return value;
    }
}
