// One sample under two experiments (a flipped sample), side by side: verdicts, a line
// diff of the outputs and of the tool-call sequences, and both transcripts.

import {
  api, badge, details, fill, h, int, link, num, pre, section, setCrumbs, setKeys, turnLine, turnsByMessage,
  usd,
} from "./dom.js";

export async function renderPair(view, params, isCurrent) {
  const query = new URLSearchParams();
  for (const key of ["base_run", "base", "treat_run", "treat"]) {
    if (params.get(key)) query.set(key, params.get(key));
  }
  const data = await api(`/api/pair?${query}`);
  if (!isCurrent()) return;
  const a = data.baseline;
  const b = data.treatment;
  setCrumbs([["runs", "#/"], [a.run_id, link(["run", a.run_id])], [`${a.result.sample_id}: side by side`, null]]);
  const back = () => history.back();
  setKeys({ u: back, Escape: back });
  fill(view,
    h("div", { class: "title-row" },
      h("h1", { id: "pair-title" }, a.result.sample_id),
      h("span", { class: "muted" }, `epoch ${a.result.epoch}`)),
    a.sample.recorded ? section("Input and expected",
      h("div", { class: "pair", id: "pair-input" },
        h("div", {}, h("h3", {}, "Input"), pre(a.sample.input)),
        h("div", {}, h("h3", {}, "Expected"), pre(a.sample.expected)))) : null,
    h("div", { class: "pair", id: "pair-verdicts" }, verdict("Baseline", a, "pair-baseline"), verdict("Treatment", b, "pair-treatment")),
    section("Output", diffTable(data.diff.output, data.diff.output_same, "output-diff", "The outputs are the same.")),
    section("Tool calls", diffTable(data.diff.tool_calls, data.diff.tool_calls_same, "tools-diff",
      "The same tool calls, with the same arguments, in the same order.")),
    section("Transcripts", h("div", { class: "pair" },
      details(`${a.result.experiment_name}: ${a.result.messages.length} messages`, transcript(a.result.messages, a.result.turns || [])),
      details(`${b.result.experiment_name}: ${b.result.messages.length} messages`, transcript(b.result.messages, b.result.turns || [])))),
  );
}

function verdict(title, side, id) {
  const r = side.result;
  // The checks that failed (top-level metrics in [0, 0.5), as the failure groups count them).
  const failed = r.score.metrics.filter((m) => !m.name.includes(".") && m.value >= 0 && m.value < 0.5).map((m) => m.name);
  return h("section", { class: "panel", id },
    h("h2", {}, `${title}: `, h("a", { href: link(["run", side.run_id, "result", side.row.id]) }, r.experiment_name), " ", badge(side.row.status)),
    h("dl", { class: "inline" },
      h("dt", {}, "score"), h("dd", {}, num(r.score.value)),
      failed.length ? [h("dt", {}, "failed checks"), h("dd", { class: "failed-checks" }, h("strong", {}, failed.join(", ")))] : null,
      h("dt", {}, "reason"), h("dd", { class: "reason-full" }, r.score.reason || "–"),
      h("dt", {}, "tokens"), h("dd", {}, `${int(r.usage.input_tokens)} in · ${int(r.usage.output_tokens)} out · ${(r.turns || []).length} model calls`),
      h("dt", {}, "cost"), h("dd", {}, r.cost === null || r.cost === undefined ? "unpriced" : `${usd(r.cost)} agent · ${usd(r.judge_cost)} judge`),
      r.error ? [h("dt", {}, "error"), h("dd", {}, h("strong", {}, r.error_kind || "error"), " ", r.error)] : null));
}

// Two columns: baseline lines on the left, treatment lines on the right; a replaced
// block pairs its lines up, deleted lines are red on the left, inserted green on the right.
function diffTable(blocks, same, id, sameText) {
  const rows = [];
  for (const block of blocks) {
    const n = Math.max(block.a.length, block.b.length);
    for (let i = 0; i < n; i++) {
      const left = block.a[i];
      const right = block.b[i];
      const op = block.op;
      rows.push(h("tr", { class: `diff-${op}` },
        h("td", { class: left === undefined ? "empty" : op === "equal" ? "" : "del" }, left === undefined ? "" : h("pre", {}, left)),
        h("td", { class: right === undefined ? "empty" : op === "equal" ? "" : "ins" }, right === undefined ? "" : h("pre", {}, right))));
    }
  }
  return [
    same ? h("p", { class: "muted", id: `${id}-same` }, sameText) : null,
    rows.length ? h("table", { class: "diff", id }, h("thead", {}, h("tr", {}, h("th", {}, "baseline"), h("th", {}, "treatment"))), h("tbody", {}, rows))
      : h("p", { class: "muted" }, "Nothing recorded on either side."),
  ];
}

function transcript(messages, turns) {
  if (!messages.length) return h("p", { class: "muted" }, "No transcript recorded.");
  const turnOf = turnsByMessage(messages, turns);
  return h("ol", { class: "transcript" }, messages.map((m, i) =>
    h("li", { class: `msg ${m.role}` },
      h("div", { class: "role" }, m.role, m.name ? ` · ${m.name}` : ""),
      turnOf.has(i) ? turnLine(turns, turnOf.get(i)) : null,
      m.content !== null ? h("pre", { class: "content" }, m.content) : null,
      m.tool_calls.map((c) => h("div", { class: "call" }, h("span", { class: "tool-name" }, c.name), pre(c.arguments))))));
}
