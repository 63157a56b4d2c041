// The A/B page: two experiments of a run (or of two runs) side by side, the paired
// statistics, and the flipped samples (pass -> fail, fail -> pass) linked to both results.

import {
  api, badge, chartFigure, fill, clip, h, int, interval, link, num, pct, plural, pts, pvalue, section,
  setCrumbs, signedPts, usd,
} from "./dom.js";

const PREFERRED_BASELINES = ["baseline", "control"];

export async function renderCompare(view, params, isCurrent) {
  setCrumbs([["runs", "#/"], ["A/B compare", null]]);
  const { runs } = await api("/api/runs");
  if (!isCurrent()) return;
  if (!runs.length) {
    fill(view, h("p", { class: "muted" }, "No runs to compare."));
    return;
  }
  const choice = defaults(runs, new URLSearchParams(params));
  const form = pickForm(runs, choice);
  fill(view, h("h1", {}, "A/B compare"), form, h("div", { id: "comparison" }));
  if (!choice.base || !choice.treat || (choice.base === choice.treat && choice.base_run === choice.treat_run)) {
    fill(view.querySelector("#comparison"),
      h("p", { class: "muted" }, "Pick two different experiments (of one run or of two runs)."));
    return;
  }
  const query = new URLSearchParams(choice);
  const asked = new URLSearchParams(params);
  if (asked.has("slice")) query.set("slice", asked.get("slice"));
  const data = await api(`/api/compare?${query}`);
  if (!isCurrent()) return;
  fill(view.querySelector("#comparison"), ...comparison(data, choice));
}

function defaults(runs, q) {
  const base_run = q.get("base_run") || runs[0].run_id;
  const treat_run = q.get("treat_run") || base_run;
  const names = (id) => (runs.find((r) => r.run_id === id) || { experiment_names: [] }).experiment_names;
  const baseNames = names(base_run);
  const base = q.get("base") || PREFERRED_BASELINES.find((n) => baseNames.includes(n)) || baseNames[0] || "";
  const treatNames = names(treat_run);
  const treat = q.get("treat") || treatNames.find((n) => treat_run !== base_run || n !== base) || "";
  return { base_run, base, treat_run, treat };
}

function pickForm(runs, choice) {
  const runSelect = (name) => h("select", { name, id: `pick-${name}` },
    runs.map((r) => h("option", { value: r.run_id, selected: r.run_id === choice[name] }, r.run_id)));
  const expSelect = (name, runName) => {
    const run = runs.find((r) => r.run_id === choice[runName]) || runs[0];
    return h("select", { name, id: `pick-${name}` },
      run.experiment_names.map((e) => h("option", { value: e, selected: e === choice[name] }, e)));
  };
  const form = h("form", { class: "filters", id: "compare-form" },
    h("div", { class: "row" },
      h("span", { class: "side" }, "Baseline ", runSelect("base_run"), expSelect("base", "base_run")),
      h("span", { class: "side" }, "Treatment ", runSelect("treat_run"), expSelect("treat", "treat_run")),
      h("button", { type: "submit" }, "Compare")));
  const submit = (event) => {
    if (event) event.preventDefault();
    const next = Object.fromEntries(new FormData(form).entries());
    // A new run may not have the experiment picked before: let the defaults choose.
    if (next.base_run !== choice.base_run) delete next.base;
    if (next.treat_run !== choice.treat_run) delete next.treat;
    location.hash = link(["compare"], next);
  };
  form.addEventListener("submit", submit);
  for (const el of form.querySelectorAll("select")) el.addEventListener("change", submit);
  return form;
}

function chartsSection(c, choice) {
  const select = h("select", { id: "compare-slice", "aria-label": "Slice by metadata key" },
    h("option", { value: "" }, "no slice"),
    c.slice_keys.map((k) => h("option", { value: k, selected: k === c.slice }, k)));
  select.addEventListener("change", () => {
    location.hash = link(["compare"], { ...choice, slice: select.value });
  });
  return h("section", { class: "panel", id: "compare-charts" },
    h("div", { class: "title-row" }, h("h2", {}, "Charts"), h("span", { class: "spacer" }),
      c.slice_keys.length ? h("label", {}, "Delta by ", select) : null),
    h("div", { class: "charts" }, c.charts.map(chartFigure)));
}

