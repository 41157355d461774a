package zkconsumer.interop;

import java.io.BufferedReader;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.lang.management.ManagementFactory;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.consumer.CloseOptions;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * One member of a KIP-848 consumer group run by Kafka's own Java consumer (kafka-clients 4.x with
 * {@code group.protocol=consumer}): the reference client of the broker-side consumer group protocol, for
 * differential tests against librdkafka and the lab's members.
 *
 * <pre>
 * ModernConsumerDriver --bootstrap HOST:PORT --group G --topics t1,t2 --client-id C
 *     [--assignor uniform|range] [--auto-commit true|false] [--property key=value]...
 * </pre>
 *
 * Events, one JSON object per line on stdout, each with "event" and "ts" (epoch ms); partitions are
 * "topic/partition" strings, sorted:
 * starting (pid, jvm_uptime_ms), subscribed (kafka_clients version), assigned (partitions: the whole assignment,
 * added, epoch, member_id), revoked (partitions, remaining, epoch, member_id), lost (likewise), ready (after the
 * first onPartitionsAssigned), epoch (epoch, member_id: whenever groupMetadata() changes between polls), consumed
 * (topic, partition, first_offset, last_offset, count: one per partition per poll), committed (id, offsets read
 * back from the coordinator), status (assignment as the consumer reports it, epoch, member_id), error (where,
 * error), parent_gone, closed (close_ms).
 *
 * Commands on stdin, one per line: "commit ID", "status", "stop". End of stdin means the parent is gone and
 * stops the member, so it never outlives the test that started it. SIGTERM closes the consumer too: close() is
 * the protocol's leave (a heartbeat with member epoch -1), after onPartitionsRevoked for what it owned.
 *
 * The epoch is {@code consumer.groupMetadata().generationId()}: under the consumer protocol the consumer's
 * membership manager reports every member epoch the coordinator answers to the consumer, which stores it as the
 * group metadata's generation (MemberStateListener.onMemberEpochUpdated, implemented by AsyncKafkaConsumer in
 * clients/src/main/java/org/apache/kafka/clients/consumer/internals/AsyncKafkaConsumer.java).
 */
public final class ModernConsumerDriver {
    private static final Duration POLL = Duration.ofMillis(100);
    private static final Duration CLOSE_TIMEOUT = Duration.ofSeconds(30);
    // The hook waits for the poll loop's close a little longer than close() may take, then lets the JVM end.
    private static final long HOOK_WAIT_MS = CLOSE_TIMEOUT.toMillis() + 5_000;
    private static final Comparator<TopicPartition> ORDER =
            Comparator.comparing(TopicPartition::topic).thenComparingInt(TopicPartition::partition);

    private final JsonLine events;
    private final Properties props;
    private final List<String> topics;
    private final LinkedBlockingQueue<String> commands = new LinkedBlockingQueue<>();
    private final CountDownLatch closed = new CountDownLatch(1);
    private final Set<TopicPartition> owned = new TreeSet<>(ORDER);
    private volatile boolean stopping;
    private volatile boolean hookRunning;
    private KafkaConsumer<byte[], byte[]> consumer;
    private boolean ready;
    private int lastEpoch = Integer.MIN_VALUE;
    private String lastMemberId = "";

    private ModernConsumerDriver(Properties props, List<String> topics, JsonLine events) {
        this.props = props;
        this.topics = topics;
        this.events = events;
    }

    public static void main(String[] args) throws Exception {
        PrintStream eventOut = new PrintStream(new FileOutputStream(FileDescriptor.out), false, "UTF-8");
        // Anything a library prints on System.out would corrupt the event channel: send it to stderr instead.
        System.setOut(System.err);
        JsonLine events = new JsonLine(eventOut);
        Properties props = new Properties();
        List<String> topics;
        try {
            topics = configure(args, props);
        } catch (IllegalArgumentException e) {
            events.emit(JsonLine.obj("event", "error", "where", "args", "error", e.getMessage()));
            System.exit(2);
            return;
        }
        int status = new ModernConsumerDriver(props, topics, events).run();
        if (status != 0) {
            System.exit(status);
        }
    }

