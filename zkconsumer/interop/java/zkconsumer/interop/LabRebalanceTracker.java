package zkconsumer.interop;

import java.util.function.Consumer;
import java.util.function.Supplier;

/**
 * One original member's rebalances as lab events (rebalance/events.py EventKind names), from the log lines of
 * Kafka 0.8.2.2's core/src/main/scala/kafka/consumer/ZookeeperConsumerConnector.scala (line numbers at tag 0.8.2.2;
 * text after the logIdent prefix, which LabRebalanceAppender strips):
 *
 * <pre>
 * 249  info  "begin registering consumer ID in ZK"             state registering
 * 256  info  "end registering consumer ID in ZK"               registered (session)
 * 483  info  "ZK expired; release old broker ... consumer ID"   session_expired, session_renewed (new session)
 * 499  info  "Topic info for path P changed to ..."            trigger (reason topic)
 * 603  info  "begin rebalancing consumer ID try #i"            i = 0: rebalance_begin; state rebalancing, attempt_begin
 * 577  debug "Consumer ID releasing /consumers/g/owners/t/p"    release; after this attempt's claims began: rollback
 * 759  info  "Consumer ID selected partitions : ..."           the attempt succeeded (only reached after every claim
 *                                                             held and topicRegistry was replaced): assignment
 * 778  info  "THREAD successfully owned partition p for topic t" claim ok
 * 784  info  "waiting for the partition ownership to be deleted: p" claim not ok (a conflict; the line has no topic)
 * 644  warn  "no brokers found when trying to rebalance."      result no_brokers (rebalance returns true)
 * 615  info  "exception during rebalance " + throwable        result error
 * 617  info  "end rebalancing consumer ID try #i"             attempt_end: result ok | no_brokers | error | conflict
 *                                                             | stopped (rebalance() returned false while shutting
 *                                                             down); ok and no_brokers end the rebalance: state owning
 * 553  error "error during syncedRebalance" + ConsumerRebalanceFailedException ("ID can't rebalance after N retries",
 *            line 633): rebalance_end failed, rebalance_failed, state failed
 * 187  info  "ZKConsumerConnector shutting down"              state closed once shutdown() completed (213)
 * </pre>
 *
 * The initial rebalance runs inside createMessageStreams, where the retries-exhausted exception is thrown to the
 * caller instead of logged; LabOriginalMember reports it through {@link #rebalanceFailed}.
 */
final class LabRebalanceTracker {
    private final LabTrace trace;
    private final Supplier<Object[]> session; // {id, password hex}, or null before the connector exists
    // Where a new session's {id, password hex} goes: the host's control channel (LabOriginalHost's replies). The
    // password never goes into the trace: only the driver needs it, to force an expiry (zk_driver.ZkDriver.expire).
    private final Consumer<Object[]> credentials;
    private final Runnable assignment; // writes the member's assignment record from the connector's topicRegistry
    private String state = "created";
    private Object lastSession;
    private int rebalances;
    private int attempt = -1;
    private boolean claiming;
    private boolean conflict;
    private boolean noBrokers;
    private boolean selected;
    private String error;
    private long rebalanceStartMs;
    volatile boolean leaving;

    LabRebalanceTracker(LabTrace trace, Supplier<Object[]> session, Consumer<Object[]> credentials,
                        Runnable assignment) {
        this.trace = trace;
        this.session = session;
        this.credentials = credentials;
        this.assignment = assignment;
    }

