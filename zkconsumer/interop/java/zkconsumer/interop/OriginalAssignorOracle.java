package zkconsumer.interop;

import java.io.BufferedReader;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

import kafka.common.TopicAndPartition;
import kafka.consumer.AssignmentContext;
import kafka.consumer.ConsumerThreadId;
import kafka.consumer.PartitionAssignor;
import kafka.consumer.PartitionAssignor$;
import kafka.utils.ZKStringSerializer$;
import org.I0Itec.zkclient.ZkClient;
import org.I0Itec.zkclient.exception.ZkNoNodeException;
import scala.Tuple2;

/**
 * The original 0.8.2.2 assignors run on groups written into ZooKeeper, many cases in one JVM (a JVM start costs
 * seconds; a case costs milliseconds).
 *
 * Input, one case per stdin line: {@code CASE_ID STRATEGY EXCLUDE_INTERNAL ZOOKEEPER_CONNECT GROUP}, where the
 * connect string carries the case's chroot (each case has its own /brokers/topics). For every member registered
 * under /consumers/GROUP/ids the oracle does what 0.8.2.2's rebalance does (ZookeeperConsumerConnector.scala):
 * {@code PartitionAssignor.createInstance(strategy).assign(new AssignmentContext(group, consumerId,
 * excludeInternalTopics, zkClient))}, so registrations, wildcards and topic znodes are read by the original code.
 *
 * Output, one JSON line per case: {"case": ID, "consumers": {CONSUMER_ID: {"assignment": {"topic/partition":
 * THREAD_ID}} or {"error": "CLASS: MESSAGE"}}}.
 */
public final class OriginalAssignorOracle {
    private static final int ZK_TIMEOUT_MS = 30_000;

    private OriginalAssignorOracle() {
    }

    public static void main(String[] args) throws IOException {
        JsonLine out = new JsonLine(new PrintStream(new FileOutputStream(FileDescriptor.out), false, "UTF-8"));
        System.setOut(System.err); // keep stray library output off the result channel
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            String[] f = line.trim().split("\\s+");
            if (f.length != 5) {
                out.emit(JsonLine.obj("case", null, "error", "bad input line: " + line));
                continue;
            }
            out.emit(JsonLine.obj("case", f[0], "consumers", runCase(f[1], Boolean.parseBoolean(f[2]), f[3], f[4])));
        }
    }

    private static Map<String, Object> runCase(String strategy, boolean excludeInternal, String connect,
                                               String group) {
        Map<String, Object> result = new TreeMap<>();
        PartitionAssignor assignor = PartitionAssignor$.MODULE$.createInstance(strategy);
        ZkClient zk = new ZkClient(connect, ZK_TIMEOUT_MS, ZK_TIMEOUT_MS, ZKStringSerializer$.MODULE$);
        try {
            for (String consumerId : members(zk, group)) {
                try {
                    AssignmentContext ctx = new AssignmentContext(group, consumerId, excludeInternal, zk);
                    result.put(consumerId, JsonLine.obj("assignment", toJava(assignor.assign(ctx))));
                } catch (RuntimeException | AssertionError e) { // Scala's require and assert: a failed attempt
                    result.put(consumerId, JsonLine.obj("error", OriginalConsumerDriver.describe(e)));
                }
            }
        } finally {
            zk.close();
        }
        return result;
    }

    private static List<String> members(ZkClient zk, String group) {
        try {
            List<String> ids = new ArrayList<>(zk.getChildren("/consumers/" + group + "/ids"));
            Collections.sort(ids);
            return ids;
        } catch (ZkNoNodeException e) {
            return Collections.emptyList();
        }
    }

    private static Map<String, Object> toJava(scala.collection.Map<TopicAndPartition, ConsumerThreadId> decision) {
        Map<String, Object> assignment = new TreeMap<>();
        scala.collection.Iterator<Tuple2<TopicAndPartition, ConsumerThreadId>> it = decision.iterator();
        while (it.hasNext()) {
            Tuple2<TopicAndPartition, ConsumerThreadId> entry = it.next();
            assignment.put(entry._1().topic() + "/" + entry._1().partition(), entry._2().toString());
        }
        return assignment;
    }
}