    /** The consumer's properties from the arguments; the subscribed topics are returned. */
    private static List<String> configure(String[] args, Properties props) {
        Map<String, String> opts = new LinkedHashMap<>();
        List<String> extra = new ArrayList<>();
        for (int i = 0; i < args.length; i += 2) {
            if (!args[i].startsWith("--") || i + 1 >= args.length) {
                throw new IllegalArgumentException("usage: --bootstrap B --group G --topics T1,T2 --client-id C "
                        + "[--assignor A] [--auto-commit true|false] [--property k=v]...; got " + Arrays.toString(args));
            }
            if (args[i].equals("--property")) {
                extra.add(args[i + 1]);
            } else {
                opts.put(args[i].substring(2), args[i + 1]);
            }
        }
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, required(opts, "bootstrap"));
        props.put(ConsumerConfig.GROUP_ID_CONFIG, required(opts, "group"));
        props.put(ConsumerConfig.CLIENT_ID_CONFIG, required(opts, "client-id"));
        props.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, "consumer");
        props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, opts.getOrDefault("auto-commit", "false"));
        props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        if (opts.containsKey("assignor")) {
            props.put(ConsumerConfig.GROUP_REMOTE_ASSIGNOR_CONFIG, opts.get("assignor"));
        }
        for (String kv : extra) {
            int eq = kv.indexOf('=');
            if (eq <= 0) {
                throw new IllegalArgumentException("--property wants key=value, got " + kv);
            }
            props.put(kv.substring(0, eq), kv.substring(eq + 1));
        }
        List<String> topics = new ArrayList<>();
        for (String topic : required(opts, "topics").split(",")) {
            if (!topic.isEmpty()) {
                topics.add(topic);
            }
        }
        return topics;
    }

    private static String required(Map<String, String> opts, String key) {
        String value = opts.get(key);
        if (value == null || value.isEmpty()) {
            throw new IllegalArgumentException("missing --" + key);
        }
        return value;
    }

    private int run() {
        events.emit(JsonLine.obj("event", "starting", "pid", ProcessHandle.current().pid(), "jvm_uptime_ms",
                                 ManagementFactory.getRuntimeMXBean().getUptime()));
        Runtime.getRuntime().addShutdownHook(new Thread(this::onShutdown, "modern-driver-shutdown"));
        // A daemon: it blocks in readLine() until the parent writes or goes, and must not keep the JVM alive.
        Thread stdin = new Thread(this::readCommands, "modern-driver-stdin");
        stdin.setDaemon(true);
        stdin.start();
        int status = 0;
        try {
            consumer = new KafkaConsumer<>(props);
        } catch (RuntimeException e) {
            // A bad property or an unknown assignor name: say why, and do not linger.
            events.emit(JsonLine.obj("event", "error", "where", "create", "error", describe(e)));
            closed.countDown();
            return 1;
        }
        try {
            consumer.subscribe(topics, new Listener());
            events.emit(JsonLine.obj("event", "subscribed", "topics", topics, "kafka_clients",
                                     clientsVersion(), "group_protocol",
                                     props.getProperty(ConsumerConfig.GROUP_PROTOCOL_CONFIG), "assignor",
                                     props.getProperty(ConsumerConfig.GROUP_REMOTE_ASSIGNOR_CONFIG)));
            while (!stopping) {
                ConsumerRecords<byte[], byte[]> records = consumer.poll(POLL);
                report(records);
                noteEpoch();
                String command;
                while (!stopping && (command = commands.poll()) != null) {
                    execute(command);
                }
            }
        } catch (RuntimeException e) {
            // The poll loop's own failures (the broker refusing the protocol, a fenced member that cannot
            // rejoin) end the member: the test sees the reason, then the close.
            events.emit(JsonLine.obj("event", "error", "where", "poll", "error", describe(e)));
            status = 1;
        } finally {
            long begin = System.nanoTime();
            try {
                // An explicit leave (member epoch -1), which is also what DEFAULT does for a member without a
                // group.instance.id: the test relies on it, so it is not left to a default.
                consumer.close(CloseOptions.timeout(CLOSE_TIMEOUT)
                        .withGroupMembershipOperation(CloseOptions.GroupMembershipOperation.LEAVE_GROUP));
            } catch (RuntimeException e) {
                events.emit(JsonLine.obj("event", "error", "where", "close", "error", describe(e)));
            }
            events.emit(JsonLine.obj("event", "closed", "close_ms",
                                     TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - begin)));
            closed.countDown();
        }
        // System.exit inside a shutdown already under way would block for ever: the hook ends the JVM then.
        return hookRunning ? 0 : status;
    }

    private void report(ConsumerRecords<byte[], byte[]> records) {
        if (records.isEmpty()) {
            return;
        }
        List<TopicPartition> partitions = new ArrayList<>(records.partitions());
        partitions.sort(ORDER);
        for (TopicPartition tp : partitions) {
            List<ConsumerRecord<byte[], byte[]>> batch = records.records(tp);
            events.emit(JsonLine.obj("event", "consumed", "topic", tp.topic(), "partition", tp.partition(),
                                     "first_offset", batch.get(0).offset(),
                                     "last_offset", batch.get(batch.size() - 1).offset(), "count", batch.size()));
        }
    }

    /** An "epoch" event when the member epoch or id changed since the last look, callbacks or not. */
    private void noteEpoch() {
        ConsumerGroupMetadata metadata = consumer.groupMetadata();
        if (metadata.generationId() != lastEpoch || !metadata.memberId().equals(lastMemberId)) {
            lastEpoch = metadata.generationId();
            lastMemberId = metadata.memberId();
            events.emit(JsonLine.obj("event", "epoch", "epoch", lastEpoch, "member_id", lastMemberId));
        }
    }

    private void execute(String line) {
        String[] words = line.trim().split("\\s+");
        switch (words[0]) {
            case "commit":
                commit(words.length > 1 ? words[1] : "");
                break;
            case "status":
                events.emit(JsonLine.obj("event", "status", "assignment", keys(consumer.assignment()), "epoch",
                                         consumer.groupMetadata().generationId(), "member_id",
                                         consumer.groupMetadata().memberId()));
                break;
            case "stop":
                stopping = true;
                break;
            case "":
                break;
            default:
                events.emit(JsonLine.obj("event", "error", "where", "stdin", "error", "unknown command: " + line));
        }
    }

    private void commit(String id) {
        try {
            consumer.commitSync();
            Map<String, Object> offsets = new LinkedHashMap<>();
            Set<TopicPartition> mine = new TreeSet<>(ORDER);
            mine.addAll(consumer.assignment());
            Map<TopicPartition, OffsetAndMetadata> stored = consumer.committed(mine);
            for (TopicPartition tp : mine) {
                OffsetAndMetadata offset = stored.get(tp);
                offsets.put(key(tp), offset == null ? null : offset.offset());
            }
            events.emit(JsonLine.obj("event", "committed", "id", id, "offsets", offsets));
        } catch (RuntimeException e) {
            events.emit(JsonLine.obj("event", "error", "where", "commit " + id, "error", describe(e)));
        }
    }

    private void readCommands() {
        try (BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
            String line;
            while ((line = in.readLine()) != null) {
                if (line.trim().equals("stop")) {
                    // Set here too: a commit queued before it must not delay the stop behind a slow poll.
                    stopping = true;
                }
                commands.add(line);
            }
        } catch (IOException e) {
            events.emit(JsonLine.obj("event", "error", "where", "stdin", "error", describe(e)));
        }
        events.emit(JsonLine.obj("event", "parent_gone"));
        stopping = true;
    }

    /** SIGTERM (or any exit): the poll loop closes the consumer, which is not thread-safe; wait for it here. */
    private void onShutdown() {
        hookRunning = true;
        stopping = true;
        try {
            closed.await(HOOK_WAIT_MS, TimeUnit.MILLISECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    private Map<String, Object> membership() {
        ConsumerGroupMetadata metadata = consumer.groupMetadata();
        return JsonLine.obj("epoch", metadata.generationId(), "member_id", metadata.memberId());
    }

    private void callback(String event, Collection<TopicPartition> partitions, String listName) {
        Map<String, Object> line = JsonLine.obj("event", event, listName, keys(partitions));
        line.put(listName.equals("added") ? "partitions" : "remaining", keys(owned));
        line.putAll(membership());
        events.emit(line);
    }

    /** The listener keeps the whole assignment from the incremental sets the consumer protocol hands it. */
    private final class Listener implements ConsumerRebalanceListener {
        @Override
        public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
            owned.addAll(partitions);
            callback("assigned", partitions, "added");
            if (!ready) {
                ready = true;
                Map<String, Object> line = JsonLine.obj("event", "ready");
                line.putAll(membership());
                events.emit(line);
            }
        }

        @Override
        public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
            owned.removeAll(partitions);
            callback("revoked", partitions, "partitions");
        }

        @Override
        public void onPartitionsLost(Collection<TopicPartition> partitions) {
            owned.removeAll(partitions);
            callback("lost", partitions, "partitions");
        }
    }

    private static List<String> keys(Collection<TopicPartition> partitions) {
        List<TopicPartition> sorted = new ArrayList<>(partitions);
        sorted.sort(ORDER);
        List<String> out = new ArrayList<>();
        for (TopicPartition tp : sorted) {
            out.add(key(tp));
        }
        return out;
    }

    private static String key(TopicPartition tp) {
        return tp.topic() + "/" + tp.partition();
    }

    /** The version kafka-clients' jar declares (what its AppInfoParser reads, an internal class since 4.0). */
    private static String clientsVersion() {
        Properties version = new Properties();
        try (InputStream in = KafkaConsumer.class.getResourceAsStream("/kafka/kafka-version.properties")) {
            if (in != null) {
                version.load(in);
            }
        } catch (IOException e) {
            return "unknown: " + e.getMessage();
        }
        return version.getProperty("version", "unknown");
    }

    static String describe(Throwable t) {
        return t.getClass().getName() + ": " + t.getMessage();
    }
}
