#!/usr/bin/env node
// The rhea client stack of the interop harness, as a line-protocol shim (harness/drivers.py).
//
// One JSON request per line on stdin, one JSON answer per line on stdout, in order ({"id": N, "ok": {...}} or
// {"id": N, "error": "..."}). AMQP values travel as typed JSON ({"t": "ubyte", "v": "255"}, clients/README.md).
//
// Sending uses rhea's typed constructors (rhea.types.Ubyte, wrap_ulong, Array32, described, ...). Receiving reads
// what rhea's own decoder made of each section: rhea.types.Reader, the layer under message.decode, which keeps
// the type code of every value (message.decode itself unwraps numbers to plain JS numbers, so an application
// using only the message API cannot tell ubyte from long).
'use strict';

const readline = require('readline');
const rhea = require('rhea');
const types = rhea.types;
const message = rhea.message;

const STACK = 'rhea';
const VERSION = require('rhea/package.json').version;
const CAPABILITIES = ['types.decimal', 'types.described', 'types.array', 'settle.presettled', 'outcome.reject',
                      'outcome.release', 'outcome.modify'];
// AMQP over WebSocket (`ws://` URLs) needs the npm package ws beside rhea.
try { require.resolve('ws'); CAPABILITIES.push('transport.websocket'); } catch (err) { /* no ws: plain AMQP only */ }

// Keep the typed sections rhea's decoder read, beside the message it made of them.
const plainDecode = message.decode;
message.decode = function (buffer) {
    const msg = plainDecode(buffer);
    const reader = new types.Reader(buffer);
    const sections = [];
    while (reader.remaining() > 0) sections.push(reader.read());
    Object.defineProperty(msg, '_sections', {value: sections, enumerable: false});
    return msg;
};

const CODES = {
    0x40: 'null', 0x41: 'boolean', 0x42: 'boolean', 0x56: 'boolean', 0x50: 'ubyte', 0x60: 'ushort',
    0x70: 'uint', 0x52: 'uint', 0x43: 'uint', 0x80: 'ulong', 0x53: 'ulong', 0x44: 'ulong', 0x51: 'byte',
    0x61: 'short', 0x71: 'int', 0x54: 'int', 0x81: 'long', 0x55: 'long', 0x72: 'float', 0x82: 'double',
    0x74: 'decimal32', 0x84: 'decimal64', 0x94: 'decimal128', 0x73: 'char', 0x83: 'timestamp', 0x98: 'uuid',
    0xa0: 'binary', 0xb0: 'binary', 0xa1: 'string', 0xb1: 'string', 0xa3: 'symbol', 0xb3: 'symbol',
    0x45: 'list', 0xc0: 'list', 0xd0: 'list', 0xc1: 'map', 0xd1: 'map', 0xe0: 'array', 0xf0: 'array',
};
const ARRAY_CODES = {
    boolean: 0x56, ubyte: 0x50, ushort: 0x60, uint: 0x70, ulong: 0x80, byte: 0x51, short: 0x61, int: 0x71,
    long: 0x81, float: 0x72, double: 0x82, char: 0x73, timestamp: 0x83, uuid: 0x98, binary: 0xb0,
    string: 0xb1, symbol: 0xb3,
};

function int64Buffer(text, signed) {
    const b = Buffer.alloc(8);
    if (signed) b.writeBigInt64BE(BigInt(text)); else b.writeBigUInt64BE(BigInt(text));
    return b;
}

function int64Text(value, signed) {
    if (Buffer.isBuffer(value)) return (signed ? value.readBigInt64BE(0) : value.readBigUInt64BE(0)).toString();
    return String(value);
}

