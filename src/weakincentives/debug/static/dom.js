// Small helpers shared by the pages: DOM building, API calls, number formatting.
// Data from runs is only ever inserted as text (never as HTML), so a model output
// cannot inject markup into the viewer.

/** Create an element: h("a", {href: "#/"}, "text", child, [more]). */
export function h(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "class") node.className = value;
    else if (key === "dataset") Object.assign(node.dataset, value);
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else if (key === "value") node.value = value;
    // CSSOM, not the style attribute: the page's Content-Security-Policy blocks the latter.
    else if (key === "style") node.style.cssText = value;
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

/** Replace the children of `node`; arrays are flattened, null and false are skipped. */
export function fill(node, ...children) {
  node.replaceChildren(
    ...children.flat(Infinity).filter((c) => c !== null && c !== undefined && c !== false)
      .map((c) => (c instanceof Node ? c : document.createTextNode(String(c)))),
  );
  return node;
}

/** GET a JSON endpoint; throws an Error with the server's message on failure. */
export async function api(path) {
  const response = await fetch(path, { headers: { Accept: "application/json" } });
  let body;
  try {
    body = await response.json();
  } catch {
    body = { error: response.statusText };
  }
  if (!response.ok) throw new Error(body.error || response.statusText);
  return body;
}

/** A `#/...` link for the given path parts and query parameters. */
export function link(parts, params) {
  const path = parts.map((p) => encodeURIComponent(String(p))).join("/");
  const query = params ? new URLSearchParams(params).toString() : "";
  return `#/${path}${query ? `?${query}` : ""}`;
}

export function pct(x) {
  return x === null || x === undefined ? "–" : `${(x * 100).toFixed(1)}%`;
}

/** A difference of rates in percentage points, as the terminal report prints it ("+2.5 pts"). */
export function signedPts(x) {
  if (x === null || x === undefined) return "–";
  let v = (x * 100).toFixed(1);
  if (Number(v) === 0) v = (0).toFixed(1); // never "-0.0"
  return `${Number(v) >= 0 ? "+" : ""}${v} pts`;
}

/** A size of a rate difference in points (no sign), e.g. a detectable effect. */
export function pts(x) {
  return x === null || x === undefined ? "–" : `${(x * 100).toFixed(1)} pts`;
}

/** "1 sample", "3 samples". */
export function plural(n, word) {
  return `${n} ${n === 1 ? word : `${word}s`}`;
}

export function interval(pair, fmt = pct) {
  if (!pair || pair[0] === null || pair[1] === null) return "[–]";
  return `[${fmt(pair[0])}, ${fmt(pair[1])}]`;
}

export function num(x, digits = 3) {
  return x === null || x === undefined ? "–" : Number(x).toFixed(digits);
}

export function ms(x) {
  if (x === null || x === undefined) return "–";
  return x >= 10 ? `${Math.round(x).toLocaleString()} ms` : `${Number(x).toFixed(1)} ms`;
}

export function pvalue(x) {
  if (x === null || x === undefined) return "–";
  return x < 0.001 ? "<0.001" : x.toFixed(3);
}

/** Dollars, with enough digits for per-sample costs (the report's `format_usd`). */
export function usd(x) {
  if (x === null || x === undefined) return "–";
  const digits = Math.abs(x) >= 1 ? 2 : Math.abs(x) >= 0.01 ? 4 : 6;
  return `${x < 0 ? "-" : ""}$${Math.abs(x).toFixed(digits)}`;
}

/** A run's cost block (see `CostSummary.to_dict`) in one line; unpriced is never "$0". */
export function costText(c) {
  if (!c || !c.priced) return `unpriced (${c ? c.n : 0} results)`;
  let text = `${usd(c.total_usd)} (agent ${usd(c.agent_usd)}, judge ${usd(c.judge_usd)}) · ` +
    `${usd(c.per_sample_usd)}/sample ${interval(c.per_sample_ci_usd, usd)}`;
  if (c.unpriced) text += ` · ${c.unpriced} unpriced`;
  return text;
}

/**
 * Which turn (model call) each assistant message of a transcript is: message index ->
 * index in `turns`. A result's `turns` end with its transcript's assistant messages, one
 * each (a sample that ran several prompts has the earlier prompts' turns first).
 */
