// The Qpid Proton C++ client stack of the interop harness, as a line-protocol shim (harness/drivers.py).
//
// One JSON request per line on stdin, one JSON answer per line on stdout, in order ({"id": N, "ok": {...}} or
// {"id": N, "error": "..."}). AMQP values travel as typed JSON ({"t": "ubyte", "v": "255"}, clients/README.md),
// built with proton::codec::encoder and read back with proton::codec::decoder, as an application using
// proton::value does. The container runs on its own thread; requests reach it through each connection's
// work_queue, and the main thread waits for their result with a deadline.
//
// Build: make -C clients/cpp (g++ against Debian's libqpid-proton-cpp12-dev and nlohmann-json3-dev).

#include <proton/connection.hpp>
#include <proton/connection_options.hpp>
#include <proton/container.hpp>
#include <proton/delivery.hpp>
#include <proton/message.hpp>
#include <proton/message_id.hpp>
#include <proton/messaging_handler.hpp>
#include <proton/receiver.hpp>
#include <proton/receiver_options.hpp>
#include <proton/sender.hpp>
#include <proton/sender_options.hpp>
#include <proton/session.hpp>
#include <proton/source_options.hpp>
#include <proton/target_options.hpp>
#include <proton/tracker.hpp>
#include <proton/transport.hpp>
#include <proton/types.hpp>
#include <proton/codec/decoder.hpp>
#include <proton/codec/encoder.hpp>
#include <proton/work_queue.hpp>

#include <nlohmann/json.hpp>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>

using json = nlohmann::json;
using proton::codec::decoder;
using proton::codec::encoder;
using proton::codec::finish;
using proton::codec::start;

static const char* STACK = "cpp";

// ---- typed JSON <-> proton values --------------------------------------------------------------------------

static std::string hex(const void* data, size_t n) {
    static const char* digits = "0123456789abcdef";
    std::string out;
    const unsigned char* p = static_cast<const unsigned char*>(data);
    for (size_t i = 0; i < n; ++i) { out += digits[p[i] >> 4]; out += digits[p[i] & 15]; }
    return out;
}

static std::string unhex(const std::string& text) {
    std::string out;
    for (size_t i = 0; i + 1 < text.size(); i += 2) out += static_cast<char>(std::stoi(text.substr(i, 2), nullptr, 16));
    return out;
}

static proton::type_id type_of(const std::string& t) {
    static const std::map<std::string, proton::type_id> names = {
        {"null", proton::NULL_TYPE}, {"boolean", proton::BOOLEAN}, {"ubyte", proton::UBYTE}, {"ushort", proton::USHORT},
        {"uint", proton::UINT}, {"ulong", proton::ULONG}, {"byte", proton::BYTE}, {"short", proton::SHORT},
        {"int", proton::INT}, {"long", proton::LONG}, {"float", proton::FLOAT}, {"double", proton::DOUBLE},
        {"decimal32", proton::DECIMAL32}, {"decimal64", proton::DECIMAL64}, {"decimal128", proton::DECIMAL128},
        {"char", proton::CHAR}, {"timestamp", proton::TIMESTAMP}, {"uuid", proton::UUID}, {"binary", proton::BINARY},
        {"string", proton::STRING}, {"symbol", proton::SYMBOL}, {"list", proton::LIST}, {"map", proton::MAP},
        {"array", proton::ARRAY}, {"described", proton::DESCRIBED}};
    auto it = names.find(t);
    if (it == names.end()) throw std::runtime_error("unknown type " + t);
    return it->second;
}

static std::string name_of(proton::type_id t) {
    switch (t) {
    case proton::NULL_TYPE: return "null"; case proton::BOOLEAN: return "boolean"; case proton::UBYTE: return "ubyte";
    case proton::USHORT: return "ushort"; case proton::UINT: return "uint"; case proton::ULONG: return "ulong";
    case proton::BYTE: return "byte"; case proton::SHORT: return "short"; case proton::INT: return "int";
    case proton::LONG: return "long"; case proton::FLOAT: return "float"; case proton::DOUBLE: return "double";
    case proton::DECIMAL32: return "decimal32"; case proton::DECIMAL64: return "decimal64";
    case proton::DECIMAL128: return "decimal128"; case proton::CHAR: return "char";
    case proton::TIMESTAMP: return "timestamp"; case proton::UUID: return "uuid"; case proton::BINARY: return "binary";
    case proton::STRING: return "string"; case proton::SYMBOL: return "symbol"; case proton::LIST: return "list";
    case proton::MAP: return "map"; case proton::ARRAY: return "array"; case proton::DESCRIBED: return "described";
    }
    return "unknown";
}

