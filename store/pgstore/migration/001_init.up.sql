-- errand's schema on PostgreSQL: the state SQLite reaches through its own
-- migrations 001-012, written once. Times are timestamptz (microseconds,
-- as Go's time.Time round-trips them); documents a client sent are json,
-- which keeps their bytes as sent.

CREATE TABLE tasks (
    id                    text        PRIMARY KEY,
    parent_id             text,
    run_id                text        NOT NULL,
    session_id            text        NOT NULL DEFAULT '',
    agent                 text        NOT NULL,
    title                 text        NOT NULL DEFAULT '',
    goal                  text        NOT NULL,
    input                 json        NOT NULL DEFAULT '{}',
    metadata              json        NOT NULL DEFAULT '{}',
    tags                  json        NOT NULL DEFAULT '[]',
    priority              integer     NOT NULL DEFAULT 5,
    status                text        NOT NULL,
    progress              json,
    result                json,
    error_code            text,
    error_message         text,
    checkpoint            json,
    attempt               integer     NOT NULL DEFAULT 0,
    max_attempts          integer     NOT NULL DEFAULT 5,
    run_at                timestamptz NOT NULL,
    lease_owner           text,
    lease_expires_at      timestamptz,
    lease_token           bigint      NOT NULL DEFAULT 0,
    cancel_requested_at   timestamptz,
    cancel_reason         text,
    depends_on            json        NOT NULL DEFAULT '[]',
    on_dependency_failure text        NOT NULL DEFAULT 'fail',
    idempotency_key       text,
    budget                json,
    consumed              json,
    reserved              json,
    budget_warned_at      timestamptz,
    options               json,
    paused_from           text,
    pause_requested_at    timestamptz,
    -- What the task's own running steps hold reserved of the spend guard.
    spend_reserved        double precision NOT NULL DEFAULT 0,
    -- The lane lives in the options; the column lets the claim find by
    -- index whether a lane is busy and which of its tasks comes first.
    lane                  text GENERATED ALWAYS AS (options ->> 'lane') STORED,
    created_at            timestamptz NOT NULL,
    updated_at            timestamptz NOT NULL,
    started_at            timestamptz,
    finished_at           timestamptz
);

-- Claim order over ready tasks only: the partial index stays small however
-- many finished tasks the table holds.
CREATE INDEX tasks_ready ON tasks (priority DESC, run_at, id) WHERE status IN ('pending', 'retry_scheduled');
CREATE UNIQUE INDEX tasks_idempotency_key ON tasks (idempotency_key) WHERE idempotency_key IS NOT NULL;
CREATE INDEX tasks_status   ON tasks (status, id);
CREATE INDEX tasks_agent    ON tasks (agent, id);
CREATE INDEX tasks_run      ON tasks (run_id, id);
CREATE INDEX tasks_session  ON tasks (session_id, id) WHERE session_id <> '';
CREATE INDEX tasks_parent   ON tasks (parent_id, id) WHERE parent_id IS NOT NULL;
CREATE INDEX tasks_lane_order   ON tasks (lane, priority DESC, run_at, id) WHERE lane IS NOT NULL;
-- Unique: at most one running task per lane, even when two claims saw
-- different heads of a lane (see TaskLeaseMany).
CREATE UNIQUE INDEX tasks_lane_running ON tasks (lane) WHERE lane IS NOT NULL AND status = 'running';
-- Recovery looks for expired leases twice a second in every process.
CREATE INDEX tasks_lease_expiry ON tasks (lease_expires_at) WHERE status = 'running';
CREATE INDEX tasks_finished ON tasks (finished_at) WHERE status IN ('completed', 'failed', 'cancelled');
CREATE INDEX tasks_spend_reserved ON tasks (spend_reserved) WHERE spend_reserved > 0;

CREATE TABLE task_tags (
    tag     text NOT NULL,
    task_id text NOT NULL,
    PRIMARY KEY (tag, task_id)
);
CREATE INDEX task_tags_task ON task_tags (task_id);

-- The journal. A transaction appends its events last, under a lock it
-- holds until it commits (see journal.go), so ids are handed out in commit
-- order and a reader asking for id > last never skips one that commits
-- later.
CREATE TABLE task_events (
    id         bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    task_id    text        NOT NULL,
    type       text        NOT NULL,
    actor      text        NOT NULL,
    data       json        NOT NULL DEFAULT '{}',
    created_at timestamptz NOT NULL
);
CREATE INDEX task_events_task ON task_events (task_id, id);

CREATE TABLE task_steps (
    id              bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    task_id         text        NOT NULL,
    step_no         integer     NOT NULL,
    call_index      integer     NOT NULL DEFAULT 0,
    type            text        NOT NULL,
    status          text        NOT NULL,
    tool            text,
    idempotency_key text        NOT NULL UNIQUE,
    input           json,
    output          json,
    tokens_in       bigint      NOT NULL DEFAULT 0,
    tokens_out      bigint      NOT NULL DEFAULT 0,
    cost_usd        double precision NOT NULL DEFAULT 0,
    duration_ms     bigint      NOT NULL DEFAULT 0,
    error_code      text,
    error_message   text,
    created_at      timestamptz NOT NULL,
    updated_at      timestamptz NOT NULL
);
CREATE INDEX task_steps_task ON task_steps (task_id, step_no, call_index);
CREATE INDEX task_steps_created ON task_steps (created_at) INCLUDE (cost_usd);

CREATE TABLE input_requests (
    id             text        PRIMARY KEY,
    task_id        text        NOT NULL,
    question       text        NOT NULL,
    context        json,
    status         text        NOT NULL, -- pending, answered, expired
    answer         text,
    expires_at     timestamptz,
    default_answer text,
    created_at     timestamptz NOT NULL,
    answered_at    timestamptz
);
CREATE INDEX input_requests_status ON input_requests (status, id);
CREATE INDEX input_requests_task   ON input_requests (task_id, id);
CREATE INDEX input_requests_expiry ON input_requests (expires_at) WHERE status = 'pending';

-- Edges of the task graph: task_id depends on depends_on_id. Only kind
-- 'blocks' holds a task back.
CREATE TABLE task_dependencies (
    task_id       text NOT NULL,
    depends_on_id text NOT NULL,
    kind          text NOT NULL DEFAULT 'blocks',
    PRIMARY KEY (task_id, depends_on_id)
);
CREATE INDEX task_dependencies_blocker ON task_dependencies (depends_on_id, task_id);

-- Session inboxes, written in the transaction that appends their event.
CREATE TABLE notifications (
    id         bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    session_id text        NOT NULL DEFAULT '',
    task_id    text        NOT NULL,
    event_id   bigint      NOT NULL,
    event_type text        NOT NULL,
    text       text        NOT NULL,
    created_at timestamptz NOT NULL,
    read_at    timestamptz
);
CREATE INDEX notifications_session ON notifications (session_id, id);
CREATE INDEX notifications_unread  ON notifications (session_id, id) WHERE read_at IS NULL;
CREATE INDEX notifications_task    ON notifications (task_id);

-- Where each journal consumer (a webhook deliverer, say) has got to.
CREATE TABLE cursors (
    name       text        PRIMARY KEY,
    event_id   bigint      NOT NULL,
    updated_at timestamptz NOT NULL
);

-- Schedules. A firing is claimed by moving next_run_at (event schedules:
-- event_cursor) in the transaction that inserts its task.
CREATE TABLE schedules (
    id           text        PRIMARY KEY,
    name         text        NOT NULL UNIQUE,
    kind         text        NOT NULL,
    spec         text        NOT NULL,
    timezone     text        NOT NULL DEFAULT '',
    catch_up     text        NOT NULL DEFAULT 'one',
    active_hours text        NOT NULL DEFAULT '',
    enabled      boolean     NOT NULL DEFAULT true,
    declared     boolean     NOT NULL DEFAULT false,
    task         json        NOT NULL DEFAULT '{}',
    stuck_after  bigint      NOT NULL DEFAULT 0,
    next_run_at  timestamptz,
    last_run_at  timestamptz,
    last_task_id text,
    fire_count   bigint      NOT NULL DEFAULT 0,
    event_cursor bigint      NOT NULL DEFAULT 0,
    created_at   timestamptz NOT NULL,
    updated_at   timestamptz NOT NULL
);
CREATE INDEX schedules_due ON schedules (next_run_at) WHERE enabled AND next_run_at IS NOT NULL;

-- The global spend guard: spend in 15-minute buckets (their start), so a
-- day or month in any zone is a range and purging tasks forgets none.
CREATE TABLE spend (
    bucket   timestamptz      PRIMARY KEY,
    cost_usd double precision NOT NULL
);

CREATE TABLE spend_guard (
    id         integer     PRIMARY KEY CHECK (id = 1),
    limits     json        NOT NULL,
    declared   json,
    state      json        NOT NULL DEFAULT '{}',
    updated_at timestamptz
);
INSERT INTO spend_guard (id, limits) VALUES (1,
    '{"daily_usd":0,"monthly_usd":0,"alert_thresholds":[0.5,0.8,0.9],"on_limit":"pause-all","timezone":"UTC"}');

-- fold_accents takes the accents off Latin letters, as SQLite's FTS5
-- tokenizer does, so that "cafe" finds "café". translate is immutable
-- (the unaccent extension's function is not, and is not always
-- installed), so the generated search column can use it.
CREATE FUNCTION fold_accents(s text) RETURNS text
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    AS $$ SELECT translate($1,
        'ÀÁÂÃÄÅÇÈÉÊËÌÍÎÏÑÒÓÔÕÖÙÚÛÜÝàáâãäåçèéêëìíîïñòóôõöùúûüýÿĀāĂăĄąĆćĈĉĊ'
        || 'ċČčĎďĒēĔĕĖėĘęĚěĜĝĞğĠġĢģĤĥĨĩĪīĬĭĮįİĴĵĶķĹĺĻļĽľŃńŅņŇňŌōŎŏŐőŔŕŖŗŘřŚś'
        || 'ŜŝŞşŠšŢţŤťŨũŪūŬŭŮůŰűŲųŴŵŶŷŸŹźŻżŽžƠơƯưǍǎǏǐǑǒǓǔǕǖǗǘǙǚǛǜǞǟǠǡǦǧǨǩǪǫǬ'
        || 'ǭǰǴǵǸǹǺǻȀȁȂȃȄȅȆȇȈȉȊȋȌȍȎȏȐȑȒȓȔȕȖȗȘșȚțȞȟȦȧȨȩȪȫȬȭȮȯȰȱȲȳḀḁḂḃḄḅḆḇḈḉḊḋ'
        || 'ḌḍḎḏḐḑḒḓḔḕḖḗḘḙḚḛḜḝḞḟḠḡḢḣḤḥḦḧḨḩḪḫḬḭḮḯḰḱḲḳḴḵḶḷḸḹḺḻḼḽḾḿṀṁṂṃṄṅṆṇṈṉṊṋ'
        || 'ṌṍṎṏṐṑṒṓṔṕṖṗṘṙṚṛṜṝṞṟṠṡṢṣṤṥṦṧṨṩṪṫṬṭṮṯṰṱṲṳṴṵṶṷṸṹṺṻṼṽṾṿẀẁẂẃẄẅẆẇẈẉẊẋ'
        || 'ẌẍẎẏẐẑẒẓẔẕẖẗẘẙẠạẢảẤấẦầẨẩẪẫẬậẮắẰằẲẳẴẵẶặẸẹẺẻẼẽẾếỀềỂểỄễỆệỈỉỊịỌọỎỏỐố'
        || 'ỒồỔổỖỗỘộỚớỜờỞởỠỡỢợỤụỦủỨứỪừỬửỮữỰựỲỳỴỵỶỷỸỹ',
        'AAAAAACEEEEIIIINOOOOOUUUUYaaaaaaceeeeiiiinooooouuuuyyAaAaAaCcCcC'
        || 'cCcDdEeEeEeEeEeGgGgGgGgHhIiIiIiIiIJjKkLlLlLlNnNnNnOoOoOoRrRrRrSs'
        || 'SsSsSsTtTtUuUuUuUuUuUuWwYyYZzZzZzOoUuAaIiOoUuUuUuUuUuAaAaGgKkOoO'
        || 'ojGgNnAaAaAaEeEeIiIiOoOoRrRrUuUuSsTtHhAaEeOoOoOoOoYyAaBbBbBbCcDd'
        || 'DdDdDdDdEeEeEeEeEeFfGgHhHhHhHhHhIiIiKkKkKkLlLlLlLlMmMmMmNnNnNnNn'
        || 'OoOoOoOoPpPpRrRrRrRrSsSsSsSsSsTtTtTtTtUuUuUuUuUuVvVvWwWwWwWwWwXx'
        || 'XxYyZzZzZzhtwyAaAaAaAaAaAaAaAaAaAaAaAaEeEeEeEeEeEeEeEeIiIiOoOoOo'
        || 'OoOoOoOoOoOoOoOoOoUuUuUuUuUuUuUuYyYyYyYy') $$;

-- Memories, with provenance; they outlive the tasks that wrote them. The
-- search vector covers text and tags, English-stemmed, accents folded.
CREATE TABLE memories (
    id               text        PRIMARY KEY,
    text             text        NOT NULL,
    tags             json        NOT NULL DEFAULT '[]',
    task_id          text        NOT NULL DEFAULT '',
    agent            text        NOT NULL DEFAULT '',
    source           text        NOT NULL,
    estimated_tokens integer     NOT NULL,
    idempotency_key  text,
    created_at       timestamptz NOT NULL,
    search           tsvector GENERATED ALWAYS AS (to_tsvector('english', fold_accents(text || ' ' || (tags #>> '{}')))) STORED
);
CREATE UNIQUE INDEX memories_idempotency_key ON memories (idempotency_key) WHERE idempotency_key IS NOT NULL;
CREATE INDEX memories_task    ON memories (task_id, id);
CREATE INDEX memories_agent   ON memories (agent, id);
CREATE INDEX memories_source  ON memories (source, id);
CREATE INDEX memories_created ON memories (created_at);
CREATE INDEX memories_search  ON memories USING gin (search);
