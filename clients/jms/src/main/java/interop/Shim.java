package interop;

import com.google.gson.Gson;
import com.google.gson.JsonArray;
import com.google.gson.JsonElement;
import com.google.gson.JsonNull;
import com.google.gson.JsonObject;

import jakarta.jms.BytesMessage;
import jakarta.jms.Connection;
import jakarta.jms.DeliveryMode;
import jakarta.jms.Destination;
import jakarta.jms.JMSException;
import jakarta.jms.MapMessage;
import jakarta.jms.Message;
import jakarta.jms.MessageConsumer;
import jakarta.jms.MessageEOFException;
import jakarta.jms.MessageProducer;
import jakarta.jms.ObjectMessage;
import jakarta.jms.Queue;
import jakarta.jms.Session;
import jakarta.jms.StreamMessage;
import jakarta.jms.TemporaryQueue;
import jakarta.jms.TemporaryTopic;
import jakarta.jms.TextMessage;
import jakarta.jms.Topic;

import org.apache.qpid.jms.JmsConnectionFactory;
import org.apache.qpid.jms.util.MetaDataSupport;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.io.Serializable;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collections;
import java.util.Enumeration;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/**
 * The Qpid JMS client stack of the interop harness, as a line-protocol shim (harness/drivers.py).
 *
 * One JSON request per line on stdin, one JSON answer per line on stdout, in order, like the other shims. It is a
 * JMS application: it only uses the JMS API, so what it shows is what a JMS application sees, and what it sends is
 * what Qpid JMS makes of JMS calls. What JMS cannot say (a chosen outcome per delivery, drain, credit of one link,
 * pre-settled links, AMQP types with no Java form) is absent from its capabilities and answered with an error.
 */
public final class Shim {
    static final String STACK = "jms";
    // Only what a JMS application can do; the generic capabilities of the other shims (outcome.reject,
    // settle.presettled, types.decimal, ...) are deliberately missing.
    static final String[] CAPABILITIES = {"jms", "jms.client-acknowledge", "jms.transacted", "jms.selector",
        "jms.durable-subscription", "jms.shared-subscription", "jms.recover", "jms.topic"};

    private final Gson gson = new Gson();
    private final Map<String, Connection> conns = new HashMap<>();
    private final Map<String, Link> links = new HashMap<>();

    /** One sender or receiver: a JMS session of its own (sessions are single-threaded) and its producer or consumer. */
    static final class Link {
        final Session session;
        MessageProducer producer;
        MessageConsumer consumer;
        final ExecutorService worker = Executors.newSingleThreadExecutor(r -> {
            Thread t = new Thread(r, "jms-shim-link");
            t.setDaemon(true);
            return t;
        });
        final List<Message> incoming = new ArrayList<>(); // arrived, not yet taken by a receive
        final List<Message> unacknowledged = new ArrayList<>(); // taken, in a client-acknowledge session
        String error;

        Link(Session session) {
            this.session = session;
        }
    }

