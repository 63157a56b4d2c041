// The runs list and the run page: statistics per experiment, filters, and the results grid
// (filtered, sorted and paginated on the server; the filters live in the URL fragment).

import {
  api, badge, chartFigure, costText, fill, clip, h, int, interval, link, ms, num, pct, plural, section,
  setCrumbs, setKeys, table,
} from "./dom.js";

const PAGE_SIZE = 50;
const STATUSES = [
  ["", "any status"], ["passed", "passed"], ["failed", "failed (scored)"],
  ["error", "error"], ["not_passed", "not passed (failed or error)"],
];
const RANGES = [
  ["score", "Score"], ["latency", "Latency (ms)"], ["tokens", "Tokens"],
];
const COLUMNS = [
  ["sample", "Sample"], ["experiment", "Experiment"], ["epoch", "Epoch"],
  ["status", "Status"], ["score", "Score"], ["latency", "Latency"], ["tokens", "Tokens"],
  [null, "Tools"], [null, "Reason / error"],
];

export async function renderRuns(view) {
  setCrumbs([["runs", null]]);
  const { runs } = await api("/api/runs");
  const rows = runs.map((run) =>
    h("tr", { dataset: { run: run.run_id } },
      h("td", {}, h("a", { href: link(["run", run.run_id]), class: "run-link" }, run.run_id)),
      h("td", {}, run.status || "–"),
      h("td", {}, run.created_at ? run.created_at.replace("T", " ").slice(0, 19) : "–"),
      h("td", { class: "num" }, int(run.results)),
      // Pass rate per experiment: experiments of a run are never pooled into one rate.
      h("td", { class: "rates" }, run.pass_rates.length
        ? run.pass_rates.map((e) => h("div", { dataset: { experiment: e.experiment } },
          `${e.experiment} ${pct(e.pass_rate)}`))
        : "–"),
      h("td", { class: "num" }, int(run.errors)),
      h("td", {}, run.experiment_names.join(", "))));
  fill(view,
    h("h1", {}, "Runs"),
    runs.length
      ? table(["Run", "Status", "Created", "Results", "Pass rate", "Errors", "Experiments"], rows,
        { class: "grid", id: "runs" })
      : h("p", { class: "muted" }, "No runs here."),
  );
}

export async function renderRun(view, runId, params, isCurrent) {
  setCrumbs([["runs", "#/"], [runId, null]]);
  const query = listQuery(params);
  if (!query.has("limit")) query.set("limit", String(PAGE_SIZE));
  const base = `/api/runs/${encodeURIComponent(runId)}`;
  const chartQuery = params.has("slice") ? `?${new URLSearchParams({ slice: params.get("slice") })}` : "";
  const [run, page, charts] = await Promise.all([
    api(base), api(`${base}/results?${query}`), api(`${base}/charts${chartQuery}`)]);
  if (!isCurrent()) return;
  fill(view,
    runHeader(run),
    h("div", { class: "cards" }, run.experiments.map(experimentCard)),
    run.skipped_count
      ? h("p", { class: "warning" }, `${run.skipped_count} unreadable lines skipped: `,
        run.skipped.join("; "))
      : null,
    provenancePanel(run),
    chartsPanel(run, charts, params),
    failuresPanel(run, charts.failures),
    filterForm(run, params),
    resultsGrid(run, page, params),
  );
  gridKeys(view);
}

/** The results list's own parameters: the URL's, without the page-only ones. */
export function listQuery(params) {
  const query = new URLSearchParams(params);
  for (const key of ["slice", "pos"]) query.delete(key);
  return query;
}

function provenancePanel(run) {
  if (!run.provenance.length) return null;
  return h("details", { class: "panel provenance", id: "provenance" },
    h("summary", {}, "Provenance: what produced this run"),
    h("dl", { class: "inline" }, run.provenance.map(([label, text]) =>
      [h("dt", {}, label), h("dd", { dataset: { field: label } }, text)])));
}

function chartsPanel(run, charts, params) {
  const select = h("select", { id: "slice-key", "aria-label": "Slice by metadata key" },
    h("option", { value: "" }, "no slice"),
    charts.slice_keys.map((k) => h("option", { value: k, selected: k === charts.slice }, k)));
  select.addEventListener("change", () => {
    const next = new URLSearchParams(params);
    next.set("slice", select.value);
    go(run.run_id, next);
  });
  return h("section", { class: "panel", id: "charts" },
    h("div", { class: "title-row" }, h("h2", {}, "Charts"), h("span", { class: "spacer" }),
      charts.slice_keys.length ? h("label", {}, "Pass rate by ", select) : null),
    h("div", { class: "charts" }, charts.charts.map(chartFigure)));
}