template <class B> static B bytes_of(const std::string& hextext) {
    B b;
    std::string raw = unhex(hextext);
    if (raw.size() != b.size()) throw std::runtime_error("expected " + std::to_string(b.size()) + " bytes");
    std::memcpy(b.begin(), raw.data(), b.size());
    return b;
}

static std::string sv(const json& tv) { return tv.at("v").get<std::string>(); }

static void encode_one(encoder& e, const json& tv) {
    const std::string t = tv.at("t").get<std::string>();
    switch (type_of(t)) {
    case proton::NULL_TYPE: e << proton::null(); break;
    case proton::BOOLEAN: e << tv.at("v").get<bool>(); break;
    case proton::UBYTE: e << static_cast<uint8_t>(std::stoul(sv(tv))); break;
    case proton::USHORT: e << static_cast<uint16_t>(std::stoul(sv(tv))); break;
    case proton::UINT: e << static_cast<uint32_t>(std::stoul(sv(tv))); break;
    case proton::ULONG: e << static_cast<uint64_t>(std::stoull(sv(tv))); break;
    case proton::BYTE: e << static_cast<int8_t>(std::stol(sv(tv))); break;
    case proton::SHORT: e << static_cast<int16_t>(std::stol(sv(tv))); break;
    case proton::INT: e << static_cast<int32_t>(std::stol(sv(tv))); break;
    case proton::LONG: e << static_cast<int64_t>(std::stoll(sv(tv))); break;
    case proton::FLOAT: {
        uint32_t bits = static_cast<uint32_t>(std::stoul(sv(tv), nullptr, 16)); float f;
        std::memcpy(&f, &bits, 4); e << f; break;
    }
    case proton::DOUBLE: {
        uint64_t bits = std::stoull(sv(tv), nullptr, 16); double d;
        std::memcpy(&d, &bits, 8); e << d; break;
    }
    case proton::DECIMAL32: e << bytes_of<proton::decimal32>(sv(tv)); break;
    case proton::DECIMAL64: e << bytes_of<proton::decimal64>(sv(tv)); break;
    case proton::DECIMAL128: e << bytes_of<proton::decimal128>(sv(tv)); break;
    case proton::CHAR: e << static_cast<wchar_t>(tv.at("v").get<uint32_t>()); break;
    case proton::TIMESTAMP: e << proton::timestamp(std::stoll(sv(tv))); break;
    case proton::UUID: e << bytes_of<proton::uuid>(sv(tv)); break;
    case proton::BINARY: e << proton::binary(unhex(sv(tv))); break;
    case proton::STRING: e << sv(tv); break;
    case proton::SYMBOL: e << proton::symbol(sv(tv)); break;
    case proton::LIST:
        e << start::list();
        for (const auto& x : tv.at("v")) encode_one(e, x);
        e << finish();
        break;
    case proton::MAP:
        e << start::map();
        for (const auto& kv : tv.at("v")) { encode_one(e, kv.at(0)); encode_one(e, kv.at(1)); }
        e << finish();
        break;
    case proton::ARRAY:
        e << start::array(type_of(tv.at("e").get<std::string>()));
        for (const auto& x : tv.at("v")) encode_one(e, x);
        e << finish();
        break;
    case proton::DESCRIBED:
        e << start::described();
        encode_one(e, tv.at("d"));
        encode_one(e, tv.at("v"));
        e << finish();
        break;
    }
}

static proton::value to_value(const json& tv) {
    proton::value v;
    encoder e(v);
    encode_one(e, tv);
    return v;
}

template <class T> static json number(const char* t, decoder& d) { T x; d >> x; return {{"t", t}, {"v", std::to_string(x)}}; }

