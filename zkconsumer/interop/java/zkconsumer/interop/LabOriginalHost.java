package zkconsumer.interop;

import java.io.BufferedReader;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;

/**
 * A JVM running lab members of design "original" (LabOriginalMember), driven by zkconsumer/lab/drivers/original.py:
 * one member per JVM for --members processes (so SIGKILL, SIGSTOP and SIGTERM reach exactly that member), or up to
 * a few dozen rebalance-only members for --members threads, as zk_member.MemberHost hosts ours.
 *
 * <pre>
 * LabOriginalHost NAME
 * </pre>
 *
 * Commands, one per line on stdin: "join NAME PROPERTIES_FILE", "leave NAME", "stop". Replies, one JSON object per
 * line on stdout: {"name", "event": "started" | "failed" | "left", "error"}, {"name", "event": "session", "session",
 * "password"} whenever a member has a new ZooKeeper session (what a forced expiry needs; nowhere else), and
 * {"event": "stopped"} last. The end of
 * stdin means the lab is gone (even killed -9): every member leaves and the JVM exits, so none outlives it. SIGTERM
 * runs the same leave in the shutdown hook: the process-mode "leave" is a real connector.shutdown().
 */
public final class LabOriginalHost {
    private static final long STOP_WAIT_MS = 15_000;
    private static final long HALT_AFTER_MS = 30_000; // a shutdown that hangs must not keep an orphan alive

    private final JsonLine replies;
    private final Map<String, LabOriginalMember> members = new ConcurrentHashMap<>();
    private final List<Thread> workers = new ArrayList<>();

    private LabOriginalHost(JsonLine replies) {
        this.replies = replies;
    }

    public static void main(String[] args) throws Exception {
        PrintStream out = new PrintStream(new FileOutputStream(FileDescriptor.out), false, "UTF-8");
        System.setOut(System.err); // a library printing on System.out must not corrupt the reply channel
        LabOriginalHost host = new LabOriginalHost(new JsonLine(out));
        Runtime.getRuntime().addShutdownHook(new Thread(host::stopAll, "lab-host-shutdown"));
        try (BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
            String line;
            while ((line = in.readLine()) != null) {
                String[] words = line.trim().split(" ", 3);
                if (words[0].equals("join") && words.length == 3) {
                    host.spawn("lab-" + words[1] + "-start", () -> host.join(words[1], words[2]));
                } else if (words[0].equals("leave") && words.length == 2) {
                    host.spawn("lab-" + words[1] + "-leave", () -> host.leave(words[1]));
                } else if (words[0].equals("stop")) {
                    break;
                } else if (!words[0].isEmpty()) {
                    System.err.println("LabOriginalHost: unknown command: " + line);
                }
            }
        } catch (IOException e) {
            System.err.println("LabOriginalHost: stdin: " + e);
        }
        exitSoon(); // the hook makes every member leave, then replies "stopped"
    }

    private void join(String name, String propertiesPath) {
        LabOriginalMember member;
        try {
            member = new LabOriginalMember(propertiesPath, session -> replies.emit(
                    JsonLine.obj("name", name, "event", "session", "session", session[0], "password", session[1])));
        } catch (IOException | RuntimeException e) {
            replies.emit(JsonLine.obj("name", name, "event", "failed", "error", e.toString()));
            return;
        }
        LabOriginalMember old = members.put(name, member);
        if (old != null) {
            old.stop();
        }
        try {
            member.start();
            replies.emit(JsonLine.obj("name", name, "event", "started"));
        } catch (ReflectiveOperationException | RuntimeException e) {
            replies.emit(JsonLine.obj("name", name, "event", "failed", "error", e.toString()));
        }
    }

    private void leave(String name) {
        LabOriginalMember member = members.remove(name);
        if (member != null) {
            member.stop();
        }
        replies.emit(JsonLine.obj("name", name, "event", "left"));
    }

    /** Every member leaves at once (each in a thread), bounded by STOP_WAIT_MS; then "stopped". */
    private void stopAll() {
        List<Thread> leaving = new ArrayList<>();
        for (String name : new ArrayList<>(members.keySet())) {
            Thread thread = new Thread(() -> leave(name), "lab-" + name + "-stop");
            leaving.add(thread);
            thread.start();
        }
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(STOP_WAIT_MS);
        for (Thread thread : leaving) {
            try {
                thread.join(Math.max(1, TimeUnit.NANOSECONDS.toMillis(deadline - System.nanoTime())));
            } catch (InterruptedException e) {
                break;
            }
        }
        replies.emit(JsonLine.obj("event", "stopped"));
    }

    private void spawn(String name, Runnable task) {
        Thread thread = new Thread(task, name);
        thread.setDaemon(true);
        synchronized (workers) {
            workers.removeIf(t -> !t.isAlive());
            workers.add(thread);
        }
        thread.start();
    }

    /** System.exit runs the shutdown hook; a watchdog halts the JVM should the hook hang. */
    private static void exitSoon() {
        Thread watchdog = new Thread(() -> {
            try {
                Thread.sleep(HALT_AFTER_MS);
            } catch (InterruptedException e) {
                return;
            }
            Runtime.getRuntime().halt(3);
        }, "lab-host-halt-watchdog");
        watchdog.setDaemon(true);
        watchdog.start();
        System.exit(0);
    }
}