    synchronized void onLog(String text, Throwable thrown) {
        if (text.startsWith("begin rebalancing consumer ")) {
            beginAttempt(Integer.parseInt(text.substring(text.lastIndexOf('#') + 1).trim()));
        } else if (text.startsWith("end rebalancing consumer ")) {
            endAttempt();
        } else if (text.startsWith("Consumer ") && text.contains(" releasing ")) {
            String[] path = text.substring(text.indexOf(" releasing ") + 11).trim().split("/");
            String topic = path[path.length - 2];
            int partition = Integer.parseInt(path[path.length - 1]);
            trace.event(claiming ? "rollback" : "release", "topic", topic, "partition", partition);
        } else if (text.contains(" successfully owned partition ")) {
            claiming = true;
            String thread = text.substring(0, text.indexOf(" successfully owned partition "));
            String rest = text.substring(text.indexOf(" successfully owned partition ") + 30);
            int partition = Integer.parseInt(rest.substring(0, rest.indexOf(' ')));
            String topic = rest.substring(rest.indexOf(" for topic ") + 11);
            trace.event("claim", "topic", topic, "partition", partition, "thread", thread, "ok", true);
        } else if (text.startsWith("waiting for the partition ownership to be deleted: ")) {
            claiming = true;
            conflict = true;
            int partition = Integer.parseInt(text.substring(text.lastIndexOf(' ') + 1).trim());
            trace.event("claim", "topic", null, "partition", partition, "ok", false);
        } else if (text.startsWith("Consumer ") && text.contains(" selected partitions : ")) {
            selected = true;
            assignment.run();
        } else if (text.startsWith("no brokers found when trying to rebalance")) {
            noBrokers = true;
        } else if (text.startsWith("exception during rebalance")) {
            error = thrown == null ? text : thrown.toString();
        } else if (text.startsWith("error during syncedRebalance") && thrown != null
                && thrown.getClass().getSimpleName().equals("ConsumerRebalanceFailedException")) {
            rebalanceFailed(thrown);
        } else if (text.startsWith("begin registering consumer ")) {
            setState("registering", "reason", "registration");
        } else if (text.startsWith("end registering consumer ")) {
            trace.event("registered", "session", sessionId());
        } else if (text.startsWith("ZK expired;")) {
            trace.event("session_expired");
            reportSession();
            trace.event("session_renewed", "session", sessionId());
        } else if (text.startsWith("Topic info for path ")) {
            trace.event("trigger", "reason", "topic partitions changed");
        } else if (text.startsWith("ZKConsumerConnector shutdown completed")) {
            setState("closed", "reason", "shutdown");
        }
    }

    synchronized void rebalanceFailed(Throwable thrown) {
        trace.event("rebalance_end", "rebalance", rebalances, "result", "failed", "attempts", attempt + 1,
                    "duration_ms", System.currentTimeMillis() - rebalanceStartMs, "error", thrown.getMessage());
        setState("failed", "reason", "rebalance");
        trace.event("rebalance_failed", "error", String.valueOf(thrown.getMessage()));
    }

    /** The connector's ZooKeeper session, written whenever it is new (at start and after an expiry). */
    synchronized void reportSession() {
        Object[] now = session.get();
        if (now != null && !now[0].equals(lastSession)) {
            lastSession = now[0];
            trace.event("session", "session", now[0]);
            credentials.accept(now);
        }
    }

    private void beginAttempt(int number) {
        reportSession();
        if (number == 0) {
            rebalances++;
            rebalanceStartMs = System.currentTimeMillis();
            trace.event("rebalance_begin", "rebalance", rebalances);
        }
        attempt = number;
        claiming = conflict = noBrokers = selected = false;
        error = null;
        setState("rebalancing", "attempt", number);
        trace.event("attempt_begin", "rebalance", rebalances, "attempt", number);
    }

    private void endAttempt() {
        String result = error != null ? "error" : noBrokers ? "no_brokers" : selected ? "ok"
                : conflict ? "conflict" : leaving ? "stopped" : "error";
        trace.event("attempt_end", "rebalance", rebalances, "attempt", attempt, "result", result, "error", error);
        if (result.equals("ok") || result.equals("no_brokers")) {
            trace.event("rebalance_end", "rebalance", rebalances, "result", "ok", "attempts", attempt + 1,
                        "duration_ms", System.currentTimeMillis() - rebalanceStartMs);
            setState("owning", "reason", "rebalance");
        }
    }

    private Object sessionId() {
        Object[] now = session.get();
        return now == null ? null : now[0];
    }

    private void setState(String next, Object... extra) {
        Object[] fields = new Object[extra.length + 4];
        fields[0] = "state";
        fields[1] = next;
        fields[2] = "previous";
        fields[3] = state;
        System.arraycopy(extra, 0, fields, 4, extra.length);
        state = next;
        trace.event("state", fields);
    }
}