static json decode_one(decoder& d) {
    proton::type_id t = d.next_type();
    const std::string name = name_of(t);
    switch (t) {
    // proton C++ 0.37's `decoder >> proton::null` does not move past the null: read it as a value instead
    case proton::NULL_TYPE: { proton::value skip; d >> skip; return {{"t", name}}; }
    case proton::BOOLEAN: { bool b; d >> b; return {{"t", name}, {"v", b}}; }
    case proton::UBYTE: { uint8_t x; d >> x; return {{"t", name}, {"v", std::to_string(x)}}; }
    case proton::USHORT: return number<uint16_t>("ushort", d);
    case proton::UINT: return number<uint32_t>("uint", d);
    case proton::ULONG: return number<uint64_t>("ulong", d);
    case proton::BYTE: { int8_t x; d >> x; return {{"t", name}, {"v", std::to_string(x)}}; }
    case proton::SHORT: return number<int16_t>("short", d);
    case proton::INT: return number<int32_t>("int", d);
    case proton::LONG: return number<int64_t>("long", d);
    case proton::FLOAT: { float f; d >> f; uint32_t b; std::memcpy(&b, &f, 4); char s[16]; snprintf(s, sizeof s, "%08x", b); return {{"t", name}, {"v", s}}; }
    case proton::DOUBLE: { double f; d >> f; uint64_t b; std::memcpy(&b, &f, 8); char s[24]; snprintf(s, sizeof s, "%016llx", (unsigned long long)b); return {{"t", name}, {"v", s}}; }
    case proton::DECIMAL32: { proton::decimal32 x; d >> x; return {{"t", name}, {"v", hex(x.begin(), x.size())}}; }
    case proton::DECIMAL64: { proton::decimal64 x; d >> x; return {{"t", name}, {"v", hex(x.begin(), x.size())}}; }
    case proton::DECIMAL128: { proton::decimal128 x; d >> x; return {{"t", name}, {"v", hex(x.begin(), x.size())}}; }
    case proton::CHAR: { wchar_t c; d >> c; return {{"t", name}, {"v", static_cast<uint32_t>(c)}}; }
    case proton::TIMESTAMP: { proton::timestamp ts; d >> ts; return {{"t", name}, {"v", std::to_string(ts.milliseconds())}}; }
    case proton::UUID: { proton::uuid u; d >> u; return {{"t", name}, {"v", hex(u.begin(), u.size())}}; }
    case proton::BINARY: { proton::binary b; d >> b; return {{"t", name}, {"v", hex(b.data(), b.size())}}; }
    case proton::STRING: { std::string s; d >> s; return {{"t", name}, {"v", s}}; }
    case proton::SYMBOL: { proton::symbol s; d >> s; return {{"t", name}, {"v", std::string(s)}}; }
    case proton::LIST: {
        start s; d >> s;
        json items = json::array();
        for (size_t i = 0; i < s.size; ++i) items.push_back(decode_one(d));
        d >> finish();
        return {{"t", name}, {"v", items}};
    }
    case proton::MAP: {
        start s; d >> s;
        json pairs = json::array();
        for (size_t i = 0; i + 1 < s.size + 1 && i < s.size; i += 2) {
            json k = decode_one(d);
            pairs.push_back(json::array({k, decode_one(d)}));
        }
        d >> finish();
        return {{"t", name}, {"v", pairs}};
    }
    case proton::ARRAY: {
        start s; d >> s;
        json out = {{"t", name}, {"e", name_of(s.element)}};
        if (s.is_described) out["d"] = decode_one(d);
        json items = json::array();
        for (size_t i = 0; i < s.size; ++i) items.push_back(decode_one(d));
        d >> finish();
        out["v"] = items;
        return out;
    }
    case proton::DESCRIBED: {
        start s; d >> s;
        json desc = decode_one(d);
        json value = decode_one(d);
        d >> finish();
        return {{"t", name}, {"d", desc}, {"v", value}};
    }
    }
    throw std::runtime_error("cannot decode type " + name);
}

static json from_value(const proton::value& v) {
    if (v.empty()) return {{"t", "null"}};
    decoder d(v);
    return decode_one(d);
}

static proton::message_id to_id(const json& tv) {
    const std::string t = tv.at("t").get<std::string>();
    if (t == "ulong") return proton::message_id(static_cast<uint64_t>(std::stoull(sv(tv))));
    if (t == "uuid") return proton::message_id(bytes_of<proton::uuid>(sv(tv)));
    if (t == "binary") return proton::message_id(proton::binary(unhex(sv(tv))));
    if (t == "string") return proton::message_id(sv(tv));
    throw std::runtime_error("a message-id cannot be a " + t);
}

