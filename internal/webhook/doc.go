// Package webhook delivers journal events to the webhooks configured in
// errand.yaml: signed, retried, at least once, in order.
//
// # Signing
//
// Every delivery is a POST of the event in the API's wire shape (the JSON
// of an SSE data: line, see api.FromEvent) with Content-Type
// application/json, User-Agent errand-webhook and the Standard Webhooks
// headers: webhook-id (the event id in decimal, the same on every attempt,
// so receivers dedupe on it), webhook-timestamp (Unix seconds of this
// attempt) and webhook-signature ("v1," and the base64 HMAC-SHA256 of
// "{id}.{timestamp}.{body}"). The key is the base64-decoded part after
// "whsec_" of a whsec_… secret, or the raw bytes of any other secret (see
// Key, Sign and Verify). A hook without a secret is sent unsigned.
//
// # Delivery
//
// Each hook has its own goroutine, HTTP transport, and durable cursor and
// lease in the journal, both named CursorName(url): "webhook:" and the
// first 16 hex digits of the SHA-256 of the URL. A hook seen for the first
// time starts at the newest event: it gets the events written from then
// on, not the history.
//
// A hook takes the events after its cursor in id order. An event whose type
// is not in the hook's Events is passed over; the cursor moves past it but
// is written only every Config.CursorEvery such events, after the next
// delivery, or at shutdown. A wanted event is posted until the receiver
// answers 2xx; only then does the cursor move past it, and is written.
// So a restart loses nothing and sends again at most the event that was in
// flight (or, if a cursor write failed, the events since the last one that
// succeeded).
//
// An attempt fails on a non-2xx answer (a redirect is not followed and
// fails too), a connection error or Config.Timeout (10 s). The same event
// is then tried again after an exponential backoff with jitter (1 s
// doubling to 5 min, each delay cut by a random fraction of up to half),
// for as long as it takes: a receiver that is down holds back its own
// events only. Each failure is logged and reported to
// Config.OnAttemptFunc, as is each success.
//
// # One deliverer per hook
//
// Several daemons sharing one database may each configure the same hook;
// only one of them delivers it at a time, so each event is posted once.
// Each hook has a lease in the journal (see Journal.Lead), named like its
// cursor, held by one Dispatcher (Config.Owner) until it expires. A
// Dispatcher asks for each hook's lease when it starts and every
// Config.LeaseTTL/3 (5 s by default, so every 1.7 s): the holder renews it,
// the others take it only once it is free or expired. A hook is delivered
// only while its lease is held: when a renewal is refused or fails, its
// delivery stops at once, abandoning the attempt in flight and writing no
// cursor (the cursor is the next holder's), and the Dispatcher goes on
// asking. Each ask is bounded by LeaseTTL/3, so a holder cut off from the
// database stops before its lease can expire. The next holder starts from
// the saved cursor, so a change of holder loses nothing and sends again
// at most the events in flight or not yet saved, as a restart does. (A
// holder whose process stalls for longer than its lease may still post the
// event it held when it wakes, once more: delivery stays at least once.)
//
// A Dispatcher that stops cleanly saves its cursors, then releases its
// leases: another takes each hook over at its next ask. One that dies
// releases nothing: another takes over once the lease expires, within
// LeaseTTL and a third of the death.
//
// # A2A push notifications
//
// A PushDispatcher delivers what A2A clients asked to be told of their
// tasks (see package a2a): a PushSource turns each journal event into
// pushes, each to the URL of one push config, and the dispatcher posts
// them with the same headers as webhooks (signed when the push has a
// key), guarded the same way against private addresses. It follows the
// journal from one durable cursor and holds one lease, both PushCursor.
// Pushes of one queue (one config) go one at a time, in order; queues go
// in parallel, so a receiver that is down holds back its own pushes
// only. A push is tried up to PushConfig.MaxAttempts times, with the
// webhooks' backoff, then dropped: configs are made by clients, and one
// that is gone must not hold the others back for ever. A push to an
// address the guard refuses (see below), named in the URL or resolved at
// connect time, is dropped at its first attempt: a refusal is not an
// outage, and trying again would only knock on the same door. The cursor moves
// past an event once all its pushes were sent or dropped, so a restart
// sends again at most the pushes in flight.
//
// # Traces
//
// With Config.TracerProvider set (errand exports traces) and a journal
// that reads tasks (ClientJournal), each attempt to deliver a task's
// event is a client span, "webhook task.completed" and so on, in the
// trace of the task's run, beside the task's attempts: under the span
// the run's submit named in its traceparent, under the step that
// submitted a subtask, or at the root of the run's trace. The attempt
// sends that span's W3C traceparent header, so the receiver's spans hang
// under it, and a receiver that only logs the header can find the run's
// trace by its id. An event of no task, or of a task that is gone, is
// sent without one. Without a provider nothing is traced or added. A2A
// pushes are traced the same way (PushConfig.TracerProvider), as "a2a
// push" spans whose url.full leaves out the query a client's URL may
// hide a secret in.
//
// # Private addresses
//
// Unless a hook sets AllowPrivate, New refuses a URL whose host is
// localhost or a literal loopback, private, link-local, unspecified,
// multicast or otherwise non-public address, and the hook's dialer refuses
// such an address again after DNS resolution, at connect time, so a name
// that resolves (or is rebound) to one is refused too. IPv6 is allowed
// only in 2000::/3 and the NAT64 prefix 64:ff9b::/96, and an IPv6 address
// that carries an IPv4 one (IPv4-mapped, NAT64, 6to4, Teredo, ISATAP) is
// judged by that IPv4 address too. Proxy settings from the environment are
// ignored for the same reason.
//
// Whatever AllowPrivate, New refuses a host that another parser would read
// as a different one: a non-ASCII host (net/http maps it through IDNA) and
// an IPv4 address written other than as four decimal parts (2130706433,
// 0x7f.1, 127.1, 0177.0.0.1), which resolvers read as 127.0.0.1.
package webhook
