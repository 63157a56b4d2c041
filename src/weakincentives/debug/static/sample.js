// The sample page (one result in full, with its debug bundle) and the single-bundle page.

import {
  api, badge, fill, details, h, int, link, ms, num, pre, pretty, section, setCrumbs, setKeys, table,
  turnLine, turnsByMessage, usd,
} from "./dom.js";
import { listQuery } from "./runs.js";

export async function renderResult(view, runId, resultId, params, isCurrent) {
  const base = `/api/runs/${encodeURIComponent(runId)}`;
  const [data, around] = await Promise.all([
    api(`${base}/results/${encodeURIComponent(resultId)}`), neighbours(base, params)]);
  if (!isCurrent()) return;
  const r = data.result;
  const list = listQuery(params);
  list.delete("pos");
  setCrumbs([["runs", "#/"], [runId, link(["run", runId], list)], [r.sample_id, null]]);
  fill(view,
    h("div", { class: "title-row" },
      h("h1", { id: "sample-title" }, r.sample_id),
      badge(data.row.status),
      h("span", { class: "muted" }, `${r.experiment_name} · epoch ${r.epoch}`),
      h("span", { class: "spacer" }),
      sampleNav(runId, params, around)),
    siblings(runId, data),
    // What explains a failure first: the error, what the sample asked and expected and
    // what came out, every check with its reason, then how it got there.
    r.error ? section("Error", h("p", {}, h("strong", {}, r.error_kind || "error")), pre(r.error, "error")) : null,
    ioPanel(data.sample, r),
    scorePanel(r),
    transcriptPanel(r.messages, r.turns || []),
    toolCallsPanel(r.tool_calls),
    turnsPanel(r),
    timingPanel(r),
    Object.keys(r.metadata).length ? section("Metadata", kvTable(r.metadata)) : null,
    provenancePanel(data.provenance || []),
    data.bundle ? bundlePanels(data.bundle) : null,
    data.bundle_error ? section("Debug bundle", h("p", { class: "warning" }, data.bundle_error)) : null,
  );
}

export async function renderBundle(view, isCurrent) {
  const data = await api("/api/bundle");
  if (!isCurrent()) return;
  const m = data.bundle.manifest;
  setCrumbs([["bundle", null]]);
  fill(view,
    h("div", { class: "title-row" },
      h("h1", {}, m.ids.sample_id || m.ids.request_id || m.bundle_id),
      badge(m.status === "ok" ? "passed" : m.status === "error" ? "error" : m.status),
      h("span", { class: "muted" }, m.ids.experiment || "")),
    ioPanel(data.sample, null),
    bundlePanels(data.bundle),
  );
}

// The previous and next results of the list the user came from (its filters and sort
// are in the URL, with `pos`, the result's position in it).
async function neighbours(base, params) {
  if (!params.has("pos")) return null;
  const pos = Number(params.get("pos"));
  if (!Number.isInteger(pos) || pos < 0) return null;
  const query = listQuery(params);
  query.set("offset", String(Math.max(pos - 1, 0)));
  query.set("limit", "3");
  const page = await api(`${base}/results?${query}`);
  const at = pos - page.offset;
  return { pos, total: page.total, prev: page.rows[at - 1] || null, next: page.rows[at + 1] || null };
}

function sampleNav(runId, params, around) {
  const list = listQuery(params);
  list.delete("pos");
  const back = () => { location.hash = link(["run", runId], list); };
  if (!around) {
    setKeys({ u: back, Escape: back });
    return null;
  }
  const to = (row, pos) => {
    const q = new URLSearchParams(list);
    q.set("pos", String(pos));
    return link(["run", runId, "result", row.id], q);
  };
  const prevHref = around.prev ? to(around.prev, around.pos - 1) : null;
  const nextHref = around.next ? to(around.next, around.pos + 1) : null;
  const go = (href) => () => { if (href) location.hash = href; };
  setKeys({ j: go(nextHref), ArrowRight: go(nextHref), k: go(prevHref), ArrowLeft: go(prevHref), u: back, Escape: back });
  return h("nav", { class: "sample-nav", id: "sample-nav", "aria-label": "Results of the list" },
    prevHref ? h("a", { href: prevHref, id: "prev-sample", title: "previous (k or ←)" }, "← previous")
      : h("span", { class: "muted" }, "← previous"),
    h("span", { id: "sample-position" }, `${int(around.pos + 1)} of ${int(around.total)}`),
    nextHref ? h("a", { href: nextHref, id: "next-sample", title: "next (j or →)" }, "next →")
      : h("span", { class: "muted" }, "next →"),
    h("span", { class: "muted small" }, "j / k to move, u to go back"));
}

function siblings(runId, data) {
  const others = data.siblings.filter((s) => s.id !== data.row.id);
  if (!others.length) return null;
  const me = data.row;
  const flipped = others.filter((s) => s.epoch === me.epoch && s.experiment !== me.experiment
    && (s.status === "passed") !== (me.status === "passed"));
  return h("div", { class: "siblings" },
    h("p", {}, "Same sample: ",
      others.map((s) => h("a", { href: link(["run", runId, "result", s.id]), class: `chip ${s.status}` },
        `${s.experiment} · epoch ${s.epoch} · ${s.status}`))),
    flipped.length ? h("p", {}, "Flipped: ", flipped.map((s) => h("a", {
      class: "button pair-link",
      href: link(["pair"], { base_run: runId, base: me.id, treat: s.id }),
    }, `side by side with ${s.experiment}`))) : null);
}

