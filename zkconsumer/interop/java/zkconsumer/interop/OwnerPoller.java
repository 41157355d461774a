package zkconsumer.interop;

import java.util.Collection;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;

import kafka.utils.ZKStringSerializer$;
import org.I0Itec.zkclient.ZkClient;
import org.I0Itec.zkclient.exception.ZkNoNodeException;

/**
 * What the driven member owns, read from ZooKeeper: the owner nodes /consumers/[group]/owners/[topic]/[partition]
 * whose value is one of this member's thread ids ([consumer id]-[n]). 0.8.2.2 has no rebalance listener API, and
 * its topic registry is a private field that holds no thread ids; the owner nodes are what every peer of the group
 * sees, so they are the state the differential tests compare. Polled every 100 ms on a session of its own, and
 * emitted as an "owned" event whenever the set changes (a failed rebalance attempt may show a claim and its
 * rollback).
 */
final class OwnerPoller implements AutoCloseable {
    private static final long POLL_MS = 100;

    private final ZkClient zk;
    private final String group;
    private final String consumerId;
    private final JsonLine events;
    private final Thread thread;
    private volatile boolean running = true;

    OwnerPoller(Properties props, String consumerId, JsonLine events) {
        int sessionMs = Integer.parseInt(props.getProperty("zookeeper.session.timeout.ms", "6000"));
        this.zk = new ZkClient(props.getProperty("zookeeper.connect"), sessionMs, 30_000, ZKStringSerializer$.MODULE$);
        this.group = props.getProperty("group.id");
        this.consumerId = consumerId;
        this.events = events;
        this.thread = new Thread(this::loop, "driver-owner-poller");
        this.thread.setDaemon(true);
    }

    void start() {
        thread.start();
    }

    private void loop() {
        Map<String, String> last = null;
        while (running) {
            try {
                Map<String, String> now = readOwned();
                if (!now.equals(last)) {
                    events.emit(JsonLine.obj("event", "owned", "partitions", now));
                    last = now;
                }
            } catch (RuntimeException e) {
                if (running) { // a read racing close() is expected at shutdown
                    events.emit(JsonLine.obj("event", "error", "where", "owner poller",
                                             "error", OriginalConsumerDriver.describe(e)));
                }
            }
            try {
                Thread.sleep(POLL_MS);
            } catch (InterruptedException e) {
                return;
            }
        }
    }

    /** "topic/partition" -> thread id, for the owner nodes held by this member's threads. */
    Map<String, String> readOwned() {
        Map<String, String> owned = new TreeMap<>();
        String base = "/consumers/" + group + "/owners";
        for (String topic : children(base)) {
            for (String partition : children(base + "/" + topic)) {
                String owner = zk.readData(base + "/" + topic + "/" + partition, true);
                if (owner != null && isMine(owner)) {
                    owned.put(topic + "/" + partition, owner);
                }
            }
        }
        return owned;
    }

    /** The committed offsets (decimal text in /consumers/[group]/offsets/...) of the given partitions. */
    Map<String, Object> readOffsets(Collection<String> partitions) {
        Map<String, Object> offsets = new TreeMap<>();
        for (String key : partitions) {
            String value = zk.readData("/consumers/" + group + "/offsets/" + key, true);
            offsets.put(key, value == null ? null : Long.valueOf(value));
        }
        return offsets;
    }

    /** [consumer id]-[digits] exactly: another member's id may start with ours ("g_c1" and "g_c1-x"). */
    private boolean isMine(String owner) {
        if (!owner.startsWith(consumerId + "-")) {
            return false;
        }
        String rest = owner.substring(consumerId.length() + 1);
        return !rest.isEmpty() && rest.chars().allMatch(Character::isDigit);
    }

    private List<String> children(String path) {
        try {
            return zk.getChildren(path);
        } catch (ZkNoNodeException e) {
            return Collections.emptyList();
        }
    }

    @Override
    public void close() {
        running = false;
        thread.interrupt();
        try {
            thread.join(2_000);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        zk.close();
    }
}
