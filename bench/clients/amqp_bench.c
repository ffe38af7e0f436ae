/* A lean AMQP 1.0 sender and receiver on Qpid Proton-C's proactor, for bench/routing.py.
 *
 * Python clients cannot drive qdrouterd (or a fast reference router) to its limit: with them the client is
 * the bottleneck. These do the least per message: the sender sends one pre-encoded message (a data section
 * whose first 8 bytes it overwrites with the send time, CLOCK_MONOTONIC in ns, the clock Python's
 * time.monotonic_ns() reads too), the receiver reads those 8 bytes from the end of what arrived (routers
 * add annotations in front, never after the body) and keeps the latency.
 *
 *   amqp_bench send HOST:PORT ADDRESS COUNT SIZE presettled|unsettled [listen]
 *   amqp_bench recv HOST:PORT ADDRESS COUNT SIZE WINDOW [listen]
 *
 * `listen` accepts one connection on HOST:PORT (port 0: a free one) instead of dialling: the direct,
 * client-to-client ceiling. Each prints `ready` (or `listening PORT`) once attached, then one JSON line.
 * A receiver that got nothing for IDLE_MS after its first message reports what it has and exits: a router
 * may drop pre-settled messages (at-most-once), and the count then says how many arrived.
 */
#include <proton/condition.h>
#include <proton/connection.h>
#include <proton/delivery.h>
#include <proton/link.h>
#include <proton/listener.h>
#include <proton/netaddr.h>
#include <proton/proactor.h>
#include <proton/session.h>
#include <proton/transport.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define IDLE_MS 3000

static int sending, presettled, listening, done_flag;
static long count, size, window;
static const char *address;
static long sent, settled, received;
static int64_t t_start, t_first, t_last, t_end;
static uint32_t *latency_us;
static char *message; static size_t message_len; static size_t stamp_at;
static char *inbuf; static size_t inbuf_len;
static pn_proactor_t *proactor;
static pn_listener_t *listener;

