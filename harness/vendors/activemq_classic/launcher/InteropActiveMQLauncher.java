// Runs one ActiveMQ Classic broker in the foreground for the interop harness (harness/vendors/activemq_classic/native.py).
//
//   java -cp LIB/*:DIR InteropActiveMQLauncher xbean:file:/abs/activemq.xml STATS_PORT
//
// Why a launcher and not bin/activemq: Maven Central has the 6.x jars but not the bin tarball, and the harness
// needs three things the script does not give: the ports the transports really bound (a listener may ask for
// port 0), one line saying the broker is ready, and queue statistics without JMX (an RMI connector per broker
// is heavy with several brokers on two cores). So, on stdout, one line each:
//
//   Listening on HOST:PORT (connector 'NAME')     for every transport connector, once bound
//   Statistics on 127.0.0.1:PORT                   the line protocol below
//   Broker NAME started; ready (ActiveMQ VERSION)  after BrokerService.waitUntilStarted()
//
// Statistics protocol (loopback only, one request line, one JSON answer line, then the connection closes):
//   QUEUE <name>  -> {"name":..,"exists":true,"depth":N,"consumers":N,"in_flight":N,"enqueued":N,...}
//   TOPIC <name>  -> the same for a topic
//   BRIDGES       -> {"connectors":[{"name":..,"bridges":[{"remote_broker":..,"remote_address":..}]}]}
// A destination the broker does not have answers {"name":..,"exists":false}.
//
// It exits 0 once the broker has stopped (SIGTERM runs the broker's own shutdown hook), 1 when the broker
// cannot start (the reason on one line first).

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.util.Map;

import org.apache.activemq.broker.BrokerFactory;
import org.apache.activemq.broker.BrokerService;
import org.apache.activemq.broker.TransportConnector;
import org.apache.activemq.broker.region.Destination;
import org.apache.activemq.broker.region.DestinationStatistics;
import org.apache.activemq.broker.region.RegionBroker;
import org.apache.activemq.command.ActiveMQDestination;
import org.apache.activemq.command.ActiveMQQueue;
import org.apache.activemq.command.ActiveMQTopic;
import org.apache.activemq.network.NetworkBridge;
import org.apache.activemq.network.NetworkConnector;

public final class InteropActiveMQLauncher {

    public static void main(String[] args) throws Exception {
        if (args.length != 2) {
            System.out.println("usage: InteropActiveMQLauncher xbean:file:/abs/activemq.xml STATS_PORT");
            System.exit(2);
        }
        BrokerService broker;
        try {
            broker = BrokerFactory.createBroker(new URI(args[0]), false);
            broker.start();
            if (!broker.waitUntilStarted()) {
                throw new IllegalStateException("the broker stopped while starting");
            }
        } catch (Exception e) {
            Throwable root = e;
            while (root.getCause() != null && root.getCause() != root) {
                root = root.getCause();
            }
            System.out.println("Broker failed to start: " + e + (root != e ? " (cause: " + root + ")" : ""));
            System.out.flush();
            System.exit(1);
            return;
        }
        for (TransportConnector connector : broker.getTransportConnectors()) {
            InetSocketAddress bound = connector.getServer().getSocketAddress();
            String host = bound.getAddress().getHostAddress();
            System.out.println("Listening on " + host + ":" + bound.getPort() + " (connector '" + connector.getName() + "')");
        }
        ServerSocket stats = new ServerSocket(Integer.parseInt(args[1]), 16, InetAddress.getLoopbackAddress());
        Thread server = new Thread(() -> serve(stats, broker), "interop-statistics");
        server.setDaemon(true);
        server.start();
        System.out.println("Statistics on 127.0.0.1:" + stats.getLocalPort());
        System.out.println("Broker " + broker.getBrokerName() + " started; ready (ActiveMQ " + versionOf() + ")");
        System.out.flush();
        broker.waitUntilStopped();
        System.out.println("Broker " + broker.getBrokerName() + " stopped");
        System.out.flush();
        System.exit(0);
    }