// A combined evaluator's reason is "label: reason; label: reason" with its checks' labels
// (the top-level metric names): each check's part, which may itself contain "; ".
function checkReasons(score) {
  const text = score.reason || "";
  const starts = [];
  for (const m of score.metrics) {
    if (m.name.includes(".")) continue;
    const head = `${m.name}: `;
    const at = text.startsWith(head) ? 0 : text.indexOf(`; ${head}`);
    if (at >= 0) starts.push([at === 0 ? 0 : at + 2, m.name]);
  }
  starts.sort((x, y) => x[0] - y[0]);
  const parts = {};
  starts.forEach(([at, name], i) => {
    const end = i + 1 < starts.length ? starts[i + 1][0] - 2 : text.length;
    parts[name] = text.slice(at + name.length + 2, end);
  });
  return parts;
}

function scorePanel(r) {
  const s = r.score;
  const reasons = checkReasons(s);
  const metrics = s.metrics.length
    ? table(["Metric", "Value", "Weight", "Reason"], s.metrics.map((m) =>
      h("tr", { class: m.value < 0.5 && !m.name.includes(".") && m.value >= 0 ? "failed-row" : "" },
        h("td", {}, m.name), h("td", { class: "num" }, num(m.value)),
        h("td", { class: "num" }, num(m.weight, 2)), h("td", { class: "reason-full" }, reasons[m.name] || ""))),
    { id: "score-metrics" })
    : null;
  return section("Score",
    h("dl", { class: "inline" },
      h("dt", {}, "value"), h("dd", { id: "score-value" }, num(s.value)),
      h("dt", {}, "passed"), h("dd", {}, String(s.passed)),
      h("dt", {}, "reason"), h("dd", { id: "score-reason" }, s.reason || "–")),
    metrics);
}

// Each model call's tokens and cost (for an errored sample, the calls before the failure).
function turnsPanel(r) {
  const turns = r.turns || [];
  if (!turns.length) {
    return section("Tokens and cost per turn", h("p", { class: "muted" },
      "No per-turn usage recorded (the agent reported none, as a plain function does, or the run predates per-turn records)."));
  }
  const sum = (i) => turns.reduce((n, t) => n + t[i], 0);
  const priced = turns.every((t) => t[2] !== null);
  const rows = turns.map(([input, output, cost], t) => h("tr", {},
    h("td", { class: "num" }, String(t + 1)), h("td", { class: "num" }, int(input)),
    h("td", { class: "num" }, int(output)), h("td", { class: "num" }, cost === null ? "unpriced" : usd(cost))));
  rows.push(h("tr", { class: "total-row" }, h("td", {}, "total"), h("td", { class: "num" }, int(sum(0))),
    h("td", { class: "num" }, int(sum(1))), h("td", { class: "num" }, priced ? usd(sum(2)) : "unpriced")));
  return section("Tokens and cost per turn",
    table(["Turn", "Input tokens", "Output tokens", "Cost"], rows, { class: "grid", id: "turns" }),
    r.error ? h("p", { class: "muted" }, "The model calls made before the failure.") : null);
}

function timingPanel(r) {
  const u = r.usage;
  return section("Timing and tokens",
    h("dl", { class: "inline" },
      h("dt", {}, "latency"), h("dd", {}, ms(r.latency_ms)),
      h("dt", {}, "tokens"), h("dd", {}, `${int(u.input_tokens)} in · ${int(u.output_tokens)} out · ${int(u.cached_tokens)} cached`),
      h("dt", {}, "cost"), h("dd", {}, r.cost === null || r.cost === undefined ? "unpriced" : `${usd(r.cost)} agent · ${usd(r.judge_cost)} judge`),
      h("dt", {}, "deliveries"), h("dd", {}, String(r.delivery_count)),
      h("dt", {}, "request"), h("dd", {}, r.request_id || "–"),
      h("dt", {}, "bundle"), h("dd", {}, r.bundle_path || "none")));
}

function ioPanel(sample, r) {
  const parts = [];
  if (sample.recorded) {
    parts.push(h("h3", {}, "Input"), pre(sample.input), h("h3", {}, "Expected"), pre(sample.expected));
  } else {
    parts.push(h("p", { class: "muted" }, "Input and expected answer were not recorded (the run was made with record_inputs off, or before results kept them)."));
  }
  if (r) parts.push(h("h3", {}, "Output"), pre(r.output, "output"));
  return section("Input, expected, output", ...parts);
}