// typed JSON -> rhea Typed
function toTyped(tv) {
    const v = tv.v;
    switch (tv.t) {
    case 'null': return types.Null();
    case 'boolean': return types.wrap_boolean(v);
    case 'ubyte': return types.Ubyte(Number(v));
    case 'ushort': return types.Ushort(Number(v));
    case 'uint': return types.wrap_uint(Number(v));
    case 'ulong': return types.wrap_ulong(int64Buffer(v, false));
    case 'byte': return types.Byte(Number(v));
    case 'short': return types.Short(Number(v));
    case 'int': return types.wrap_int(Number(v));
    case 'long': return types.wrap_long(int64Buffer(v, true));
    case 'float': return types.Float(Buffer.from(v, 'hex').readFloatBE(0));
    case 'double': return types.Double(Buffer.from(v, 'hex').readDoubleBE(0));
    case 'decimal32': return types.Decimal32(Buffer.from(v, 'hex'));
    case 'decimal64': return types.Decimal64(Buffer.from(v, 'hex'));
    case 'decimal128': return types.Decimal128(Buffer.from(v, 'hex'));
    case 'char': return types.wrap_char(v);
    case 'timestamp': return types.Timestamp(int64Buffer(v, true));
    case 'uuid': return types.wrap_uuid(Buffer.from(v, 'hex'));
    case 'binary': return types.wrap_binary(Buffer.from(v, 'hex'));
    case 'string': return types.wrap_string(v);
    case 'symbol': return types.wrap_symbol(v);
    case 'list': return v.length ? types.List32(v.map(toTyped)) : types.List0();
    case 'map': return types.Map32([].concat(...v.map(([k, x]) => [toTyped(k), toTyped(x)])));
    case 'array': {
        const code = ARRAY_CODES[tv.e];
        if (code === undefined) throw new Error('no rhea array of ' + tv.e);
        return types.wrap_array(v.map((x) => toTyped(x).value), code);
    }
    case 'described': return types.described(toTyped(tv.d), toTyped(v));
    default: throw new Error('unknown type ' + tv.t);
    }
}

function hexOfFloat(value, width) {
    const b = Buffer.alloc(width);
    if (width === 4) b.writeFloatBE(value); else b.writeDoubleBE(value);
    return b.toString('hex');
}

// rhea Typed (as types.Reader made it) -> typed JSON
function fromTyped(o, skipDescriptor) {
    if (!skipDescriptor && o.descriptor !== undefined) {
        return {t: 'described', d: fromTyped(o.descriptor), v: fromTyped(o, true)};
    }
    const code = o.type.typecode;
    const t = CODES[code];
    const v = o.value;
    switch (t) {
    case 'null': return {t};
    case 'boolean': return {t, v: code === 0x56 ? v !== 0 : v};
    case 'ubyte': case 'ushort': case 'uint': case 'byte': case 'short': case 'int': return {t, v: String(v)};
    case 'ulong': return {t, v: int64Text(v, false)};
    case 'long': return {t, v: int64Text(v, true)};
    case 'float': return {t, v: hexOfFloat(v, 4)};
    case 'double': return {t, v: hexOfFloat(v, 8)};
    case 'decimal32': case 'decimal64': case 'decimal128': case 'uuid': case 'binary':
        return {t, v: Buffer.from(v).toString('hex')};
    case 'char': return {t, v};
    case 'timestamp': return {t, v: String(v instanceof Date ? v.getTime() : v)};
    case 'string': case 'symbol': return {t, v: String(v)};
    case 'list': return {t, v: v.map((x) => fromTyped(x))};
    case 'map': {
        const pairs = [];
        for (let i = 0; i + 1 < v.length; i += 2) pairs.push([fromTyped(v[i]), fromTyped(v[i + 1])]);
        return {t, v: pairs};
    }
    case 'array': {
        const e = CODES[o.array_constructor.typecode];
        return {t, e, v: v.map((x) => fromTyped(x))};
    }
    default: throw new Error('rhea decoded an unknown type code 0x' + code.toString(16));
    }
}

function encodeMessage(m) {
    const msg = {};
    const h = m.header || {};
    if ('durable' in h) msg.durable = h.durable;
    if ('priority' in h) msg.priority = h.priority;
    if ('ttl' in h) msg.ttl = h.ttl;
    const p = m.properties || {};
    if ('message_id' in p) msg.message_id = toTyped(p.message_id);
    if ('correlation_id' in p) msg.correlation_id = toTyped(p.correlation_id);
    for (const key of ['subject', 'reply_to', 'group_id', 'to', 'content_type']) if (key in p) msg[key] = p[key];
    if ('creation_time' in p) msg.creation_time = p.creation_time;
    if (m.annotations && m.annotations.length) {
        msg.message_annotations = {};
        for (const [k, v] of m.annotations) msg.message_annotations[k.v] = toTyped(v);
    }
    if (m.app_properties && m.app_properties.length) {
        msg.application_properties = {};
        for (const [k, v] of m.app_properties) msg.application_properties[k.v] = toTyped(v);
    }
    if ('body' in m) msg.body = toTyped(m.body);
    return msg;
}

const HEADER = ['durable', 'priority', 'ttl'];
const PROPERTIES = {0: 'message_id', 2: 'to', 3: 'subject', 4: 'reply_to', 5: 'correlation_id', 6: 'content_type',
                    9: 'creation_time', 10: 'group_id'};