static json from_id(const proton::message_id& id) {
    switch (id.type()) {
    case proton::ULONG: return {{"t", "ulong"}, {"v", std::to_string(proton::get<uint64_t>(id))}};
    case proton::UUID: { proton::uuid u = proton::get<proton::uuid>(id); return {{"t", "uuid"}, {"v", hex(u.begin(), u.size())}}; }
    case proton::BINARY: { proton::binary b = proton::get<proton::binary>(id); return {{"t", "binary"}, {"v", hex(b.data(), b.size())}}; }
    case proton::STRING: return {{"t", "string"}, {"v", proton::get<std::string>(id)}};
    default: return {{"t", name_of(id.type())}};
    }
}

static proton::message encode_message(const json& m) {
    proton::message msg;
    if (m.contains("header")) {
        const json& h = m["header"];
        if (h.contains("durable")) msg.durable(h["durable"].get<bool>());
        if (h.contains("priority")) msg.priority(h["priority"].get<uint8_t>());
        if (h.contains("ttl")) msg.ttl(proton::duration(h["ttl"].get<int64_t>()));
    }
    if (m.contains("properties")) {
        const json& p = m["properties"];
        if (p.contains("message_id")) msg.id(to_id(p["message_id"]));
        if (p.contains("correlation_id")) msg.correlation_id(to_id(p["correlation_id"]));
        if (p.contains("subject")) msg.subject(p["subject"].get<std::string>());
        if (p.contains("reply_to")) msg.reply_to(p["reply_to"].get<std::string>());
        if (p.contains("group_id")) msg.group_id(p["group_id"].get<std::string>());
        if (p.contains("to")) msg.to(p["to"].get<std::string>());
        if (p.contains("content_type")) msg.content_type(p["content_type"].get<std::string>());
        if (p.contains("creation_time")) msg.creation_time(proton::timestamp(p["creation_time"].get<int64_t>()));
    }
    if (m.contains("annotations"))
        for (const auto& kv : m["annotations"])
            msg.message_annotations().put(proton::annotation_key(proton::symbol(sv(kv.at(0)))), to_value(kv.at(1)));
    if (m.contains("app_properties"))
        for (const auto& kv : m["app_properties"]) {
            proton::scalar s;
            proton::get(to_value(kv.at(1)), s);  // application-properties hold simple (scalar) values only
            msg.properties().put(sv(kv.at(0)), s);
        }
    if (m.contains("body")) msg.body(to_value(m["body"]));
    msg.inferred(false);
    return msg;
}

static json decode_message(proton::message& msg) {
    json out = {{"header", {{"durable", msg.durable()}, {"priority", msg.priority()}}}, {"properties", json::object()}};
    if (msg.ttl().milliseconds()) out["header"]["ttl"] = msg.ttl().milliseconds();
    json& p = out["properties"];
    if (!msg.id().empty()) p["message_id"] = from_id(msg.id());
    if (!msg.correlation_id().empty()) p["correlation_id"] = from_id(msg.correlation_id());
    if (!msg.subject().empty()) p["subject"] = msg.subject();
    if (!msg.reply_to().empty()) p["reply_to"] = msg.reply_to();
    if (!msg.group_id().empty()) p["group_id"] = msg.group_id();
    if (!msg.to().empty()) p["to"] = msg.to();
    if (!msg.content_type().empty()) p["content_type"] = msg.content_type();
    if (msg.creation_time().milliseconds()) p["creation_time"] = msg.creation_time().milliseconds();
    if (!msg.message_annotations().empty()) out["annotations"] = from_value(msg.message_annotations().value())["v"];
    if (!msg.properties().empty()) out["app_properties"] = from_value(msg.properties().value())["v"];
    out["body"] = from_value(msg.body());
    return out;
}

// ---- connections and links ------------------------------------------------------------------------------------

static std::mutex lock;
static std::condition_variable changed;

struct link_state {
    proton::sender snd;
    proton::receiver rcv;
    bool is_sender = false, open = false, closed = false, presettled = false, autosettle = false;
    std::string error;
    std::deque<proton::message> pending;             // sender: waiting for credit
    size_t next_index = 0;                           // sender: index of the next message of the current send
    std::map<proton::tracker, size_t> trackers;      // sender: in flight -> index in outcomes
    std::vector<std::string> outcomes;               // sender: of the current send, "" until known
    std::deque<std::pair<proton::delivery, json>> incoming;  // receiver: arrived, not yet taken
    std::deque<proton::delivery> unsettled;                  // receiver: taken, not yet settled
};