    public static void main(String[] args) throws Exception {
        PrintStream out = new PrintStream(System.out, true, StandardCharsets.UTF_8);
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        Shim shim = new Shim();
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isBlank()) {
                continue;
            }
            JsonObject answer = new JsonObject();
            JsonElement id = JsonNull.INSTANCE;
            try {
                JsonObject req = shim.gson.fromJson(line, JsonObject.class);
                id = req.has("id") ? req.get("id") : JsonNull.INSTANCE;
                answer.add("id", id);
                String op = req.get("op").getAsString();
                if (op.equals("exit")) {
                    answer.add("ok", new JsonObject());
                    out.println(shim.gson.toJson(answer));
                    shim.closeAll();
                    System.exit(0);
                }
                answer.add("ok", shim.dispatch(op, req));
            } catch (Exception exc) { // every failure is an answer, never a dead shim
                answer = new JsonObject();
                answer.add("id", id);
                answer.addProperty("error", describe(exc));
            }
            out.println(shim.gson.toJson(answer));
        }
        shim.closeAll();
        System.exit(0);
    }

    static String describe(Throwable exc) {
        Throwable cause = exc.getCause();
        String text = exc.getClass().getSimpleName() + ": " + exc.getMessage();
        if (cause != null && cause.getMessage() != null && !text.contains(cause.getMessage())) {
            text += " (" + cause.getClass().getSimpleName() + ": " + cause.getMessage() + ")";
        }
        return text;
    }

    JsonObject dispatch(String op, JsonObject req) throws Exception {
        switch (op) {
            case "hello": return hello();
            case "connect": return connect(req);
            case "sender": return sender(req);
            case "receiver": return receiver(req);
            case "send": return send(req);
            case "receive": return receive(req);
            case "settle": return settle(req);
            case "commit": return transaction(req, true);
            case "rollback": return transaction(req, false);
            case "recover": return recover(req);
            case "unsubscribe": return unsubscribe(req);
            case "detach": return detach(req);
            case "close": return close(req);
            case "flow":
                throw new UnsupportedOperationException("jms: a JMS consumer has no per-link credit to grant (its "
                    + "prefetch is the provider's); flow is not expressible");
            default:
                throw new IllegalArgumentException("unknown op " + op);
        }
    }

    static double timeoutOf(JsonObject req) {
        return req.has("timeout") ? req.get("timeout").getAsDouble() : 10.0;
    }

    JsonObject hello() {
        JsonObject ok = new JsonObject();
        ok.addProperty("stack", STACK);
        ok.addProperty("version", MetaDataSupport.PROVIDER_VERSION);
        JsonArray caps = new JsonArray();
        for (String c : CAPABILITIES) {
            caps.add(c);
        }
        ok.add("capabilities", caps);
        return ok;
    }

    // ---- connections and links ----

    JsonObject connect(JsonObject req) throws Exception {
        URI uri = URI.create(req.get("url").getAsString());
        String user = null;
        String password = null;
        if (uri.getUserInfo() != null) {
            String[] parts = uri.getUserInfo().split(":", 2);
            user = parts[0];
            password = parts.length > 1 ? parts[1] : "";
        }
        long ms = Math.round(timeoutOf(req) * 1000);
        // forceSyncSend: every send waits for the peer's outcome, so an outcome can be reported per message (Qpid JMS
        // sends non-persistent messages without waiting otherwise). A connection that fails is not reopened: the
        // harness judges what the peer did, not what a failover layer hid.
        String remote = uri.getScheme() + "://" + uri.getHost() + ":" + uri.getPort() + "?jms.forceSyncSend=true"
            + "&jms.connectTimeout=" + ms + "&jms.closeTimeout=" + ms + "&jms.sendTimeout=60000"
            + "&jms.requestTimeout=60000"
            + (req.has("client_id") ? "&jms.clientID=" + req.get("client_id").getAsString() : "");
        JmsConnectionFactory factory = new JmsConnectionFactory(remote);
        Connection conn = user == null ? factory.createConnection() : factory.createConnection(user, password);
        conn.start();
        conns.put(req.get("conn").getAsString(), conn);
        return new JsonObject();
    }

    Connection conn(JsonObject req) {
        Connection conn = conns.get(req.get("conn").getAsString());
        if (conn == null) {
            throw new IllegalArgumentException("no connection " + req.get("conn"));
        }
        return conn;
    }

    Link link(JsonObject req) {
        Link link = links.get(req.get("link").getAsString());
        if (link == null) {
            throw new IllegalArgumentException("no link " + req.get("link"));
        }
        return link;
    }

    static Destination destination(Session session, String address, String kind) throws JMSException {
        return "topic".equals(kind) ? session.createTopic(address) : session.createQueue(address);
    }

    static String str(JsonObject req, String key) {
        return req.has(key) && !req.get(key).isJsonNull() ? req.get(key).getAsString() : null;
    }

    JsonObject sender(JsonObject req) throws Exception {
        if ("presettled".equals(str(req, "settle"))) {
            throw new UnsupportedOperationException("jms: a JMS producer cannot choose pre-settled transfers per link");
        }
        boolean transacted = req.has("transacted") && req.get("transacted").getAsBoolean();
        Session session = conn(req).createSession(transacted, transacted ? Session.SESSION_TRANSACTED
            : Session.AUTO_ACKNOWLEDGE);
        Link link = new Link(session);
        try {
            link.producer = session.createProducer(destination(session, req.get("address").getAsString(),
                str(req, "dest")));
        } catch (JMSException exc) {
            session.close();
            throw exc;
        }
        links.put(req.get("link").getAsString(), link);
        return new JsonObject();
    }

    JsonObject receiver(JsonObject req) throws Exception {
        String settle = str(req, "settle");
        boolean transacted = req.has("transacted") && req.get("transacted").getAsBoolean();
        int mode = transacted ? Session.SESSION_TRANSACTED
            : "auto".equals(settle) ? Session.AUTO_ACKNOWLEDGE : Session.CLIENT_ACKNOWLEDGE;
        Session session = conn(req).createSession(transacted, mode);
        Link link = new Link(session);
        Destination dest = destination(session, req.get("address").getAsString(), str(req, "dest"));
        String selector = str(req, "selector");
        String durable = str(req, "durable"); // a durable subscription's name (topics)
        String shared = str(req, "shared"); // a shared subscription's name (topics)
        try {
            if (durable != null && shared != null) {
                link.consumer = session.createSharedDurableConsumer((Topic) dest, shared, selector);
            } else if (durable != null) {
                link.consumer = session.createDurableConsumer((Topic) dest, durable, selector, false);
            } else if (shared != null) {
                link.consumer = session.createSharedConsumer((Topic) dest, shared, selector);
            } else {
                link.consumer = session.createConsumer(dest, selector);
            }
        } catch (JMSException exc) {
            session.close();
            throw exc;
        }
        // A listener takes each message as it arrives, as the other shims' receivers do: in an auto-acknowledge
        // session it is acknowledged when the listener returns, so a sender waiting for its outcome through a router
        // is answered before any receive request.
        link.consumer.setMessageListener(message -> {
            synchronized (link) {
                link.incoming.add(message);
                link.notifyAll();
            }
        });
        links.put(req.get("link").getAsString(), link);
        return new JsonObject();
    }

    JsonObject detach(JsonObject req) throws Exception {
        Link link = links.remove(req.get("link").getAsString());
        if (link != null) {
            link.worker.shutdownNow();
            link.session.close();
        }
        return new JsonObject();
    }

    JsonObject close(JsonObject req) throws Exception {
        Connection conn = conns.remove(req.get("conn").getAsString());
        if (conn != null) {
            conn.close();
        }
        return new JsonObject();
    }

    JsonObject unsubscribe(JsonObject req) throws Exception {
        Connection conn = conn(req);
        Session session = conn.createSession(false, Session.AUTO_ACKNOWLEDGE);
        try {
            session.unsubscribe(req.get("name").getAsString());
        } finally {
            session.close();
        }
        return new JsonObject();
    }

    void closeAll() {
        for (Connection conn : conns.values()) {
            try {
                conn.close();
            } catch (Exception ignored) {
                // exiting: a connection the peer closed first has nothing left to close
            }
        }
    }

    // ---- sending ----

    JsonObject send(JsonObject req) throws Exception {
        Link link = link(req);
        JsonArray messages = req.getAsJsonArray("messages");
        long deadline = System.nanoTime() + Math.round(timeoutOf(req) * 1e9);
        JsonArray outcomes = new JsonArray();
        JsonArray ids = new JsonArray();
        for (JsonElement element : messages) {
            JsonObject m = element.getAsJsonObject();
            // The send runs on the link's own thread so that a peer that never answers costs this request its
            // deadline, not the shim: Qpid JMS's send blocks until the outcome (or jms.sendTimeout).
            Future<Message> sent = link.worker.submit(() -> sendOne(link, m));
            try {
                Message message = sent.get(Math.max(0, deadline - System.nanoTime()), TimeUnit.NANOSECONDS);
                outcomes.add("accepted");
                ids.add(message.getJMSMessageID());
            } catch (TimeoutException exc) {
                throw new TimeoutException("send: no outcome within " + timeoutOf(req) + "s");
            } catch (java.util.concurrent.ExecutionException exc) {
                throw exc.getCause() instanceof Exception ? (Exception) exc.getCause() : exc;
            }
        }
        JsonObject ok = new JsonObject();
        ok.add("outcomes", outcomes);
        ok.add("message_ids", ids);
        return ok;
    }

    Message sendOne(Link link, JsonObject m) throws Exception {
        Session session = link.session;
        int deliveryMode = DeliveryMode.PERSISTENT;
        int priority = Message.DEFAULT_PRIORITY;
        long ttl = Message.DEFAULT_TIME_TO_LIVE;
        Message message;
        if (m.has("jms")) {
            JsonObject j = m.getAsJsonObject("jms");
            message = jmsMessage(session, j);
            if (j.has("delivery_mode")) {
                deliveryMode = "non_persistent".equals(j.get("delivery_mode").getAsString())
                    ? DeliveryMode.NON_PERSISTENT : DeliveryMode.PERSISTENT;
            }
            if (j.has("priority")) {
                priority = j.get("priority").getAsInt();
            }
            if (j.has("ttl")) {
                ttl = j.get("ttl").getAsLong();
            }
        } else {
            message = genericMessage(session, m);
            JsonObject h = m.has("header") ? m.getAsJsonObject("header") : new JsonObject();
            if (h.has("durable") && !h.get("durable").getAsBoolean()) {
                deliveryMode = DeliveryMode.NON_PERSISTENT;
            }
            if (h.has("priority")) {
                priority = h.get("priority").getAsInt();
            }
            if (h.has("ttl")) {
                ttl = h.get("ttl").getAsLong();
            }
        }
        link.producer.send(message, deliveryMode, priority, ttl);
        return message;
    }

    /** A JMS message as the request describes it in JMS terms: its class, body, headers and properties. */
    Message jmsMessage(Session session, JsonObject j) throws Exception {
        String type = j.get("type").getAsString();
        JsonElement body = j.has("body") ? j.get("body") : JsonNull.INSTANCE;
        Message message;
        switch (type) {
            case "message":
                message = session.createMessage();
                break;
            case "text":
                message = session.createTextMessage(body.isJsonNull() ? null : (String) toJava(body.getAsJsonObject()));
                break;
            case "bytes": {
                BytesMessage bm = session.createBytesMessage();
                if (!body.isJsonNull()) {
                    bm.writeBytes((byte[]) toJava(body.getAsJsonObject()));
                }
                message = bm;
                break;
            }
            case "map": {
                MapMessage mm = session.createMapMessage();
                if (!body.isJsonNull()) {
                    for (JsonElement pair : body.getAsJsonObject().getAsJsonArray("v")) {
                        JsonArray kv = pair.getAsJsonArray();
                        mm.setObject((String) toJava(kv.get(0).getAsJsonObject()), toJava(kv.get(1).getAsJsonObject()));
                    }
                }
                message = mm;
                break;
            }
            case "stream": {
                StreamMessage sm = session.createStreamMessage();
                if (!body.isJsonNull()) {
                    for (JsonElement item : body.getAsJsonObject().getAsJsonArray("v")) {
                        sm.writeObject(toJava(item.getAsJsonObject()));
                    }
                }
                message = sm;
                break;
            }
            case "object":
                message = session.createObjectMessage(body.isJsonNull() ? null
                    : (Serializable) toJava(body.getAsJsonObject()));
                break;
            default:
                throw new IllegalArgumentException("jms: unknown message type " + type);
        }
        if (j.has("correlation_id")) {
            message.setJMSCorrelationID(j.get("correlation_id").getAsString());
        }
        if (j.has("correlation_id_bytes")) {
            message.setJMSCorrelationIDAsBytes(hex(j.get("correlation_id_bytes").getAsString()));
        }
        if (j.has("jms_type")) {
            message.setJMSType(j.get("jms_type").getAsString());
        }
        if (j.has("reply_to")) {
            JsonObject r = j.getAsJsonObject("reply_to");
            message.setJMSReplyTo(destination(session, r.get("name").getAsString(), str(r, "kind")));
        }
        if (j.has("properties")) {
            setProperties(message, j.getAsJsonArray("properties"));
        }
        return message;
    }

    /** A message given in AMQP terms (typed JSON, as the other shims take it), made with JMS where JMS can say it. */
    Message genericMessage(Session session, JsonObject m) throws Exception {
        JsonObject body = m.has("body") ? m.getAsJsonObject("body") : null;
        String t = body == null ? "null" : body.get("t").getAsString();
        Message message;
        switch (t) {
            case "null":
                message = session.createMessage();
                break;
            case "string":
                message = session.createTextMessage(body.get("v").getAsString());
                break;
            case "binary": {
                BytesMessage bm = session.createBytesMessage();
                bm.writeBytes(hex(body.get("v").getAsString()));
                message = bm;
                break;
            }
            default:
                throw new UnsupportedOperationException("jms: an amqp-value body of type " + t
                    + " has no JMS message form the shim would send unchanged");
        }
        JsonObject p = m.has("properties") ? m.getAsJsonObject("properties") : new JsonObject();
        for (String key : p.keySet()) {
            switch (key) {
                case "correlation_id": {
                    JsonObject id = p.getAsJsonObject(key);
                    if ("string".equals(id.get("t").getAsString())) {
                        message.setJMSCorrelationID(id.get("v").getAsString());
                    } else if ("binary".equals(id.get("t").getAsString())) {
                        message.setJMSCorrelationIDAsBytes(hex(id.get("v").getAsString()));
                    } else {
                        throw new UnsupportedOperationException("jms: a " + id.get("t") + " correlation-id");
                    }
                    break;
                }
                case "subject":
                    message.setJMSType(p.get(key).getAsString());
                    break;
                default:
                    throw new UnsupportedOperationException("jms: the properties field " + key
                        + " is the provider's to set, not the application's");
            }
        }
        if (m.has("annotations") && m.getAsJsonArray("annotations").size() > 0) {
            throw new UnsupportedOperationException("jms: a JMS application cannot set message annotations");
        }
        if (m.has("app_properties")) {
            setProperties(message, m.getAsJsonArray("app_properties"));
        }
        return message;
    }

    static void setProperties(Message message, JsonArray pairs) throws JMSException {
        for (JsonElement pair : pairs) {
            JsonArray kv = pair.getAsJsonArray();
            message.setObjectProperty((String) toJava(kv.get(0).getAsJsonObject()), toJava(kv.get(1).getAsJsonObject()));
        }
    }

    // ---- receiving ----

    JsonObject receive(JsonObject req) throws Exception {
        Link link = link(req);
        int count = req.get("count").getAsInt();
        long deadline = System.nanoTime() + Math.round(timeoutOf(req) * 1e9);
        List<Message> got;
        synchronized (link) {
            while (link.incoming.size() < count) {
                long left = deadline - System.nanoTime();
                if (left <= 0) {
                    throw new TimeoutException("receive: " + link.incoming.size() + " of " + count + " messages within "
                        + timeoutOf(req) + "s");
                }
                link.wait(Math.max(1, left / 1_000_000));
            }
            got = new ArrayList<>(link.incoming.subList(0, count));
            link.incoming.subList(0, count).clear();
            if (link.session.getAcknowledgeMode() == Session.CLIENT_ACKNOWLEDGE) {
                link.unacknowledged.addAll(got);
            }
        }
        JsonArray out = new JsonArray();
        for (Message message : got) {
            out.add(View.of(message));
        }
        JsonObject ok = new JsonObject();
        ok.add("messages", out);
        return ok;
    }

    JsonObject settle(JsonObject req) throws Exception {
        Link link = link(req);
        String outcome = req.has("outcome") ? req.get("outcome").getAsString() : "accept";
        if (!outcome.equals("accept")) {
            throw new UnsupportedOperationException("jms: a JMS application cannot choose the outcome " + outcome);
        }
        int settled;
        synchronized (link) {
            if (link.session.getAcknowledgeMode() == Session.AUTO_ACKNOWLEDGE) {
                return settledCount(0); // acknowledged as each arrived
            }
            if (link.session.getTransacted()) {
                throw new UnsupportedOperationException("jms: a transacted session settles by commit");
            }
            int count = req.has("count") ? req.get("count").getAsInt() : 0;
            if (count != 0 && count != link.unacknowledged.size()) {
                throw new UnsupportedOperationException("jms: acknowledge() settles every message the session "
                    + "delivered (" + link.unacknowledged.size() + "), not " + count);
            }
            settled = link.unacknowledged.size();
            if (settled > 0) {
                link.unacknowledged.get(settled - 1).acknowledge();
            }
            link.unacknowledged.clear();
        }
        return settledCount(settled);
    }

    static JsonObject settledCount(int n) {
        JsonObject ok = new JsonObject();
        ok.addProperty("settled", n);
        return ok;
    }

    JsonObject transaction(JsonObject req, boolean commit) throws Exception {
        Link link = link(req);
        if (!commit) {
            synchronized (link) {
                // Cleared before the rollback: what it gives back comes again through the listener, redelivered.
                link.incoming.clear();
            }
        }
        Future<?> done = link.worker.submit(() -> {
            if (commit) {
                link.session.commit();
            } else {
                link.session.rollback();
            }
            return null;
        });
        try {
            done.get(Math.round(timeoutOf(req) * 1000), TimeUnit.MILLISECONDS);
        } catch (java.util.concurrent.ExecutionException exc) {
            throw exc.getCause() instanceof Exception ? (Exception) exc.getCause() : exc;
        }
        return new JsonObject();
    }

    JsonObject recover(JsonObject req) throws Exception {
        Link link = link(req);
        synchronized (link) {
            link.unacknowledged.clear();
            link.incoming.clear(); // what was not acknowledged comes again, redelivered
        }
        link.session.recover();
        return new JsonObject();
    }

    // ---- values ----

    static byte[] hex(String s) {
        byte[] out = new byte[s.length() / 2];
        for (int i = 0; i < out.length; i++) {
            out[i] = (byte) Integer.parseInt(s.substring(2 * i, 2 * i + 2), 16);
        }
        return out;
    }

    static String hex(byte[] b) {
        StringBuilder sb = new StringBuilder();
        for (byte x : b) {
            sb.append(String.format("%02x", x));
        }
        return sb.toString();
    }

    /** Typed JSON -> the Java value JMS takes for that type; an AMQP type with no Java form in JMS is an error. */
    static Object toJava(JsonObject tv) {
        String t = tv.get("t").getAsString();
        JsonElement v = tv.get("v");
        switch (t) {
            case "null": return null;
            case "boolean": return v.getAsBoolean();
            case "byte": return Byte.parseByte(v.getAsString());
            case "short": return Short.parseShort(v.getAsString());
            case "int": return Integer.parseInt(v.getAsString());
            case "long": return Long.parseLong(v.getAsString());
            case "float": return Float.intBitsToFloat((int) Long.parseLong(v.getAsString(), 16));
            case "double": return Double.longBitsToDouble(Long.parseUnsignedLong(v.getAsString(), 16));
            case "char": return (char) v.getAsInt();
            case "string": return v.getAsString();
            case "binary": return hex(v.getAsString());
            case "list": {
                List<Object> list = new ArrayList<>();
                for (JsonElement x : v.getAsJsonArray()) {
                    list.add(toJava(x.getAsJsonObject()));
                }
                return list;
            }
            case "map": {
                Map<Object, Object> map = new LinkedHashMap<>();
                for (JsonElement pair : v.getAsJsonArray()) {
                    JsonArray kv = pair.getAsJsonArray();
                    map.put(toJava(kv.get(0).getAsJsonObject()), toJava(kv.get(1).getAsJsonObject()));
                }
                return (Serializable) new HashMap<>(map);
            }
            default:
                throw new UnsupportedOperationException("jms: the AMQP type " + t + " has no JMS form");
        }
    }

    /** A Java value a JMS message gave -> typed JSON naming the AMQP type it corresponds to (and the Java class). */
    static JsonObject fromJava(Object o) {
        JsonObject tv = new JsonObject();
        if (o == null) {
            tv.addProperty("t", "null");
            return tv;
        }
        String java = o.getClass().getSimpleName();
        tv.addProperty("java", java);
        if (o instanceof Boolean) {
            tv.addProperty("t", "boolean");
            tv.addProperty("v", (Boolean) o);
        } else if (o instanceof Byte || o instanceof Short || o instanceof Integer || o instanceof Long) {
            tv.addProperty("t", o instanceof Byte ? "byte" : o instanceof Short ? "short" : o instanceof Integer ? "int"
                : "long");
            tv.addProperty("v", o.toString());
        } else if (o instanceof Float) {
            tv.addProperty("t", "float");
            tv.addProperty("v", String.format("%08x", Float.floatToRawIntBits((Float) o)));
        } else if (o instanceof Double) {
            tv.addProperty("t", "double");
            tv.addProperty("v", String.format("%016x", Double.doubleToRawLongBits((Double) o)));
        } else if (o instanceof Character) {
            tv.addProperty("t", "char");
            tv.addProperty("v", (int) (Character) o);
        } else if (o instanceof String) {
            tv.addProperty("t", "string");
            tv.addProperty("v", (String) o);
        } else if (o instanceof byte[]) {
            tv.addProperty("t", "binary");
            tv.addProperty("v", hex((byte[]) o));
        } else if (o instanceof UUID) {
            tv.addProperty("t", "uuid");
            tv.addProperty("v", o.toString().replace("-", ""));
        } else if (o instanceof List) {
            tv.addProperty("t", "list");
            JsonArray items = new JsonArray();
            for (Object x : (List<?>) o) {
                items.add(fromJava(x));
            }
            tv.add("v", items);
        } else if (o instanceof Map) {
            tv.addProperty("t", "map");
            JsonArray pairs = new JsonArray();
            for (Map.Entry<?, ?> e : ((Map<?, ?>) o).entrySet()) {
                JsonArray kv = new JsonArray();
                kv.add(fromJava(e.getKey()));
                kv.add(fromJava(e.getValue()));
                pairs.add(kv);
            }
            tv.add("v", pairs);
        } else {
            // A value of a class JMS does not name (an AMQP type Qpid JMS passes through, e.g. its UnsignedInteger)
            tv.addProperty("t", "java");
            tv.addProperty("v", String.valueOf(o));
        }
        return tv;
    }

    /** What a JMS application sees of a received message, plus the AMQP-shaped view the suites read. */
    static final class View {
        static JsonObject of(Message m) throws JMSException {
            JsonObject jms = new JsonObject();
            jms.addProperty("class", className(m));
            jms.addProperty("JMSMessageID", m.getJMSMessageID());
            jms.addProperty("JMSTimestamp", m.getJMSTimestamp());
            jms.addProperty("JMSCorrelationID", m.getJMSCorrelationID());
            byte[] corrBytes = null;
            try {
                corrBytes = m.getJMSCorrelationIDAsBytes();
            } catch (JMSException exc) {
                // Qpid JMS answers only for a binary correlation-id; a string one has no bytes form
            }
            if (corrBytes != null) {
                jms.addProperty("JMSCorrelationIDAsBytes", hex(corrBytes));
            }
            jms.addProperty("JMSType", m.getJMSType());
            jms.addProperty("JMSPriority", m.getJMSPriority());
            jms.addProperty("JMSExpiration", m.getJMSExpiration());
            jms.addProperty("JMSDeliveryMode", m.getJMSDeliveryMode() == DeliveryMode.PERSISTENT ? "PERSISTENT"
                : "NON_PERSISTENT");
            jms.addProperty("JMSRedelivered", m.getJMSRedelivered());
            jms.add("JMSDestination", destination(m.getJMSDestination()));
            jms.add("JMSReplyTo", destination(m.getJMSReplyTo()));
            jms.addProperty("JMSXDeliveryCount", m.getIntProperty("JMSXDeliveryCount"));
            JsonArray props = new JsonArray();
            List<String> names = new ArrayList<>();
            for (Enumeration<?> e = m.getPropertyNames(); e.hasMoreElements(); ) {
                names.add((String) e.nextElement());
            }
            Collections.sort(names);
            for (String name : names) {
                JsonArray kv = new JsonArray();
                kv.add(string(name));
                kv.add(fromJava(m.getObjectProperty(name)));
                props.add(kv);
            }
            jms.add("properties", props);
            jms.add("body", body(m));

            JsonObject out = new JsonObject();
            out.add("jms", jms);
            // The AMQP-shaped view the delivery cases read (seq numbers in application properties, the body).
            JsonObject header = new JsonObject();
            header.addProperty("durable", m.getJMSDeliveryMode() == DeliveryMode.PERSISTENT);
            header.addProperty("priority", m.getJMSPriority());
            out.add("header", header);
            JsonObject properties = new JsonObject();
            if (m.getJMSType() != null) {
                properties.addProperty("subject", m.getJMSType());
            }
            out.add("properties", properties);
            out.add("app_properties", props);
            out.add("body", jms.get("body"));
            return out;
        }

        static JsonObject string(String s) {
            JsonObject tv = new JsonObject();
            tv.addProperty("t", "string");
            tv.addProperty("v", s);
            return tv;
        }

        static String className(Message m) {
            if (m instanceof TextMessage) return "TextMessage";
            if (m instanceof BytesMessage) return "BytesMessage";
            if (m instanceof MapMessage) return "MapMessage";
            if (m instanceof StreamMessage) return "StreamMessage";
            if (m instanceof ObjectMessage) return "ObjectMessage";
            return "Message";
        }

        static JsonElement destination(Destination d) throws JMSException {
            if (d == null) {
                return JsonNull.INSTANCE;
            }
            JsonObject out = new JsonObject();
            if (d instanceof TemporaryQueue) {
                out.addProperty("kind", "temp-queue");
                out.addProperty("name", ((Queue) d).getQueueName());
            } else if (d instanceof TemporaryTopic) {
                out.addProperty("kind", "temp-topic");
                out.addProperty("name", ((Topic) d).getTopicName());
            } else if (d instanceof Queue) {
                out.addProperty("kind", "queue");
                out.addProperty("name", ((Queue) d).getQueueName());
            } else if (d instanceof Topic) {
                out.addProperty("kind", "topic");
                out.addProperty("name", ((Topic) d).getTopicName());
            } else {
                out.addProperty("kind", d.getClass().getSimpleName());
                out.addProperty("name", d.toString());
            }
            return out;
        }

        static JsonElement body(Message m) throws JMSException {
            if (m instanceof TextMessage) {
                String text = ((TextMessage) m).getText();
                return text == null ? fromJava(null) : fromJava(text);
            }
            if (m instanceof BytesMessage) {
                BytesMessage bm = (BytesMessage) m;
                byte[] b = new byte[(int) bm.getBodyLength()];
                bm.readBytes(b);
                return fromJava(b);
            }
            if (m instanceof MapMessage) {
                MapMessage mm = (MapMessage) m;
                List<String> names = new ArrayList<>();
                for (Enumeration<?> e = mm.getMapNames(); e.hasMoreElements(); ) {
                    names.add((String) e.nextElement());
                }
                Collections.sort(names);
                Map<Object, Object> map = new LinkedHashMap<>();
                for (String name : names) {
                    map.put(name, mm.getObject(name));
                }
                return fromJava(map);
            }
            if (m instanceof StreamMessage) {
                StreamMessage sm = (StreamMessage) m;
                List<Object> items = new ArrayList<>();
                while (true) {
                    try {
                        items.add(sm.readObject());
                    } catch (MessageEOFException end) {
                        break;
                    }
                }
                return fromJava(items);
            }
            if (m instanceof ObjectMessage) {
                try {
                    return fromJava(((ObjectMessage) m).getObject());
                } catch (JMSException exc) {
                    JsonObject tv = new JsonObject();
                    tv.addProperty("t", "error");
                    tv.addProperty("v", describe(exc));
                    return tv;
                }
            }
            return fromJava(null);
        }
    }
}
