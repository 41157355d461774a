package zkconsumer.interop;

import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

import org.apache.log4j.AppenderSkeleton;
import org.apache.log4j.spi.LoggingEvent;
import org.apache.log4j.spi.ThrowableInformation;

/**
 * Turns the log lines of Kafka 0.8.2.2's ZookeeperConsumerConnector into structured lab events, inside the JVM.
 *
 * 0.8.2.2 has no rebalance listener: the boundaries of its rebalances and attempts exist only as log statements of
 * the logger kafka.consumer.ZookeeperConsumerConnector (the lab's log4j configuration attaches this appender to it,
 * at DEBUG). Every one of them is prefixed with the connector's logIdent, "[" + consumerIdString + "], "
 * (ZookeeperConsumerConnector.scala: `this.logIdent = ...`; kafka/utils/Logging.scala `msgWithLogIdent`), also
 * those of its inner listeners, which log through the outer connector's Logging. The prefix routes each line to the
 * member it belongs to (a member host runs many connectors in one JVM); lines of unknown members are ignored. What
 * each line means is in LabRebalanceTracker and docs/lab.md ("The original as a lab member").
 */
public final class LabRebalanceAppender extends AppenderSkeleton {
    private static final Map<String, LabRebalanceTracker> TRACKERS = new ConcurrentHashMap<>();

    static void register(String consumerIdString, LabRebalanceTracker tracker) {
        TRACKERS.put(consumerIdString, tracker);
    }

    static void unregister(String consumerIdString, LabRebalanceTracker tracker) {
        TRACKERS.remove(consumerIdString, tracker);
    }

    @Override
    protected void append(LoggingEvent event) {
        String message = event.getRenderedMessage();
        if (message == null || !message.startsWith("[")) {
            return;
        }
        int end = message.indexOf("], ");
        if (end < 0) {
            return;
        }
        LabRebalanceTracker tracker = TRACKERS.get(message.substring(1, end));
        if (tracker == null) {
            return;
        }
        ThrowableInformation info = event.getThrowableInformation();
        try {
            tracker.onLog(message.substring(end + 3), info == null ? null : info.getThrowable());
        } catch (RuntimeException e) { // reporting must never break the connector it observes
            errorHandler.error("lab event for " + message + " failed: " + e);
        }
    }

    @Override
    public void close() {
        closed = true;
    }

    @Override
    public boolean requiresLayout() {
        return false;
    }
}