function decodeMessage(msg) {
    const out = {header: {durable: false, priority: 4}, properties: {}};
    for (const s of msg._sections) {
        const d = Number(s.descriptor.value);
        if (d === 0x70) {
            s.value.forEach((f, i) => {
                if (i < HEADER.length && f.type.typecode !== 0x40) {
                    const x = fromTyped(f);
                    out.header[HEADER[i]] = x.t === 'boolean' ? x.v : Number(x.v);
                }
            });
        } else if (d === 0x73) {
            s.value.forEach((f, i) => {
                const key = PROPERTIES[i];
                if (key === undefined || f.type.typecode === 0x40) return;
                const x = fromTyped(f);
                if (key === 'message_id' || key === 'correlation_id') out.properties[key] = x;
                else if (key === 'creation_time') out.properties[key] = Number(x.v);
                else out.properties[key] = x.v;
            });
        } else if (d === 0x72 || d === 0x74) {
            const pairs = fromTyped(s, true).v;
            if (pairs.length) out[d === 0x72 ? 'annotations' : 'app_properties'] = pairs;
        } else if (d === 0x77) {
            out.body = fromTyped(s, true);
        }
    }
    return out;
}

const container = rhea.create_container({id: 'interop-rhea-shim'});
const conns = new Map();
const links = new Map();

function once(emitter, ok, bad) {
    return new Promise((resolve, reject) => {
        const onOk = (ctx) => { done(); resolve(ctx); };
        const onBad = (ctx) => {
            done();
            const err = (ctx && (ctx.link || ctx.connection || {}).error) || (ctx && ctx.error);
            reject(new Error(bad + (err ? ': ' + (err.condition || '') + ' ' + (err.description || err.message || '') : '')));
        };
        const done = () => { emitter.removeListener(ok, onOk); emitter.removeListener(bad, onBad); };
        emitter.once(ok, onOk);
        emitter.once(bad, onBad);
    });
}