function failuresPanel(run, failures) {
  if (!failures.not_passed) return null;
  const groups = failures.groups.map((g) => h("details", { class: "failure", dataset: { key: g.key, count: g.count } },
    h("summary", {}, h("span", { class: "group-count" }, int(g.count)), " ", g.key),
    h("p", {}, g.examples.map((e) => h("a", {
      href: link(["run", run.run_id, "result", e.id]), class: "chip",
    }, `${e.sample_id}${e.epoch ? `@${e.epoch}` : ""} · ${e.experiment}`)),
    g.count > g.examples.length ? h("span", { class: "muted" }, ` and ${int(g.count - g.examples.length)} more`) : null)));
  const omitted = failures.groups_count - failures.groups.length;
  return section(`Failures: ${int(failures.not_passed)} results in ${int(failures.groups_count)} groups`,
    h("p", { class: "muted small" }, "Grouped by error kind and message, or by the checks that failed (numbers masked as #)."),
    h("div", { id: "failures" }, groups),
    omitted > 0 ? h("p", { class: "muted" }, `and ${int(omitted)} smaller groups`) : null);
}

function gridKeys(view) {
  const rows = () => [...view.querySelectorAll("#results tbody tr")];
  let at = -1;
  const move = (step) => {
    const all = rows();
    if (!all.length) return;
    if (at >= 0 && all[at]) all[at].classList.remove("selected");
    at = Math.min(Math.max(at + step, 0), all.length - 1);
    all[at].classList.add("selected");
    all[at].scrollIntoView({ block: "nearest" });
  };
  const open = () => {
    const row = rows()[at];
    if (row) row.querySelector("a.sample-link").click();
  };
  const next = () => { const a = document.querySelector(".pager a.next"); if (a) a.click(); };
  const prev = () => { const a = document.querySelector(".pager a.prev"); if (a) a.click(); };
  setKeys({ j: () => move(1), ArrowDown: () => move(1), k: () => move(-1), ArrowUp: () => move(-1),
    Enter: open, o: open, n: next, p: prev });
}

function runHeader(run) {
  const compare = link(["compare"], { base_run: run.run_id });
  const report = `/api/runs/${encodeURIComponent(run.run_id)}/report.html`;
  return h("div", { class: "title-row" },
    h("h1", {}, run.run_id),
    run.status ? h("span", { class: `badge ${run.status}` }, run.status) : null,
    h("span", { class: "muted" }, `${int(run.results)} results`),
    h("span", { class: "spacer" }),
    h("a", { href: compare, class: "button", id: "open-compare" }, "A/B compare"),
    h("a", { href: report, class: "button", target: "_blank", rel: "noopener" }, "HTML report"));
}

function experimentCard(e) {
  const kinds = Object.entries(e.errors_by_kind).map(([k, n]) => `${k} ${n}`).join(", ");
  return h("div", { class: "card", dataset: { experiment: e.name } },
    h("h3", {}, e.name),
    h("div", { class: "big" }, pct(e.pass_rate), " ",
      h("span", { class: "muted small" }, interval(e.pass_rate_ci)),
      e.n_clusters ? h("span", { class: "muted small" }, ` clustered by sample (${plural(e.n_clusters, "sample")})`) : null),
    h("div", { class: "bar" },
      h("div", { class: "fill", style: `width:${(e.pass_rate * 100).toFixed(1)}%` })),
    h("dl", {},
      h("dt", {}, "results"), h("dd", {}, `${e.n} (${e.passed} passed, ${e.failed} failed, ${e.errors} errors)`),
      h("dt", {}, "mean score"), h("dd", {}, `${num(e.mean_score)} ${interval(e.mean_score_ci, num)}`),
      h("dt", {}, "latency"), h("dd", {}, `p50 ${ms(e.latency_ms.p50)} · p95 ${ms(e.latency_ms.p95)}`),
      h("dt", {}, "tokens"), h("dd", {}, `${int(e.tokens.input)} in · ${int(e.tokens.output)} out`),
      h("dt", {}, "cost"), h("dd", { class: "cost" }, costText(e.cost)),
      kinds ? [h("dt", {}, "errors"), h("dd", {}, kinds)] : null));
}

function go(runId, params) {
  location.hash = link(["run", runId], params);
}

