package zkconsumer.interop;

import java.io.FileOutputStream;
import java.io.IOException;
import java.io.PrintStream;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * One lab member's trace file (docs/traces.md, schema version 1): every line a JSON object with v, type, ts (epoch
 * seconds), design "original" and member, flushed as written, so a member killed -9 has lost nothing it reported.
 * The Python side reads these records exactly as it reads our own members' (zkconsumer/lab/drivers/original.py).
 */
final class LabTrace implements AutoCloseable {
    private final PrintStream out;
    private final String member;
    private long seq;
    private boolean closed;

    LabTrace(String path, String member) throws IOException {
        this.out = new PrintStream(new FileOutputStream(path, true), false, "UTF-8");
        this.member = member;
    }

    /** A record of `type` with the given fields (keys and values alternating). */
    synchronized void write(String type, Object... fields) {
        if (closed) {
            return; // a late log line after leave(): the member's file is complete
        }
        Map<String, Object> record = new LinkedHashMap<>();
        record.put("v", 1);
        record.put("type", type);
        record.put("ts", System.currentTimeMillis() / 1000.0);
        record.put("design", "original");
        record.put("member", member);
        for (int i = 0; i + 1 < fields.length; i += 2) {
            record.put((String) fields[i], fields[i + 1]);
        }
        out.println(JsonLine.encode(record));
        out.flush();
    }

    /** A member_event of `kind` (rebalance/events.py's EventKind names), numbered per member like ours. */
    synchronized void event(String kind, Object... fields) {
        Object[] all = new Object[fields.length + 4];
        all[0] = "kind";
        all[1] = kind;
        all[2] = "seq";
        all[3] = seq++;
        System.arraycopy(fields, 0, all, 4, fields.length);
        write("member_event", all);
    }

    @Override
    public synchronized void close() {
        closed = true;
        out.close();
    }
}