static int64_t now_ns(void) {
  struct timespec ts; clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void fail(const char *what) { fprintf(stderr, "amqp_bench: %s\n", what); exit(2); }

static void check_condition(pn_condition_t *cond) {
  if (pn_condition_is_set(cond)) {
    fprintf(stderr, "amqp_bench: %s: %s\n", pn_condition_get_name(cond), pn_condition_get_description(cond));
    exit(3);
  }
}

/* The one message: data section (0x00 0x53 0x75, vbin8/vbin32) of SIZE bytes. */
static void build_message(void) {
  size_t head = size <= 255 ? 5 : 8;
  message_len = head + size;
  message = calloc(1, message_len);
  message[0] = 0x00; message[1] = 0x53; message[2] = 0x75;
  if (size <= 255) { message[3] = (char)0xa0; message[4] = (char)size; }
  else { message[3] = (char)0xb0; message[4] = (char)(size >> 24); message[5] = (char)(size >> 16);
         message[6] = (char)(size >> 8); message[7] = (char)size; }
  stamp_at = head;
  for (long i = 8; i < size; i++) message[head + i] = (char)('a' + i % 26);
}

static void put_stamp(char *at, int64_t t) { for (int i = 7; i >= 0; i--) { at[i] = (char)(t & 0xff); t >>= 8; } }
static int64_t get_stamp(const char *at) {
  int64_t t = 0; for (int i = 0; i < 8; i++) t = (t << 8) | (unsigned char)at[i]; return t;
}

static void finish(pn_connection_t *c);

static void send_some(pn_link_t *link) {
  while (pn_link_credit(link) > 0 && sent < count) {
    char tag[16]; int n = snprintf(tag, sizeof tag, "%lx", sent);
    pn_delivery_t *d = pn_delivery(link, pn_dtag(tag, (size_t)n));
    if (t_start == 0) t_start = now_ns();
    put_stamp(message + stamp_at, now_ns());
    pn_link_send(link, message, message_len);
    pn_link_advance(link);
    if (presettled) pn_delivery_settle(d);
    sent++;
  }
  if (presettled && sent == count && !done_flag) {
    t_end = now_ns(); done_flag = 1;
    finish(pn_session_connection(pn_link_session(link)));  /* the close frame follows what is written */
  }
}

static int cmp_u32(const void *a, const void *b) {
  uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b; return x < y ? -1 : x > y;
}

static void report(void) {
  if (sending) {
    printf("{\"sent\": %ld, \"settled\": %ld, \"start_ns\": %lld, \"end_ns\": %lld}\n", sent, settled,
           (long long)t_start, (long long)t_end);
  } else {
    double p50 = 0, p99 = 0;
    if (received > 0) {
      qsort(latency_us, (size_t)received, sizeof *latency_us, cmp_u32);
      p50 = latency_us[(long)(0.5 * received)] / 1000.0;
      p99 = latency_us[(long)(0.99 * received) < received ? (long)(0.99 * received) : received - 1] / 1000.0;
    }
    printf("{\"received\": %ld, \"first_ns\": %lld, \"last_ns\": %lld, \"p50_ms\": %.3f, \"p99_ms\": %.3f}\n",
           received, (long long)t_first, (long long)t_last, p50, p99);
  }
  fflush(stdout);
}

static void finish(pn_connection_t *c) {
  if (pn_connection_state(c) & PN_LOCAL_ACTIVE) pn_connection_close(c);
}

static void on_delivery(pn_event_t *e) {
  pn_delivery_t *d = pn_event_delivery(e);
  pn_link_t *link = pn_delivery_link(d);
  if (pn_link_is_receiver(link)) {
    if (!pn_delivery_readable(d) || pn_delivery_partial(d)) return;
    size_t pending = pn_delivery_pending(d);
    if (pending > inbuf_len) { inbuf_len = pending * 2; inbuf = realloc(inbuf, inbuf_len); }
    ssize_t n = pn_link_recv(link, inbuf, pending);
    int64_t t = now_ns();
    pn_link_advance(link);
    if (!pn_delivery_settled(d)) pn_delivery_update(d, PN_ACCEPTED);
    pn_delivery_settle(d);
    if (n >= size && received < count) {
      int64_t stamp = get_stamp(inbuf + n - size);
      latency_us[received] = (uint32_t)((t - stamp) / 1000);
      if (received == 0) t_first = t;
      pn_proactor_set_timeout(proactor, IDLE_MS);
      t_last = t;
      received++;
    }
    if (pn_link_credit(link) < window / 2 && received < count) pn_link_flow(link, (int)(window - pn_link_credit(link)));
    if (received == count) finish(pn_event_connection(e));
  } else if (pn_delivery_remote_state(d) || pn_delivery_settled(d)) {
    if (pn_delivery_settled(d)) {
      pn_delivery_settle(d);
      if (++settled == count) { t_end = now_ns(); finish(pn_event_connection(e)); }
    }
  }
}

static void open_link(pn_connection_t *c) {
  pn_session_t *s = pn_session(c);
  pn_session_open(s);
  pn_link_t *l = sending ? pn_sender(s, "bench-sender") : pn_receiver(s, "bench-receiver");
  if (sending) {
    pn_terminus_set_address(pn_link_target(l), address);
    pn_link_set_snd_settle_mode(l, presettled ? PN_SND_SETTLED : PN_SND_UNSETTLED);
  } else {
    pn_terminus_set_address(pn_link_source(l), address);
  }
  pn_link_open(l);
  if (!sending) pn_link_flow(l, (int)window);
}

static int handle(pn_event_t *e) {
  switch (pn_event_type(e)) {
  case PN_LISTENER_OPEN: {
    char host[64], port[16];
    pn_netaddr_host_port(pn_listener_addr(pn_event_listener(e)), host, sizeof host, port, sizeof port);
    printf("listening %s\n", port); fflush(stdout);
    break;
  }
  case PN_LISTENER_ACCEPT:
    pn_listener_accept2(pn_event_listener(e), NULL, NULL);
    break;
  case PN_CONNECTION_INIT:
    pn_connection_set_container(pn_event_connection(e), sending ? "amqp-bench-sender" : "amqp-bench-receiver");
    if (!listening) { pn_connection_open(pn_event_connection(e)); open_link(pn_event_connection(e)); }
    break;
  case PN_CONNECTION_REMOTE_OPEN:
    if (listening) pn_connection_open(pn_event_connection(e));
    break;
  case PN_SESSION_REMOTE_OPEN:
    if (pn_session_state(pn_event_session(e)) & PN_LOCAL_UNINIT) pn_session_open(pn_event_session(e));
    break;
  case PN_LINK_REMOTE_OPEN: {
    pn_link_t *l = pn_event_link(e);
    if (pn_link_state(l) & PN_LOCAL_UNINIT) {  /* listening: the other client's link */
      pn_terminus_copy(pn_link_source(l), pn_link_remote_source(l));
      pn_terminus_copy(pn_link_target(l), pn_link_remote_target(l));
      pn_link_open(l);
      if (pn_link_is_receiver(l)) pn_link_flow(l, (int)window);
    }
    if (!listening) { printf("ready\n"); fflush(stdout); }
    break;
  }
  case PN_LINK_FLOW:
    if (sending) send_some(pn_event_link(e));
    break;
  case PN_DELIVERY:
    on_delivery(e);
    break;
  case PN_LINK_REMOTE_CLOSE:
    check_condition(pn_link_remote_condition(pn_event_link(e)));
    break;
  case PN_CONNECTION_REMOTE_CLOSE:
    check_condition(pn_connection_remote_condition(pn_event_connection(e)));
    finish(pn_event_connection(e));
    break;
  case PN_TRANSPORT_CLOSED:
    if (listener) { pn_listener_close(listener); listener = NULL; }
    if (!done_flag && !(sending ? settled == count : received == count)) {
      check_condition(pn_transport_condition(pn_event_transport(e)));
    }
    report();
    return 0;
  case PN_LISTENER_CLOSE:
    break;
  case PN_PROACTOR_TIMEOUT:
    if (!sending && received < count) { report(); exit(0); }
    break;
  default:
    break;
  }
  return 1;
}

int main(int argc, char **argv) {
  if (argc < 7) fail("usage: amqp_bench send|recv HOST:PORT ADDRESS COUNT SIZE presettled|unsettled|WINDOW [listen]");
  sending = strcmp(argv[1], "send") == 0;
  if (!sending && strcmp(argv[1], "recv") != 0) fail("the first argument must be send or recv");
  address = argv[3];
  count = atol(argv[4]); size = atol(argv[5]);
  if (count <= 0 || size < 8) fail("COUNT must be > 0 and SIZE >= 8");
  if (sending) presettled = strcmp(argv[6], "presettled") == 0; else window = atol(argv[6]);
  if (!sending && window <= 0) fail("WINDOW must be > 0");
  listening = argc > 7 && strcmp(argv[7], "listen") == 0;
  build_message();
  latency_us = calloc((size_t)count, sizeof *latency_us);
  proactor = pn_proactor();
  if (listening) {
    listener = pn_listener();
    pn_proactor_listen(proactor, listener, argv[2], 16);
  } else {
    pn_proactor_connect2(proactor, NULL, NULL, argv[2]);
  }
  int running = 1;
  while (running) {
    pn_event_batch_t *batch = pn_proactor_wait(proactor);
    pn_event_t *e;
    while (running && (e = pn_event_batch_next(batch))) running = handle(e);
    pn_proactor_done(proactor, batch);
  }
  pn_proactor_free(proactor);
  return 0;
}
