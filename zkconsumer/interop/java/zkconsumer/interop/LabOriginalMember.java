package zkconsumer.interop;

import java.io.FileInputStream;
import java.io.IOException;
import java.lang.reflect.Field;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.Consumer;

import kafka.consumer.ConsumerConfig;
import kafka.consumer.KafkaStream;
import kafka.javaapi.consumer.ZookeeperConsumerConnector;
import kafka.message.MessageAndMetadata;
import org.I0Itec.zkclient.ZkClient;
import org.I0Itec.zkclient.ZkConnection;
import org.apache.zookeeper.ZooKeeper;

/**
 * One lab member running Kafka 0.8.2.2's own ZookeeperConsumerConnector (the lab's design "original"), made from a
 * properties file the lab writes: the consumer's Kafka 0.8 keys as they are, plus lab.name, lab.trace (its trace
 * file), lab.topics ("t1=1,t2=1") and lab.fetch (false: the connector is built with enableFetcher = false, the
 * rebalance-only member of --members threads, as ours runs with NoFetchers).
 *
 * It writes what our members write (zkconsumer/lab/members/zk.py), as far as the original has it: member_events from
 * its log lines (LabRebalanceTracker), session ids (the password to its host's control channel only), an assignment
 * record after every successful attempt, one consume record per message handed out (with fetchers), and state closed
 * after shutdown().
 */
final class LabOriginalMember {
    final String name;
    private final Properties consumer = new Properties();
    private final Map<String, Integer> topics = new LinkedHashMap<>();
    private final boolean fetch;
    private final String consumerIdString;
    private final LabTrace trace;
    private final LabRebalanceTracker tracker;
    private final List<Thread> streamThreads = new ArrayList<>();
    private volatile ZookeeperConsumerConnector connector;
    private volatile Object underlying; // the Scala kafka.consumer.ZookeeperConsumerConnector behind the javaapi one

    LabOriginalMember(String propertiesPath, Consumer<Object[]> credentials) throws IOException {
        Properties all = new Properties();
        try (FileInputStream in = new FileInputStream(propertiesPath)) {
            all.load(in);
        }
        for (String key : all.stringPropertyNames()) {
            if (!key.startsWith("lab.")) {
                consumer.setProperty(key, all.getProperty(key));
            }
        }
        name = all.getProperty("lab.name");
        fetch = Boolean.parseBoolean(all.getProperty("lab.fetch", "true"));
        for (String item : all.getProperty("lab.topics").split(",")) {
            String[] kv = item.split("=");
            topics.put(kv[0], Integer.valueOf(kv[1]));
        }
        // ZookeeperConsumerConnector.scala: consumerIdString = groupId + "_" + consumer.id when consumer.id is set.
        consumerIdString = consumer.getProperty("group.id") + "_" + consumer.getProperty("consumer.id");
        trace = new LabTrace(all.getProperty("lab.trace"), name);
        tracker = new LabRebalanceTracker(trace, this::session, credentials, this::writeAssignment);
    }

    /** Connect, register and run the first rebalance (inside createMessageStreams); throws if it fails. */
    void start() throws ReflectiveOperationException {
        LabRebalanceAppender.register(consumerIdString, tracker); // before the constructor: it logs too
        ZookeeperConsumerConnector c = new ZookeeperConsumerConnector(new ConsumerConfig(consumer), fetch);
        Field field = c.getClass().getDeclaredField("underlying");
        field.setAccessible(true);
        underlying = field.get(c);
        connector = c;
        tracker.reportSession();
        Map<String, List<KafkaStream<byte[], byte[]>>> streams;
        try {
            streams = c.createMessageStreams(topics);
        } catch (RuntimeException e) {
            if (e.getClass().getSimpleName().equals("ConsumerRebalanceFailedException")) {
                tracker.rebalanceFailed(e);
            }
            throw e;
        }
        if (!fetch) {
            return;
        }
        for (Map.Entry<String, List<KafkaStream<byte[], byte[]>>> entry : streams.entrySet()) {
            for (int i = 0; i < entry.getValue().size(); i++) {
                KafkaStream<byte[], byte[]> stream = entry.getValue().get(i);
                Thread thread = new Thread(() -> drain(stream), name + "-lab-stream-" + entry.getKey() + "-" + i);
                thread.setDaemon(true);
                streamThreads.add(thread);
                thread.start();
            }
        }
    }