export function turnsByMessage(messages, turns) {
  const assistant = [];
  messages.forEach((m, i) => { if (m.role === "assistant") assistant.push(i); });
  const offset = (turns || []).length - assistant.length;
  const out = new Map();
  assistant.forEach((i, k) => { if (offset + k >= 0) out.set(i, offset + k); });
  return out;
}

/** One turn's tokens and cost, `[input, output, cost]` as a result records it. */
export function turnLine(turns, t) {
  const [input, output, cost] = turns[t];
  return h("div", {
    class: "turn-usage", "data-turn": String(t + 1), "data-input": String(input),
    "data-output": String(output), "data-cost": cost === null ? "" : String(cost),
  }, `turn ${t + 1} · ${int(input)} in · ${int(output)} out · ${cost === null ? "unpriced" : usd(cost)}`);
}

export function int(x) {
  return x === null || x === undefined ? "–" : Number(x).toLocaleString();
}

/** Pretty text for any JSON value: strings as they are, the rest indented. */
export function pretty(value) {
  if (typeof value === "string") return value;
  return JSON.stringify(value, null, 2);
}

export function badge(status) {
  return h("span", { class: `badge ${status}` }, status);
}

export function pre(value, cls = "") {
  return h("pre", { class: `block ${cls}` }, pretty(value));
}

export function section(title, ...content) {
  return h("section", { class: "panel" }, h("h2", {}, title), ...content);
}

export function table(headers, rows, attrs = {}) {
  return h(
    "table",
    attrs,
    h("thead", {}, h("tr", {}, headers.map((x) => h("th", {}, x)))),
    h("tbody", {}, rows),
  );
}

export function details(summary, ...content) {
  return h("details", {}, h("summary", {}, summary), ...content);
}

export function clip(text, max = 160) {
  if (text === null || text === undefined) return "";
  const s = String(text);
  return s.length > max ? `${s.slice(0, max - 1)}…` : s;
}

export function setCrumbs(items) {
  const nav = document.getElementById("crumbs");
  fill(nav, items.map(([label, href], i) => [
    i ? h("span", { class: "sep" }, "/") : null,
    href ? h("a", { href }, label) : h("span", {}, label),
  ]));
}

/** A chart from the API (`chart_json`): its SVG, note and data table in a <figure>.
 *  The SVG is drawn by the server from numbers (text escaped there); it is parsed as
 *  inert markup and anything but drawing elements and attributes is dropped. */
export function chartFigure(c) {
  const parsed = new DOMParser().parseFromString(c.svg, "text/html");
  const svg = parsed.body.querySelector("svg");
  if (svg) {
    for (const el of [svg, ...svg.querySelectorAll("*")]) {
      if (!SVG_TAGS.has(el.localName)) { el.remove(); continue; }
      for (const attr of [...el.attributes]) {
        if (attr.name.startsWith("on") || attr.name.includes("href")) el.removeAttribute(attr.name);
      }
    }
  }
  return h("figure", { class: "chart", id: c.id, dataset: { kind: c.kind } },
    h("figcaption", {}, c.title),
    svg ? document.importNode(svg, true) : null,
    c.note ? h("p", { class: "chart-note" }, c.note) : null,
    details("Data table", table(c.headers, c.rows.map((row) =>
      h("tr", {}, row.map((cell) => h("td", {}, cell)))), { class: "chart-table" })));
}

const SVG_TAGS = new Set(["svg", "g", "rect", "circle", "line", "path", "polyline", "text", "title"]);

let keyHandlers = {};

/** Keyboard shortcuts of the current page: {key: () => ...}; replaced on each route. */
export function setKeys(handlers) {
  keyHandlers = handlers || {};
}

document.addEventListener("keydown", (event) => {
  if (event.ctrlKey || event.metaKey || event.altKey) return;
  const target = event.target;
  if (target && (target.isContentEditable || ["INPUT", "SELECT", "TEXTAREA"].includes(target.tagName))) return;
  // A focused link, button or summary keeps its own Enter (and the browser's keys).
  if (target && target.closest && target.closest("a, button, summary")) return;
  const handler = keyHandlers[event.key];
  if (handler) {
    event.preventDefault();
    handler();
  }
});
