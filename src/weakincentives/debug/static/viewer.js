// wink debug: a single-page viewer over the JSON API, routed by the URL fragment:
//   #/                           runs            #/run/<id>?<filters>     one run
//   #/run/<id>/result/<result>   one sample      #/compare?<sides>        A/B page
//   #/pair?<sides>               two results side by side, with diffs
//   #/bundle                     the bundle the viewer was started on

import { api, fill, h, setKeys } from "./dom.js";
import { renderCompare } from "./compare.js";
import { renderRun, renderRuns } from "./runs.js";
import { renderPair } from "./pair.js";
import { renderBundle, renderResult } from "./sample.js";

const view = document.getElementById("app");
let info = null;
let generation = 0;

function parseHash() {
  const raw = location.hash.replace(/^#/, "") || "/";
  const at = raw.indexOf("?");
  const path = at < 0 ? raw : raw.slice(0, at);
  const query = at < 0 ? "" : raw.slice(at + 1);
  return {
    parts: path.split("/").filter(Boolean).map(decodeURIComponent),
    params: new URLSearchParams(query),
  };
}

async function route() {
  const mine = ++generation;
  // A slower answer for a page the user already left must not replace the new page.
  const isCurrent = () => mine === generation;
  const { parts, params } = parseHash();
  document.body.dataset.page = parts[0] || "runs";
  document.body.dataset.loading = "1";
  setKeys({});
  try {
    if (info === null) {
      info = await api("/api/info");
      document.getElementById("target").textContent = info.target;
      if (info.kind === "bundle") document.getElementById("nav-compare").hidden = true;
    }
    if (info.kind === "bundle") {
      await renderBundle(view, isCurrent);
    } else if (parts[0] === "run" && parts[2] === "result" && parts[3]) {
      await renderResult(view, parts[1], parts[3], params, isCurrent);
    } else if (parts[0] === "run" && parts[1]) {
      await renderRun(view, parts[1], params, isCurrent);
    } else if (parts[0] === "pair") {
      await renderPair(view, params, isCurrent);
    } else if (parts[0] === "compare") {
      await renderCompare(view, params, isCurrent);
    } else if (info.runs.length === 1 && info.kind === "runs" && parts.length === 0) {
      location.replace(`#/run/${encodeURIComponent(info.runs[0])}`);
      return;
    } else {
      await renderRuns(view);
    }
    if (isCurrent() && (parts[2] === "result" || parts[0] === "pair")) window.scrollTo(0, 0);
  } catch (error) {
    if (isCurrent()) {
      fill(view, h("div", { class: "error-box", id: "error" }, h("h2", {}, "Something went wrong"),
        h("p", {}, String(error.message || error))));
    }
  } finally {
    if (isCurrent()) delete document.body.dataset.loading;
  }
}

window.addEventListener("hashchange", route);
route();