    /** The graceful leave: connector.shutdown() (stops fetchers, commits if auto-commit, closes the session). */
    void stop() {
        tracker.leaving = true;
        ZookeeperConsumerConnector c = connector;
        try {
            if (c != null) {
                c.shutdown(); // ends every stream: sendShutdownToAllQueues
            }
            for (Thread thread : streamThreads) {
                thread.join(5_000);
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        } finally {
            LabRebalanceAppender.unregister(consumerIdString, tracker);
            trace.close();
        }
    }

    private void drain(KafkaStream<byte[], byte[]> stream) {
        try {
            for (MessageAndMetadata<byte[], byte[]> m : stream) {
                // Not batched: a member killed -9 must have reported every message it handed out (members/zk.py).
                trace.write("consume", "topic", m.topic(), "partition", m.partition(), "first_offset", m.offset(),
                            "last_offset", m.offset(), "count", 1);
            }
        } catch (RuntimeException e) {
            if (!tracker.leaving) {
                trace.event("connection", "state", "stream error", "error", e.toString());
            }
        }
    }

    /**
     * {session id, password as hex} of the connector's ZooKeeper session (null while it has none), by reflection along
     * ZookeeperConsumerConnector.scala's `private var zkClient: ZkClient` (compiled to the field
     * kafka$consumer$ZookeeperConsumerConnector$$zkClient), zkclient 0.3's `protected IZkConnection _connection` of
     * ZkClient, and ZkConnection.getZookeeper(). Null once the connector has closed it.
     */
    private Object[] session() {
        Object u = underlying;
        if (u == null) {
            return null;
        }
        try {
            Field zkField = u.getClass().getDeclaredField("kafka$consumer$ZookeeperConsumerConnector$$zkClient");
            zkField.setAccessible(true);
            ZkClient client = (ZkClient) zkField.get(u);
            if (client == null) {
                return null;
            }
            Field connection = ZkClient.class.getDeclaredField("_connection");
            connection.setAccessible(true);
            ZooKeeper zk = ((ZkConnection) connection.get(client)).getZookeeper();
            if (zk == null || zk.getSessionId() == 0) {
                return null; // no session yet: zkclient has made a new ZooKeeper that is still connecting
            }
            StringBuilder hex = new StringBuilder();
            for (byte b : zk.getSessionPasswd()) {
                hex.append(String.format("%02x", b));
            }
            return new Object[] {zk.getSessionId(), hex.toString()};
        } catch (ReflectiveOperationException | ClassCastException e) {
            throw new IllegalStateException("cannot read the original connector's ZooKeeper session", e);
        }
    }

    /**
     * What the member owns after a successful attempt: the keys of the connector's topicRegistry (a
     * kafka.utils.Pool[String, Pool[Int, PartitionTopicInfo]], replaced by the attempt's registry just before the
     * "selected partitions" line; Pool keeps its entries in the ConcurrentHashMap field kafka$utils$Pool$$pool).
     */
    private void writeAssignment() {
        Object u = underlying;
        if (u == null) {
            return;
        }
        TreeSet<String> owned = new TreeSet<>();
        try {
            Object registry = u.getClass().getMethod("getTopicRegistry").invoke(u);
            for (Map.Entry<?, ?> topic : poolEntries(registry).entrySet()) {
                for (Object partition : poolEntries(topic.getValue()).keySet()) {
                    owned.add(topic.getKey() + "/" + partition);
                }
            }
        } catch (ReflectiveOperationException e) {
            throw new IllegalStateException("cannot read the original connector's topic registry", e);
        }
        trace.write("assignment", "partitions", new ArrayList<>(owned), "generation", null);
    }

    private static ConcurrentHashMap<?, ?> poolEntries(Object pool) throws ReflectiveOperationException {
        Field field = pool.getClass().getDeclaredField("kafka$utils$Pool$$pool");
        field.setAccessible(true);
        return (ConcurrentHashMap<?, ?>) field.get(pool);
    }
}