struct conn_state;
static std::map<std::string, std::shared_ptr<link_state>> links;

struct conn_state : proton::messaging_handler {
    proton::connection conn;
    proton::work_queue* queue = nullptr;
    bool open = false, closed = false;
    std::string error;
    std::map<std::string, std::shared_ptr<link_state>> by_name;

    std::shared_ptr<link_state> of(const proton::link& l) {
        auto it = by_name.find(l.name());
        return it == by_name.end() ? nullptr : it->second;
    }

    void on_connection_open(proton::connection& c) override {
        std::lock_guard<std::mutex> g(lock);
        conn = c; queue = &c.work_queue(); open = true; changed.notify_all();
    }
    void lost(const std::string& why) {  // lock held: every link of the connection ends with it
        for (auto& kv : by_name) if (!kv.second->closed) { kv.second->closed = true; kv.second->error = why; }
        changed.notify_all();
    }
    void on_connection_close(proton::connection&) override {
        std::lock_guard<std::mutex> g(lock); closed = true; lost("the connection closed");
    }
    void on_connection_error(proton::connection& c) override {
        std::lock_guard<std::mutex> g(lock); error = c.error().what(); closed = true; lost(error);
    }
    void on_transport_error(proton::transport& t) override {
        std::lock_guard<std::mutex> g(lock); error = t.error().what(); closed = true; lost(error);
    }
    void on_session_close(proton::session&) override {
        std::lock_guard<std::mutex> g(lock); lost("the peer ended the session");
    }
    void on_session_error(proton::session& s) override {
        std::lock_guard<std::mutex> g(lock); lost("the peer ended the session: " + s.error().what());
    }
    void on_sender_open(proton::sender& s) override { opened(s); }
    void on_receiver_open(proton::receiver& r) override { opened(r); }
    void opened(proton::link& l) {
        std::lock_guard<std::mutex> g(lock);
        if (auto st = of(l)) { st->open = true; changed.notify_all(); }
    }
    void on_sender_error(proton::sender& s) override { failed(s); }
    void on_receiver_error(proton::receiver& r) override { failed(r); }
    void failed(proton::link& l) {
        std::lock_guard<std::mutex> g(lock);
        if (auto st = of(l)) { st->error = l.error().what(); st->closed = true; changed.notify_all(); }
    }
    void on_sender_close(proton::sender& s) override { closed_link(s); }
    void on_receiver_close(proton::receiver& r) override { closed_link(r); }
    void closed_link(proton::link& l) {
        std::lock_guard<std::mutex> g(lock);
        if (auto st = of(l)) { st->closed = true; changed.notify_all(); }
    }
    void on_sendable(proton::sender& s) override {
        std::lock_guard<std::mutex> g(lock);
        if (auto st = of(s)) pump(*st);
    }
    void pump(link_state& st) {  // lock held, container thread
        while (!st.pending.empty() && st.snd.credit() > 0) {
            proton::tracker t = st.snd.send(st.pending.front());
            st.pending.pop_front();
            size_t index = st.next_index++;
            if (st.presettled) st.outcomes[index] = "settled";
            else st.trackers[t] = index;
        }
        changed.notify_all();
    }
    void outcome(proton::tracker& t, const char* what) {
        std::lock_guard<std::mutex> g(lock);
        auto st = of(t.sender());
        if (!st) return;
        auto it = st->trackers.find(t);
        if (it == st->trackers.end()) return;
        if (it->second < st->outcomes.size() && st->outcomes[it->second].empty()) st->outcomes[it->second] = what;
        st->trackers.erase(it);
        changed.notify_all();
    }
    void on_tracker_accept(proton::tracker& t) override { outcome(t, "accepted"); }
    void on_tracker_reject(proton::tracker& t) override { outcome(t, "rejected"); }
    void on_tracker_release(proton::tracker& t) override {
        outcome(t, t.state() == proton::transfer::MODIFIED ? "modified" : "released");
    }
    void on_tracker_settle(proton::tracker& t) override { outcome(t, "settled"); }
    void on_message(proton::delivery& d, proton::message& m) override {
        json decoded;
        try { decoded = decode_message(m); }
        catch (const std::exception& e) { decoded = {{"error", std::string("decode: ") + e.what()}}; }
        std::lock_guard<std::mutex> g(lock);
        auto st = of(d.receiver());
        if (!st) return;
        if (st->autosettle) {  // accepted on arrival, and the credit it used given back
            d.accept();
            d.receiver().add_credit(1);
        }
        st->incoming.emplace_back(d, decoded);
        changed.notify_all();
    }
};