function filterForm(run, params) {
  const facets = run.facets;
  const current = new URLSearchParams(params);
  const metaEntry = [...current.entries()].find(([k]) => k.startsWith("meta."));
  const metaKeys = Object.keys(facets.metadata);
  const select = (name, options) =>
    h("select", { name, id: `filter-${name}` },
      options.map(([value, label]) =>
        h("option", { value, selected: (current.get(name) || "") === value }, label)));
  const input = (name, attrs = {}) =>
    h("input", { name, id: `filter-${name}`, value: current.get(name) || "", ...attrs });
  const metaKey = h("select", { name: "meta_key", id: "filter-meta-key" },
    h("option", { value: "" }, "metadata…"),
    metaKeys.map((k) => h("option", { value: k, selected: metaEntry && metaEntry[0] === `meta.${k}` }, k)));
  const metaValue = h("input", {
    name: "meta_value", id: "filter-meta-value", list: "meta-values", placeholder: "value",
    value: metaEntry ? metaEntry[1] : "",
  });
  const values = h("datalist", { id: "meta-values" });
  const fillValues = () => fill(values,
    ...(facets.metadata[metaKey.value] || []).map((v) => h("option", { value: v })));
  metaKey.addEventListener("change", fillValues);
  fillValues();
  const form = h("form", { class: "filters", id: "filters" },
    h("div", { class: "row" },
      input("q", { type: "search", placeholder: "search outputs, messages, tool calls…", class: "wide", id: "search" }),
      select("experiment", [["", "all experiments"], ...Object.keys(facets.experiments).map((e) => [e, e])]),
      select("status", STATUSES),
      select("error_kind", [["", "any error kind"], ...Object.keys(facets.error_kinds).map((k) => [k, k])]),
      input("sample", { placeholder: "sample id contains" })),
    h("div", { class: "row" },
      metaKeys.length ? [metaKey, metaValue, values] : null,
      RANGES.map(([key, label]) => h("span", { class: "range" }, label, " ",
        input(`${key}_min`, { type: "number", step: "any", placeholder: "min", size: 6 }), "–",
        input(`${key}_max`, { type: "number", step: "any", placeholder: "max", size: 6 }))),
      h("button", { type: "submit", id: "apply" }, "Apply"),
      h("a", { href: link(["run", run.run_id]), class: "button subtle" }, "Reset")));
  const apply = (event) => {
    if (event) event.preventDefault();
    const next = new URLSearchParams();
    for (const [key, value] of new FormData(form).entries()) {
      if (!value || key === "meta_key" || key === "meta_value") continue;
      next.set(key, value);
    }
    if (metaKey.value && metaValue.value) next.set(`meta.${metaKey.value}`, metaValue.value);
    for (const key of ["sort", "desc", "slice"]) if (current.has(key)) next.set(key, current.get(key));
    go(run.run_id, next);
  };
  form.addEventListener("submit", apply);
  for (const el of form.querySelectorAll("select:not(#filter-meta-key)")) el.addEventListener("change", apply);
  return form;
}

function resultsGrid(run, page, params) {
  const current = new URLSearchParams(params);
  const sort = current.get("sort") || "order";
  const desc = current.get("desc") === "1";
  const sortLink = (key) => {
    const next = new URLSearchParams(current);
    next.set("sort", key);
    if (sort === key && !desc) next.set("desc", "1"); else next.delete("desc");
    next.delete("offset");
    return link(["run", run.run_id], next);
  };
  const head = h("tr", {}, COLUMNS.map(([key, label]) => h("th", {},
    key ? h("a", { href: sortLink(key) }, label, sort === key ? (desc ? " ▼" : " ▲") : "") : label)));
  const context = listQuery(current);
  for (const key of ["offset", "limit"]) context.delete(key);
  const sampleLink = (r, i) => {
    const q = new URLSearchParams(context);
    q.set("pos", String(page.offset + i));
    return link(["run", run.run_id, "result", r.id], q);
  };
  const rows = page.rows.map((r, i) => h("tr", { dataset: { status: r.status, sample: r.sample_id, id: r.id } },
    h("td", {}, h("a", { href: sampleLink(r, i), class: "sample-link" }, r.sample_id)),
    h("td", {}, r.experiment),
    h("td", { class: "num" }, r.epoch),
    h("td", {}, badge(r.status), r.error_kind ? h("span", { class: "muted small" }, ` ${r.error_kind}`) : null),
    h("td", { class: "num" }, num(r.score)),
    h("td", { class: "num" }, ms(r.latency_ms)),
    h("td", { class: "num" }, int(r.tokens)),
    h("td", { class: "num" }, r.tool_calls),
    h("td", { class: "reason", title: r.error || r.reason }, clip(r.error || r.reason, 300))));
  const first = page.total ? page.offset + 1 : 0;
  const last = page.offset + page.rows.length;
  return section(
    "Results",
    h("div", { class: "pager" },
      h("span", { id: "result-count" }, `${first}–${last} of ${int(page.total)}`),
      pagerLink(run, current, page, -1, "← previous"),
      pagerLink(run, current, page, 1, "next →")),
    h("table", { class: "grid", id: "results" }, h("thead", {}, head), h("tbody", {}, rows)),
    page.total ? null : h("p", { class: "muted", id: "no-results" }, "No result matches these filters."),
  );
}

function pagerLink(run, current, page, direction, label) {
  const offset = page.offset + direction * page.limit;
  if (offset < 0 || offset >= page.total) return h("span", { class: "muted" }, label);
  const next = new URLSearchParams(current);
  next.set("offset", String(offset));
  return h("a", { href: link(["run", run.run_id], next), class: direction > 0 ? "next" : "prev" }, label);
}
