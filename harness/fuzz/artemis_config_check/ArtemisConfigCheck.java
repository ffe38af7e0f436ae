// Reads Artemis broker.xml files the way `artemis run` does, one after another in one JVM, and says for each
// whether Artemis accepts it: the config differential of `interop fuzz --configs` (harness/fuzz/artemis_check.py).
//
// For each line on stdin (the path of a broker.xml) it does what org.apache.activemq.artemis.cli.commands.Run does
// with the broker.xml its bootstrap.xml names: a FileBroker over that file, createComponents() (Artemis's own
// FileDeploymentManager + FileConfiguration + LegacyJMSConfiguration: XML parsing, validation against
// artemis-configuration.xsd, FileConfigurationParser's checks), an activation failure listener, start(); then it
// waits for the server to become active (or to fail) and stops it. It prints one line on stdout:
//   accept <ms> <state>            the server started (state ACTIVE, or STARTED for a backup that waits)
//   refuse <ms> <phase> <message>  parse (createComponents), start (start threw) or activation (the listener)
// `artemis run` exits 1 in each refuse case (Run catches the Throwable and stops the broker).
// The case's folder (the file's parent) is the broker instance: relative data directories land there.
// Artemis's own log goes to stderr; stdout carries nothing but the verdict lines (and `ready` at start).

import java.io.BufferedReader;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;

import org.apache.activemq.artemis.core.server.ActiveMQServer;
import org.apache.activemq.artemis.dto.ServerDTO;
import org.apache.activemq.artemis.integration.FileBroker;
import org.apache.activemq.artemis.spi.core.security.ActiveMQJAASSecurityManager;

public final class ArtemisConfigCheck {

    public static void main(String[] args) throws Exception {
        long activationMs = args.length > 0 ? Long.parseLong(args[0]) : 10000;
        PrintStream out = new PrintStream(new FileOutputStream(FileDescriptor.out), true, "UTF-8");
        System.setOut(System.err); // Artemis and its libraries print; only verdicts go to the real stdout
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        out.println("ready");
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isBlank()) {
                continue;
            }
            out.println(check(Paths.get(line.trim()).toAbsolutePath(), activationMs));
        }
    }

    static String check(Path file, long activationMs) {
        long started = System.nanoTime();
        // Run resolves relative directories against the instance (artemis.instance): here the case's folder.
        System.setProperty("artemis.instance", file.getParent().toString());
        ServerDTO dto = new ServerDTO();
        dto.configuration = file.toUri().toString();
        FileBroker broker = new FileBroker(dto, new ActiveMQJAASSecurityManager("activemq"), null);
        AtomicReference<Exception> failed = new AtomicReference<>();
        String phase = "parse";
        try {
            broker.createComponents();
            ActiveMQServer server = broker.getServer();
            server.registerActivationFailureListener(failed::set);
            phase = "start";
            broker.start();
            phase = "activation";
            // Activation runs on its own thread: wait until the server is active or the listener heard of a
            // failure. A backup waits for its primary and never becomes active here: `artemis run` keeps running
            // such a broker, so at the deadline it counts as accepted (state STARTED, not active).
            long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(activationMs);
            while (failed.get() == null && !server.isActive() && System.nanoTime() < deadline) {
                server.waitForActivation(5, TimeUnit.MILLISECONDS);
            }
            if (failed.get() != null) {
                return refuse(started, phase, failed.get());
            }
            return "accept " + millis(started) + " " + (server.isActive() ? "active" : "started-not-active");
        } catch (Throwable t) {
            return refuse(started, phase, t);
        } finally {
            try {
                broker.stop();
            } catch (Throwable ignored) {
                // a broker that did not start may not stop cleanly; the next case builds a new one
            }
        }
    }

    static String refuse(long started, String phase, Throwable t) {
        return "refuse " + millis(started) + " " + phase + " " + describe(t);
    }

    static long millis(long started) {
        return TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - started);
    }

    // The exception and its causes on one line: "IllegalStateException: Invalid configuration <- SAXParseException: ..."
    static String describe(Throwable t) {
        StringBuilder text = new StringBuilder();
        for (Throwable c = t; c != null && text.length() < 2000; c = c.getCause() == c ? null : c.getCause()) {
            if (text.length() > 0) {
                text.append(" <- ");
            }
            text.append(c.getClass().getSimpleName()).append(": ").append(String.valueOf(c.getMessage()));
        }
        return text.toString().replaceAll("\\s+", " ");
    }
}