function comparison(c, choice) {
  const label = (side) => (c.baseline.run_id === c.treatment.run_id ? side.experiment : `${side.run_id} / ${side.experiment}`);
  const test = c.mcnemar;
  const why = c.unknown || {};
  const na = (name) => (why[name] ? `n/a (${why[name]})` : "n/a");
  // A side's interval: Wilson, or clustered by sample when epochs repeat (as the CLI).
  const method = (side) => (side.n_clusters
    ? `${side.pass_rate_method}, clustered by sample (${plural(side.n_clusters, "sample")})`
    : side.pass_rate_method);
  const pairs = c.n_clusters ? `${plural(c.n_pairs, "pair")} in ${plural(c.n_clusters, "sample")}` : plural(c.n_pairs, "pair");
  const stats = h("table", { class: "stats", id: "stats" }, h("tbody", {},
    statRow("Baseline", `${pct(c.baseline.pass_rate)} ${interval(c.baseline.pass_rate_ci)}`,
      `${label(c.baseline)}, n=${int(c.baseline.n)} (${method(c.baseline)} 95% CI)`),
    statRow("Treatment", `${pct(c.treatment.pass_rate)} ${interval(c.treatment.pass_rate_ci)}`,
      `${label(c.treatment)}, n=${int(c.treatment.n)} (${method(c.treatment)} 95% CI)`),
    statRow("Paired delta", `${signedPts(c.delta)} ${c.delta_ci[0] === null ? na("interval") : interval(c.delta_ci, signedPts)}`,
      c.interval_method ? `${pairs}; ${c.interval_method}` : pairs),
    statRow("Bootstrap CI", c.bootstrap_ci[0] === null ? na("bootstrap") : interval(c.bootstrap_ci, signedPts),
      "seeded paired bootstrap (cross-check)"),
    statRow("p-value", c.p_value === null ? na("p_value") : pvalue(c.p_value),
      test ? `McNemar ${test.exact ? "exact" : "chi²"}, discordant ${test.b} / ${test.c}`
        : c.test_name ? `${c.test_name}, ${pairs}` : "no pairs"),
    statRow("Detectable effect", c.minimum_detectable_effect === null ? na("minimum_detectable_effect")
      : pts(c.minimum_detectable_effect), "at 80% power with these pairs"),
    statRow("Score delta", `${num(c.score_delta)} ${interval(c.score_delta_ci, num)}`,
      c.score_test_name ? `p ${pvalue(c.score_p_value)}, ${c.score_test_name}` : `p ${pvalue(c.score_p_value)}`),
    statRow("Cost delta", c.cost_delta ? `${signedUsd(c.cost_delta.delta_usd)}/sample ${interval(c.cost_delta.delta_ci_usd, signedUsd)}` : "unpriced",
      c.cost_delta ? `${int(c.cost_delta.n_pairs)} priced pairs` : "no pair has both costs"),
    statRow("Unpaired", `${c.unpaired_baseline} baseline · ${c.unpaired_treatment} treatment`,
      c.duplicates ? `${c.duplicates} duplicates ignored` : "")));
  return [
    section("Paired statistics", stats),
    chartsSection(c, choice),
    flipSection("Regressions (pass → fail)", "regressions", c.regressions, c.regressions_count, c),
    flipSection("Improvements (fail → pass)", "improvements", c.improvements, c.improvements_count, c),
  ];
}

function signedUsd(x) {
  return x === null || x === undefined ? "–" : `${x >= 0 ? "+" : ""}${usd(x)}`;
}

function statRow(name, value, note) {
  return h("tr", {}, h("th", {}, name), h("td", {}, value), h("td", { class: "muted" }, note));
}

function flipSection(title, id, flips, count, c) {
  if (!count) return section(`${title}: 0`, h("p", { class: "muted", id: `${id}-none` }, "None."));
  const cell = (side, run) => h("td", {},
    side.id === null ? badge(side.status)
      : h("a", { href: link(["run", run, "result", side.id]) }, badge(side.status)),
    " ", num(side.score), " ",
    h("span", { class: "muted small", title: side.error || side.reason }, clip(side.error || side.reason, 120)));
  const shown = flips.length < count ? h("p", { class: "muted" }, `Showing the first ${int(flips.length)}.`) : null;
  const pair = (f) => link(["pair"], {
    base_run: c.baseline.run_id, base: f.baseline.id, treat_run: c.treatment.run_id, treat: f.treatment.id,
  });
  return section(`${title}: ${int(count)}`, shown, h("table", { class: "grid", id }, h("thead", {}, h("tr", {},
    h("th", {}, "Sample"), h("th", {}, "Epoch"), h("th", {}, "Baseline"), h("th", {}, "Treatment"), h("th", {}, ""))),
  h("tbody", {}, flips.map((f) => h("tr", { dataset: { sample: f.sample_id } },
    h("td", {}, f.sample_id), h("td", { class: "num" }, f.epoch),
    cell(f.baseline, c.baseline.run_id), cell(f.treatment, c.treatment.run_id),
    h("td", {}, h("a", { href: pair(f), class: "pair-link" }, "side by side")))))));
}