const ops = {
    async hello() { return {stack: STACK, version: VERSION, capabilities: CAPABILITIES}; },

    async connect(req) {
        const url = new URL(req.url);
        // A container-id per connection: ActiveMQ Classic refuses a second connection with one it has.
        // SASL always, as proton's clients do: ANONYMOUS unless the URL names a user (PLAIN then). Without a
        // username rhea skips SASL altogether, and ActiveMQ Classic refuses a connection without it.
        const user = url.username ? decodeURIComponent(url.username) : 'anonymous';
        const password = url.password ? decodeURIComponent(url.password) : undefined;
        const options = {host: url.hostname, port: Number(url.port), reconnect: false,
                         username: user, password: password,
                         container_id: `interop-rhea-shim-${rhea.generate_uuid().slice(0, 8)}`};
        if (url.protocol === 'ws:' || url.protocol === 'wss:') {
            // AMQP over WebSocket (RFC 6455, subprotocol "amqp"): rhea's WebSocket transport over the npm package
            // `ws`, an implementation independent of the routers'. The URL's user part is not sent to the server.
            let WebSocket;
            try { WebSocket = require('ws'); } catch (err) {
                throw new Error('rhea: the npm package ws is missing (`make setup` runs npm ci in clients/rhea)');
            }
            const target = `${url.protocol}//${url.host}${url.pathname}${url.search}`;
            options.connection_details = container.websocket_connect(WebSocket)(target, ['amqp'], {});
        }
        const conn = container.connect(options);
        conn.on('error', () => {});
        // A peer that ends the session or the connection (RabbitMQ does, on an error) ends every link on it:
        // whatever waits on one of them is told so at once.
        conn.lost = new Promise((_, reject) => {
            for (const ev of ['disconnected', 'connection_close', 'connection_error', 'session_close', 'session_error']) {
                conn.on(ev, (ctx) => {
                    const err = ctx && ((ctx.session && ctx.session.error) || (ctx.connection && ctx.connection.error) || ctx.error);
                    reject(new Error('the connection was lost (' + ev + (err ? ': ' + (err.condition || '') + ' ' + (err.description || err.message || '') : '') + ')'));
                });
            }
        });
        conn.lost.catch(() => {});
        conns.set(req.conn, conn);
        await Promise.race([once(conn, 'connection_open', 'connection_error'),
                            once(conn, 'connection_open', 'disconnected')]);
        return {};
    },

    async sender(req) {
        const conn = conns.get(req.conn);
        const options = {name: req.link, target: {address: req.address}};
        if (req.settle === 'presettled') options.snd_settle_mode = 1;
        const sender = conn.open_sender(options);
        const state = {sender, outcomes: new Map(), conn};
        for (const outcome of ['accepted', 'rejected', 'released', 'modified']) {
            sender.on(outcome, (ctx) => {
                const w = state.outcomes.get(ctx.delivery);
                if (w) w(outcome);
            });
        }
        sender.on('sender_error', () => {});
        links.set(req.link, state);
        await once(sender, 'sender_open', 'sender_close');
        return {};
    },

    async receiver(req) {
        const conn = conns.get(req.conn);
        const receiver = conn.open_receiver({name: req.link, source: {address: req.address}, autoaccept: false,
                                             credit_window: 0});
        const state = {receiver, incoming: [], unsettled: [], waiter: null, auto: req.settle === 'auto'};
        receiver.on('message', (ctx) => {
            if (state.auto) {  // accepted on arrival, and the credit it used given back
                ctx.delivery.accept();
                receiver.add_credit(1);
            }
            state.incoming.push({msg: ctx.message, delivery: ctx.delivery});
            if (state.waiter) state.waiter();
        });
        receiver.on('receiver_error', () => {});
        links.set(req.link, state);
        await once(receiver, 'receiver_open', 'receiver_close');
        receiver.add_credit(req.credit || 10);
        return {};
    },

    async send(req) {
        const state = links.get(req.link);
        const sender = state.sender;
        const pending = [];
        for (const m of req.messages) {
            while (!sender.sendable()) await Promise.race([once(sender, 'sendable', 'sender_close'), state.conn.lost]);
            const msg = encodeMessage(m);
            const delivery = sender.send(msg);
            if (sender.snd_settle_mode === 1 || delivery.settled) {
                pending.push(Promise.resolve('settled'));
            } else {
                pending.push(new Promise((resolve) => state.outcomes.set(delivery, resolve)));
            }
        }
        return {outcomes: await Promise.race([Promise.all(pending), state.conn.lost])};
    },

    async receive(req) {
        const state = links.get(req.link);
        while (state.incoming.length < req.count) {
            await new Promise((resolve) => { state.waiter = resolve; });
            state.waiter = null;
        }
        const got = state.incoming.splice(0, req.count);
        if (!state.auto) {
            for (const g of got) if (!g.delivery.remote_settled) state.unsettled.push(g.delivery);
        }
        return {messages: got.map((g) => decodeMessage(g.msg))};
    },

    async flow(req) {
        links.get(req.link).receiver.add_credit(req.credit);
        return {};
    },

    async settle(req) {
        const state = links.get(req.link);
        const n = req.count || state.unsettled.length;
        for (const d of state.unsettled.splice(0, n)) {
            if (req.outcome === 'reject') d.reject();
            else if (req.outcome === 'release') d.release();  // released (with params rhea sends modified)
            else if (req.outcome === 'modify') d.release({delivery_failed: true});
            else d.accept();
        }
        return {settled: n};
    },

    async detach(req) {
        const state = links.get(req.link);
        links.delete(req.link);
        const link = state.sender || state.receiver;
        link.close();
        await once(link, state.sender ? 'sender_close' : 'receiver_close', 'disconnected').catch(() => {});
        return {};
    },

    async close(req) {
        const conn = conns.get(req.conn);
        conns.delete(req.conn);
        conn.close();
        await Promise.race([once(conn, 'connection_close', 'disconnected'), conn.lost]).catch(() => {});
        return {};
    },
};

function withDeadline(promise, seconds, op) {
    let timer;
    const deadline = new Promise((_, reject) => {
        timer = setTimeout(() => reject(new Error(op + ': no result within ' + seconds + 's')), seconds * 1000);
    });
    return Promise.race([promise, deadline]).finally(() => clearTimeout(timer));
}

function answer(obj) { process.stdout.write(JSON.stringify(obj) + '\n'); }

const lines = readline.createInterface({input: process.stdin});
let queue = Promise.resolve();
lines.on('line', (line) => {
    if (!line.trim()) return;
    queue = queue.then(async () => {
        let req = {};
        try {
            req = JSON.parse(line);
            if (req.op === 'exit') {
                answer({id: req.id, ok: {}});
                process.exit(0);
            }
            const fn = ops[req.op];
            if (!fn) throw new Error('unknown op ' + req.op);
            answer({id: req.id, ok: await withDeadline(fn(req), req.timeout || 10, req.op)});
        } catch (err) {
            answer({id: req.id, error: String(err && err.message || err)});
        }
    });
});
lines.on('close', () => process.exit(0));
