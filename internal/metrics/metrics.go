// Package metrics exposes errand's Prometheus metrics at /metrics.
//
// Counters are fed from the event journal: the daemon calls Observe for
// every event it follows (from the newest one at start-up, so counters
// count since the process started, as Prometheus expects). Task counts by
// status and the queue depth are read from the store at scrape time, with
// one call of the counts function per scrape. Webhook outcomes come from the
// webhook dispatcher (WebhookAttempt), stream clients from the API
// (StreamOpened, StreamClosed) and schedule firings from the engine
// (ScheduleFired).
//
// Every metric is named errand_…; the registry also holds the Go runtime
// and process collectors (go_…, process_…).
package metrics

import (
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/errandhq/errand/store"
)

// Namespace starts the name of every errand metric.
const Namespace = "errand"

// CountTimeout bounds the store query of one scrape.
const CountTimeout = 10 * time.Second

// StepDurationBuckets are the buckets, in seconds, of
// errand_step_duration_seconds: LLM and tool calls take from tens of
// milliseconds to minutes.
var StepDurationBuckets = []float64{0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600}

// ScheduleLagBuckets are the buckets, in seconds, of
// errand_schedule_lag_seconds: a firing is normally a few milliseconds
// late, a busy store makes it seconds, and a daemon that was down catches
// up minutes or an hour late.
var ScheduleLagBuckets = []float64{0.01, 0.05, 0.1, 0.5, 1, 5, 15, 60, 300, 900, 3600}

// ScheduleKinds are the values of the kind label of
// errand_schedule_firings_total; any other kind counts as LabelOther.
var ScheduleKinds = []string{store.ScheduleCron, store.ScheduleInterval, store.ScheduleEvent, store.ScheduleHeartbeat}

// Label values.
const (
	// OutcomeDelivered and OutcomeFailed label errand_webhook_deliveries_total.
	OutcomeDelivered = "delivered"
	OutcomeFailed    = "failed"
	// DirectionInput and DirectionOutput label errand_tokens_total.
	DirectionInput  = "input"
	DirectionOutput = "output"
	// LabelNone stands for a missing value; LabelOther for a value past
	// maxLabelValues or not shaped like an identifier.
	LabelNone  = "none"
	LabelOther = "other"
)

// maxLabelValues bounds the distinct values of a label fed from event data
// (error codes, step types, budget limits), so a misbehaving agent cannot
// create unbounded series.
const maxLabelValues = 32

// CountsFunc returns the number of tasks in each status; statuses with no
// tasks may be missing.
type CountsFunc func(ctx context.Context) (map[store.Status]int, error)

// Metrics holds errand's metrics. Its methods are safe for concurrent use.
type Metrics struct {
	counts CountsFunc
	reg    *prometheus.Registry

	claims, completions, retries, cancellations, recoveries prometheus.Counter
	failures                                                *prometheus.CounterVec // code
	budgetExceeded                                          *prometheus.CounterVec // limit
	stepDuration                                            *prometheus.HistogramVec
	tokens                                                  *prometheus.CounterVec // direction
	cost                                                    prometheus.Counter
	webhooks                                                *prometheus.CounterVec // outcome
	streams                                                 prometheus.Gauge
	countErrors                                             prometheus.Counter
	scheduleFirings                                         *prometheus.CounterVec // kind
	scheduleLag                                             prometheus.Histogram

	codes, stepTypes, limits *labelValues
}