    private static String versionOf() {
        Package p = BrokerService.class.getPackage();
        String v = p == null ? null : p.getImplementationVersion();
        return v == null ? "unknown" : v;
    }

    private static void serve(ServerSocket server, BrokerService broker) {
        while (true) {
            try (Socket socket = server.accept()) {
                socket.setSoTimeout(5000);
                BufferedReader in = new BufferedReader(
                        new InputStreamReader(socket.getInputStream(), StandardCharsets.UTF_8));
                String line = in.readLine();
                String answer;
                try {
                    answer = answer(line == null ? "" : line.trim(), broker);
                } catch (Exception e) {
                    answer = "{\"error\":" + json(String.valueOf(e)) + "}";
                }
                OutputStream out = socket.getOutputStream();
                out.write((answer + "\n").getBytes(StandardCharsets.UTF_8));
                out.flush();
            } catch (Exception e) {
                if (server.isClosed()) {
                    return;
                }
                // one bad client must not end the statistics service: go on with the next
            }
        }
    }

    private static String answer(String request, BrokerService broker) throws Exception {
        int space = request.indexOf(' ');
        String verb = space < 0 ? request : request.substring(0, space);
        String name = space < 0 ? "" : request.substring(space + 1);
        switch (verb) {
            case "QUEUE":
                return destination(broker, new ActiveMQQueue(name), name);
            case "TOPIC":
                return destination(broker, new ActiveMQTopic(name), name);
            case "BRIDGES":
                return bridges(broker);
            default:
                return "{\"error\":" + json("unknown request " + request + " (expected QUEUE, TOPIC or BRIDGES)") + "}";
        }
    }

    private static String destination(BrokerService broker, ActiveMQDestination wanted, String name) throws Exception {
        RegionBroker region = (RegionBroker) broker.getRegionBroker();
        Map<ActiveMQDestination, Destination> all = region.getDestinationMap(wanted);
        Destination d = all.get(wanted);
        if (d == null) {
            return "{\"name\":" + json(name) + ",\"exists\":false,\"depth\":0,\"consumers\":0}";
        }
        DestinationStatistics s = d.getDestinationStatistics();
        return "{\"name\":" + json(name) + ",\"exists\":true"
                + ",\"depth\":" + s.getMessages().getCount()
                + ",\"consumers\":" + s.getConsumers().getCount()
                + ",\"producers\":" + s.getProducers().getCount()
                + ",\"in_flight\":" + s.getInflight().getCount()
                + ",\"enqueued\":" + s.getEnqueues().getCount()
                + ",\"dequeued\":" + s.getDequeues().getCount()
                + ",\"dispatched\":" + s.getDispatched().getCount()
                + ",\"forwarded\":" + s.getForwards().getCount()
                + ",\"expired\":" + s.getExpired().getCount() + "}";
    }

    private static String bridges(BrokerService broker) {
        StringBuilder b = new StringBuilder("{\"connectors\":[");
        boolean firstConnector = true;
        for (NetworkConnector c : broker.getNetworkConnectors()) {
            b.append(firstConnector ? "" : ",").append("{\"name\":").append(json(c.getName())).append(",\"bridges\":[");
            firstConnector = false;
            boolean firstBridge = true;
            for (NetworkBridge bridge : c.activeBridges()) {
                b.append(firstBridge ? "" : ",")
                        .append("{\"remote_broker\":").append(json(bridge.getRemoteBrokerName()))
                        .append(",\"remote_address\":").append(json(bridge.getRemoteAddress())).append("}");
                firstBridge = false;
            }
            b.append("]}");
        }
        return b.append("]}").toString();
    }

    private static String json(String s) {
        if (s == null) {
            return "null";
        }
        StringBuilder b = new StringBuilder("\"");
        for (char ch : s.toCharArray()) {
            if (ch == '"' || ch == '\\') {
                b.append('\\').append(ch);
            } else if (ch < 0x20) {
                b.append(String.format("\\u%04x", (int) ch));
            } else {
                b.append(ch);
            }
        }
        return b.append('"').toString();
    }
}