static proton::container* the_container = nullptr;
static std::map<std::string, std::unique_ptr<conn_state>> conns;

template <class Pred> static void wait_until(std::unique_lock<std::mutex>& g, double seconds, const std::string& what, Pred pred) {
    if (!changed.wait_for(g, std::chrono::duration<double>(seconds), pred))
        throw std::runtime_error(what + ": no result within " + std::to_string(seconds) + "s");
}

static conn_state& conn_of(const json& req) {
    auto it = conns.find(req.at("conn").get<std::string>());
    if (it == conns.end()) throw std::runtime_error("no connection " + req.at("conn").get<std::string>());
    return *it->second;
}

static std::shared_ptr<link_state> link_of(const json& req) {
    auto it = links.find(req.at("link").get<std::string>());
    if (it == links.end()) throw std::runtime_error("no link " + req.at("link").get<std::string>());
    return it->second;
}

static void run_on(conn_state& c, std::function<void()> fn) {
    if (!c.queue->add(proton::make_work(fn))) throw std::runtime_error("the connection is closed");
}

static json handle(const json& req) {
    const std::string op = req.at("op").get<std::string>();
    const double timeout = req.value("timeout", 10.0);
    if (op == "hello")
        return {{"stack", STACK}, {"version", "0.37"},
                {"capabilities", {"types.decimal", "types.described", "types.array", "settle.presettled",
                                  "outcome.reject", "outcome.release", "outcome.modify"}}};
    if (op == "connect") {
        auto c = std::make_unique<conn_state>();
        conn_state* raw = c.get();
        {
            std::lock_guard<std::mutex> g(lock);
            conns[req.at("conn").get<std::string>()] = std::move(c);
        }
        proton::connection_options opts;
        opts.handler(*raw);
        // A container-id per connection: ActiveMQ Classic refuses a second connection with one it has.
        opts.container_id("interop-cpp-shim-" + std::to_string(::getpid()) + "-" + req.at("conn").get<std::string>());
        std::string url = req.at("url").get<std::string>();
        
        the_container->connect(url, opts);
        std::unique_lock<std::mutex> g(lock);
        wait_until(g, timeout, "connect", [&] { return raw->open || raw->closed; });
        if (!raw->open) throw std::runtime_error("connect: " + (raw->error.empty() ? "refused" : raw->error));
        return json::object();
    }
    if (op == "sender" || op == "receiver") {
        conn_state& c = conn_of(req);
        auto st = std::make_shared<link_state>();
        st->is_sender = op == "sender";
        st->presettled = req.value("settle", "unsettled") == "presettled";
        st->autosettle = req.value("settle", "unsettled") == "auto";
        const std::string name = req.at("link").get<std::string>(), address = req.at("address").get<std::string>();
        const int credit = req.value("credit", 10);
        {
            std::lock_guard<std::mutex> g(lock);
            c.by_name[name] = st;
            links[name] = st;
        }
        run_on(c, [&c, st, name, address, credit]() {
            std::lock_guard<std::mutex> g(lock);
            if (st->is_sender) {
                proton::sender_options o;
                o.name(name).target(proton::target_options().address(address));
                o.delivery_mode(st->presettled ? proton::delivery_mode::AT_MOST_ONCE : proton::delivery_mode::AT_LEAST_ONCE);
                st->snd = c.conn.open_sender(address, o);
            } else {
                proton::receiver_options o;
                o.name(name).source(proton::source_options().address(address)).credit_window(0).auto_accept(false);
                st->rcv = c.conn.open_receiver(address, o);
                st->rcv.add_credit(credit);
            }
        });
        std::unique_lock<std::mutex> g(lock);
        wait_until(g, timeout, op, [&] { return st->open || st->closed; });
        if (!st->open) throw std::runtime_error(op + " refused: " + st->error);
        return json::object();
    }
    if (op == "send") {
        auto st = link_of(req);
        conn_state* c = nullptr;
        for (auto& kv : conns) if (kv.second->by_name.count(req.at("link").get<std::string>())) c = kv.second.get();
        std::vector<proton::message> msgs;
        for (const auto& m : req.at("messages")) msgs.push_back(encode_message(m));
        {
            std::lock_guard<std::mutex> g(lock);
            st->outcomes.assign(msgs.size(), "");
            st->next_index = 0;
            for (auto& m : msgs) st->pending.push_back(m);
        }
        run_on(*c, [c, st]() { std::lock_guard<std::mutex> g(lock); c->pump(*st); });
        std::unique_lock<std::mutex> g(lock);
        wait_until(g, timeout, "send", [&] {
            if (st->closed) return true;
            for (auto& o : st->outcomes) if (o.empty()) return false;
            return true;
        });
        if (st->closed) throw std::runtime_error("send: the link closed: " + st->error);
        return {{"outcomes", st->outcomes}};
    }
    if (op == "receive") {
        auto st = link_of(req);
        const size_t count = req.at("count").get<size_t>();
        std::unique_lock<std::mutex> g(lock);
        wait_until(g, timeout, "receive", [&] { return st->incoming.size() >= count || st->closed; });
        if (st->incoming.size() < count) throw std::runtime_error("receive: the link closed: " + st->error);
        json messages = json::array();
        for (size_t i = 0; i < count; ++i) {
            auto& front = st->incoming.front();
            if (front.second.contains("error")) throw std::runtime_error(front.second["error"].get<std::string>());
            messages.push_back(front.second);
            if (!st->autosettle) st->unsettled.push_back(front.first);
            st->incoming.pop_front();
        }
        return {{"messages", messages}};
    }
    if (op == "flow") {
        auto st = link_of(req);
        const int credit = req.at("credit").get<int>();
        for (auto& kv : conns) if (kv.second->by_name.count(req.at("link").get<std::string>())) {
            proton::receiver r = st->rcv;
            run_on(*kv.second, [r, credit]() mutable { r.add_credit(credit); });
        }
        return json::object();
    }
    if (op == "settle") {
        auto st = link_of(req);
        conn_state* c = nullptr;
        for (auto& kv : conns) if (kv.second->by_name.count(req.at("link").get<std::string>())) c = kv.second.get();
        std::vector<proton::delivery> ds;
        {
            std::lock_guard<std::mutex> g(lock);
            size_t n = req.value("count", 0);
            if (n == 0 || n > st->unsettled.size()) n = st->unsettled.size();
            for (size_t i = 0; i < n; ++i) { ds.push_back(st->unsettled.front()); st->unsettled.pop_front(); }
        }
        const std::string outcome = req.value("outcome", "accept");
        run_on(*c, [ds, outcome]() mutable {
            for (auto& d : ds) {
                if (outcome == "reject") d.reject();
                else if (outcome == "release") d.release();
                else if (outcome == "modify") d.modify();
                else d.accept();
            }
        });
        return {{"settled", ds.size()}};
    }
    if (op == "detach") {
        auto st = link_of(req);
        conn_state* c = nullptr;
        for (auto& kv : conns) if (kv.second->by_name.count(req.at("link").get<std::string>())) c = kv.second.get();
        run_on(*c, [st]() { if (st->is_sender) st->snd.close(); else st->rcv.close(); });
        std::unique_lock<std::mutex> g(lock);
        wait_until(g, timeout, "detach", [&] { return st->closed; });
        return json::object();
    }
    if (op == "close") {
        conn_state& c = conn_of(req);
        run_on(c, [&c]() { c.conn.close(); });
        std::unique_lock<std::mutex> g(lock);
        wait_until(g, timeout, "close", [&] { return c.closed; });
        return json::object();
    }
    throw std::runtime_error("unknown op " + op);
}

struct idle_handler : proton::messaging_handler {};

int main() {
    std::ios::sync_with_stdio(false);
    idle_handler idle;
    proton::container container(idle, "interop-cpp-shim");
    container.auto_stop(false);
    the_container = &container;
    std::thread loop([&] { container.run(); });
    std::string line;
    while (std::getline(std::cin, line)) {
        if (line.empty()) continue;
        json req, answer;
        try {
            req = json::parse(line);
            answer["id"] = req.value("id", 0);
            if (req.at("op") == "exit") { answer["ok"] = json::object(); std::cout << answer.dump() << std::endl; break; }
            answer["ok"] = handle(req);
        } catch (const std::exception& e) {
            answer["error"] = e.what();
        }
        std::cout << answer.dump(-1, ' ', false, json::error_handler_t::replace) << std::endl;
    }
    container.stop();
    loop.join();
    return 0;
}