function transcriptPanel(messages, turns) {
  if (!messages.length) return section("Transcript", h("p", { class: "muted" }, "No transcript recorded."));
  const turnOf = turnsByMessage(messages, turns);
  return section("Transcript", h("ol", { class: "transcript", id: "transcript" }, messages.map((m, i) =>
    h("li", { class: `msg ${m.role}` },
      h("div", { class: "role" }, m.role, m.name ? ` · ${m.name}` : "", m.tool_call_id ? ` · ${m.tool_call_id}` : ""),
      turnOf.has(i) ? turnLine(turns, turnOf.get(i)) : null,
      m.content !== null ? h("pre", { class: "content" }, m.content) : null,
      m.tool_calls.map((c) => h("div", { class: "call" },
        h("span", { class: "tool-name" }, c.name), h("span", { class: "muted small" }, ` ${c.id}`),
        h("pre", {}, prettyArguments(c.arguments))))))));
}

function prettyArguments(text) {
  try {
    return JSON.stringify(JSON.parse(text), null, 2);
  } catch {
    return text;
  }
}

function toolCallsPanel(calls) {
  if (!calls.length) return section("Tool calls", h("p", { class: "muted" }, "No tool calls recorded."));
  return section("Tool calls", table(["Tool", "Params", "Result", "OK", "Duration", "Error"],
    calls.map((c) => h("tr", { class: c.success ? "" : "failed-row" },
      h("td", { class: "tool-name" }, c.name),
      h("td", {}, pre(c.params)),
      h("td", {}, pre(c.message)),
      h("td", {}, c.success ? "yes" : badge("failed")),
      h("td", { class: "num" }, ms(c.duration_ms)),
      h("td", {}, c.error || ""))),
    { class: "grid", id: "tool-calls" }));
}

// What produced the run (its manifest's provenance, as the run page shows it), collapsed.
function provenancePanel(rows) {
  if (!rows.length) return null;
  return h("details", { class: "panel provenance", id: "sample-provenance" },
    h("summary", {}, "Provenance: what produced this run"),
    h("dl", { class: "inline" }, rows.map(([label, text]) =>
      [h("dt", {}, label), h("dd", { dataset: { field: label } }, text)])));
}

function kvTable(obj) {
  return table(["Key", "Value"], Object.entries(obj).map(([k, v]) =>
    h("tr", {}, h("td", {}, k), h("td", {}, pretty(v)))));
}

function bundlePanels(b) {
  const m = b.manifest;
  return [
    section("Debug bundle",
      h("p", {}, h("code", {}, b.path), " ",
        b.verified ? h("span", { class: "badge passed" }, "checksums ok")
          : h("span", { class: "badge error" }, "checksums fail")),
      b.verify_error ? h("p", { class: "warning" }, b.verify_error) : null,
      h("dl", { class: "inline" },
        h("dt", {}, "status"), h("dd", {}, m.status),
        h("dt", {}, "started"), h("dd", {}, m.timings.started_at),
        h("dt", {}, "duration"), h("dd", {}, ms(m.timings.duration_ms)),
        h("dt", {}, "log records"), h("dd", {}, `${m.log_records}${m.logs_dropped ? ` (${m.logs_dropped} dropped)` : ""}`)),
      b.error ? details("error.json", pre(b.error, "error")) : null,
      b.metrics ? details("metrics", pre(b.metrics)) : null,
      b.request !== null ? details("request", pre(b.request)) : null,
      b.response !== null ? details("response", pre(b.response)) : null,
      b.eval ? details("eval.json", pre(b.eval)) : null,
      b.extra_files.map((f) => details(`extra/${f.name} (${int(f.size)} bytes)`,
        f.preview === null ? h("p", { class: "muted" }, "binary") : pre(f.preview)))),
    b.tool_calls.length ? section("Bundle tool calls", table(["#", "Tool", "Params", "Message", "OK", "Error"],
      b.tool_calls.map((c) => h("tr", {}, h("td", {}, c.seq), h("td", { class: "tool-name" }, c.name),
        h("td", {}, pre(c.params)), h("td", {}, pre(c.message ?? "")), h("td", {}, String(c.success)),
        h("td", {}, c.error || ""))), { class: "grid" })) : null,
    logsPanel(b),
    slicesPanel("Session after", b.session_after),
    slicesPanel("Session before", b.session_before),
  ];
}

function logsPanel(b) {
  if (!b.logs.length) return section("Logs", h("p", { class: "muted" }, "No log records."));
  return section("Logs", table(["Time", "Level", "Logger", "Message"],
    b.logs.map((r) => h("tr", { class: `log ${String(r.level).toLowerCase()}` },
      h("td", { class: "nowrap" }, String(r.time ?? "")), h("td", {}, String(r.level ?? "")),
      h("td", {}, String(r.logger ?? "")),
      h("td", {}, h("pre", {}, String(r.message ?? "")), r.exception ? pre(r.exception, "error") : null))),
    { class: "grid", id: "logs" }),
    b.logs_omitted ? h("p", { class: "muted" }, `${b.logs_omitted} more records not shown`) : null);
}

function slicesPanel(title, slices) {
  if (!slices) return null;
  const entries = Object.entries(slices);
  return section(title, entries.length
    ? entries.map(([type, values]) => details(`${type.split(":").pop()} (${values.length})`,
      h("p", { class: "muted small" }, type), pre(values)))
    : h("p", { class: "muted" }, "Empty session."));
}