// New returns the metrics, registered in a registry of their own with the
// Go and process collectors. counts is called once per scrape for the task
// gauges; nil leaves them out.
func New(counts func(context.Context) (map[store.Status]int, error)) *Metrics {
	counter := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Namespace: Namespace, Name: name, Help: help})
	}
	counterVec := func(name, help string, label string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: name, Help: help}, []string{label})
	}
	m := &Metrics{
		counts:        counts,
		reg:           prometheus.NewRegistry(),
		claims:        counter("task_claims_total", "Tasks claimed by a worker (task.started events)."),
		completions:   counter("task_completions_total", "Tasks completed (task.completed events)."),
		retries:       counter("task_retries_total", "Retries scheduled after a retryable failure (task.retry_scheduled events)."),
		cancellations: counter("task_cancellations_total", "Tasks cancelled (task.cancelled events)."),
		recoveries:    counter("lease_recoveries_total", "Expired leases taken back, the task queued again (task.recovered events)."),
		failures: counterVec("task_failures_total",
			"Tasks failed (task.failed events), by error code.", "code"),
		budgetExceeded: counterVec("budget_exceeded_total",
			"Budget limits reached (task.budget_exceeded events), by limit.", "limit"),
		stepDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: Namespace, Name: "step_duration_seconds",
			Help:    "Duration of agent steps (task.step events), by step type.",
			Buckets: StepDurationBuckets,
		}, []string{"type"}),
		tokens: counterVec("tokens_total", "LLM tokens used by steps, by direction (input or output).", "direction"),
		cost:   counter("cost_usd_total", "Cost in US dollars of the steps."),
		webhooks: counterVec("webhook_deliveries_total",
			"Webhook delivery attempts, by outcome (delivered or failed).", "outcome"),
		streams: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: Namespace, Name: "stream_clients",
			Help: "Connected SSE and WebSocket clients.",
		}),
		countErrors: counter("task_count_errors_total", "Scrapes whose task count query failed; the task gauges are missing from them."),
		scheduleFirings: counterVec("schedule_firings_total",
			"Tasks made by schedules firing in this process, by schedule kind (cron, interval, event or heartbeat).", "kind"),
		scheduleLag: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: Namespace, Name: "schedule_lag_seconds",
			Help:    "How late schedules fired: from the slot (or, for event schedules, the event) to the firing.",
			Buckets: ScheduleLagBuckets,
		}),
		codes:     newLabelValues(),
		stepTypes: newLabelValues(),
		limits:    newLabelValues(),
	}
	// Series that exist from the start, so rates work from the first event.
	m.webhooks.WithLabelValues(OutcomeDelivered)
	m.webhooks.WithLabelValues(OutcomeFailed)
	m.tokens.WithLabelValues(DirectionInput)
	m.tokens.WithLabelValues(DirectionOutput)
	for _, kind := range ScheduleKinds {
		m.scheduleFirings.WithLabelValues(kind)
	}

	m.reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.claims, m.completions, m.retries, m.cancellations, m.recoveries, m.failures, m.budgetExceeded,
		m.stepDuration, m.tokens, m.cost, m.webhooks, m.streams, m.countErrors,
		m.scheduleFirings, m.scheduleLag,
	)
	return m
}

// Registry returns the registry, to add more collectors.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Observe counts one journal event. Events of other types, and data that
// does not decode, are ignored.
func (m *Metrics) Observe(ev *store.Event) {
	if ev == nil {
		return
	}
	switch ev.Type {
	case store.EventTaskStarted:
		m.claims.Inc()
	case store.EventTaskCompleted:
		m.completions.Inc()
	case store.EventTaskRetryScheduled:
		m.retries.Inc()
	case store.EventTaskCancelled:
		m.cancellations.Inc()
	case store.EventTaskRecovered:
		m.recoveries.Inc()
	case store.EventTaskFailed:
		var d struct {
			Error *store.TaskError `json:"error"`
		}
		code := ""
		if json.Unmarshal(ev.Data, &d) == nil && d.Error != nil {
			code = d.Error.Code
		}
		m.failures.WithLabelValues(m.codes.get(code)).Inc()
	case store.EventTaskBudgetExceeded:
		var d struct {
			Limit string `json:"limit"`
		}
		_ = json.Unmarshal(ev.Data, &d)
		m.budgetExceeded.WithLabelValues(m.limits.get(d.Limit)).Inc()
	case store.EventTaskStep:
		m.observeStep(ev.Data)
	}
}

// stepData is the part of a task.step event's data counted here.
type stepData struct {
	Type       string  `json:"type"`
	Status     string  `json:"status"`
	TokensIn   int64   `json:"tokens_in"`
	TokensOut  int64   `json:"tokens_out"`
	CostUSD    float64 `json:"cost_usd"`
	DurationMS int64   `json:"duration_ms"`
}

func (m *Metrics) observeStep(data json.RawMessage) {
	var d stepData
	if json.Unmarshal(data, &d) != nil {
		return
	}
	// A denied tool call never ran: it has no duration to count.
	if d.Status != store.StepDenied && d.DurationMS >= 0 {
		m.stepDuration.WithLabelValues(m.stepTypes.get(d.Type)).Observe(float64(d.DurationMS) / 1000)
	}
	if d.TokensIn > 0 {
		m.tokens.WithLabelValues(DirectionInput).Add(float64(d.TokensIn))
	}
	if d.TokensOut > 0 {
		m.tokens.WithLabelValues(DirectionOutput).Add(float64(d.TokensOut))
	}
	if d.CostUSD > 0 {
		m.cost.Add(d.CostUSD)
	}
}

// WebhookAttempt counts one webhook delivery attempt: delivered if err is
// nil, else failed. Its signature fits webhook's OnAttemptFunc once the
// hook and event id are dropped.
func (m *Metrics) WebhookAttempt(err error) {
	if err == nil {
		m.webhooks.WithLabelValues(OutcomeDelivered).Inc()
		return
	}
	m.webhooks.WithLabelValues(OutcomeFailed).Inc()
}

// ScheduleFired counts one firing of a schedule of the given kind that
// made a task, lag after it was due (a negative lag counts as 0). Its
// signature is errand.Config.OnScheduleFired's.
func (m *Metrics) ScheduleFired(kind string, lag time.Duration) {
	if !slices.Contains(ScheduleKinds, kind) {
		kind = LabelOther
	}
	m.scheduleFirings.WithLabelValues(kind).Inc()
	m.scheduleLag.Observe(max(lag, 0).Seconds())
}

// StreamOpened counts a connected SSE or WebSocket client.
func (m *Metrics) StreamOpened() { m.streams.Inc() }

// StreamClosed counts a client gone; call it once per StreamOpened.
func (m *Metrics) StreamClosed() { m.streams.Dec() }

// Handler serves the metrics in the Prometheus text format (or the
// protobuf or OpenMetrics formats a scraper asks for). Each scrape reads
// the task counts once, under the request's context bounded by
// CountTimeout; if that fails the task gauges are left out of that scrape,
// the rest is served and errand_task_count_errors_total goes up.
func (m *Metrics) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var gatherers prometheus.Gatherers
		if m.counts != nil {
			// First, so a failed count shows in this scrape's
			// errand_task_count_errors_total.
			scrape := prometheus.NewRegistry()
			scrape.MustRegister(&taskCollector{ctx: r.Context(), m: m})
			gatherers = append(gatherers, scrape)
		}
		gatherers = append(gatherers, m.reg)
		promhttp.HandlerFor(gatherers, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}).ServeHTTP(w, r)
	})
}

var (
	tasksDesc = prometheus.NewDesc(prometheus.BuildFQName(Namespace, "", "tasks"),
		"Tasks by status, read from the store at scrape time.", []string{"status"}, nil)
	queueDesc = prometheus.NewDesc(prometheus.BuildFQName(Namespace, "", "queue_depth"),
		"Pending tasks, waiting for a worker (including those whose run_at is still ahead).", nil, nil)
)

// taskCollector reads the task counts for one scrape. It lives for one
// request only, so it carries that request's context (Collect has none).
type taskCollector struct {
	ctx context.Context
	m   *Metrics
}

func (c *taskCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- tasksDesc
	ch <- queueDesc
}

func (c *taskCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(c.ctx, CountTimeout)
	defer cancel()
	counts, err := c.m.counts(ctx)
	if err != nil {
		c.m.countErrors.Inc()
		ch <- prometheus.NewInvalidMetric(tasksDesc, err)
		return
	}
	for _, s := range store.AllStatuses {
		ch <- prometheus.MustNewConstMetric(tasksDesc, prometheus.GaugeValue, float64(counts[s]), string(s))
	}
	ch <- prometheus.MustNewConstMetric(queueDesc, prometheus.GaugeValue, float64(counts[store.StatusPending]))
}

// labelValues passes label values from event data through, up to
// maxLabelValues distinct ones shaped like identifiers; the rest become
// LabelOther, an empty value LabelNone.
type labelValues struct {
	mu   sync.Mutex
	seen map[string]bool
}

var labelRE = regexp.MustCompile(`^[a-z][a-z0-9_.:-]{0,63}$`)

func newLabelValues() *labelValues { return &labelValues{seen: map[string]bool{}} }

func (l *labelValues) get(v string) string {
	if v == "" {
		return LabelNone
	}
	if !labelRE.MatchString(v) {
		return LabelOther
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.seen[v] {
		return v
	}
	if len(l.seen) >= maxLabelValues {
		return LabelOther
	}
	l.seen[v] = true
	return v
}
