"use strict";
// agentrl view: every string from a dump reaches the DOM through text nodes (el/text below), never as markup.
const DATA = JSON.parse(document.getElementById("data").textContent);
const TRAJ = DATA.trajectories;
const BY_ID = new Map(TRAJ.map((t) => [t.id, t]));
const SVG = "http://www.w3.org/2000/svg";
const COLORS = ["#0969da", "#cf222e", "#1a7f37", "#8250df", "#bc4c00", "#6e7781"];

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, String(v));
  for (const c of children) node.append(c instanceof Node ? c : document.createTextNode(c == null ? "" : String(c)));
  return node;
}
function svgEl(tag, attrs) {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, String(v));
  return node;
}
const fmt = (v, d = 3) => (v == null || Number.isNaN(v) ? "–" : Number(v).toFixed(d));
const axis = (v) => (v !== 0 && Math.abs(v) < 0.01 ? v.toExponential(1) : fmt(v, 2));
const answer = (c) => (c === true ? "correct" : c === false ? "wrong" : "ungraded");
// an eval run is one "step" named after the run: "eval_after"; a training step: "runs/rl · step 3"
const groupKey = (t) => (t.kind === "eval" ? t.run : t.run + " · step " + t.step);

// ---- run overview ------------------------------------------------------------------------------------------------
function lineChart(chart) {
  const box = el("div", { class: "chart" }, el("h4", {}, chart.title));
  if (!chart.series.length) { box.append(el("div", { class: "empty" }, "not logged by this run")); return box; }
  const W = 280, H = 150, P = 30;
  const all = chart.series.flatMap((s) => s.values).filter((v) => v != null);
  let lo = Math.min(...all), hi = Math.max(...all);
  if (lo === hi) { const pad = Math.abs(lo) / 2 || 0.5; lo -= pad; hi += pad; }
  const steps = chart.steps, n = Math.max(steps.length - 1, 1);
  const x = (i) => P + (i * (W - P - 6)) / n, y = (v) => H - 18 - ((v - lo) * (H - 28)) / (hi - lo);
  const svg = svgEl("svg", { width: W, height: H, role: "img" });
  svg.append(svgEl("line", { x1: P, y1: H - 18, x2: W - 6, y2: H - 18, stroke: "#999" }));
  for (const [v, yy] of [[hi, y(hi)], [lo, y(lo)]]) {
    const t = svgEl("text", { x: 2, y: yy + 4, "font-size": 10 }); t.textContent = axis(v); svg.append(t);
  }
  const s0 = svgEl("text", { x: P, y: H - 4, "font-size": 10 }); s0.textContent = "step " + steps[0]; svg.append(s0);
  const s1 = svgEl("text", { x: W - 40, y: H - 4, "font-size": 10 }); s1.textContent = steps[steps.length - 1]; svg.append(s1);
  const legend = el("div", { class: "legend" });
  chart.series.forEach((s, k) => {
    const pts = s.values.map((v, i) => (v == null ? null : x(i) + "," + y(v))).filter(Boolean);
    svg.append(svgEl("polyline", { points: pts.join(" "), fill: "none", stroke: COLORS[k % COLORS.length], "stroke-width": 1.5 }));
    if (pts.length < 20) {  // a dot per step: a one-step run shows its value
      for (const pt of pts) {
        const [cx, cy] = pt.split(",");
        svg.append(svgEl("circle", { cx, cy, r: 2.5, fill: COLORS[k % COLORS.length] }));
      }
    }
    const last = s.values.filter((v) => v != null).pop();
    legend.append(el("span", { style: "color:" + COLORS[k % COLORS.length] }, s.label + " " + (last != null && last !== 0 && Math.abs(last) < 0.01 ? last.toExponential(2) : fmt(last))));
  });
  box.append(svg, legend);
  return box;
}
function renderOverview() {
  const view = document.getElementById("view-overview");
  view.replaceChildren();
  if (!DATA.overview.length) view.append(el("p", {}, "No file-logger metrics: see the notes above."));
  for (const run of DATA.overview) {
    view.append(el("h3", {}, "run " + run.run), el("div", { class: "charts" }, ...run.charts.map(lineChart)));
  }
  const reports = Object.entries(DATA.reports);
  if (reports.length) {
    const figures = (r) => Object.entries(r.metrics || {}).map(([k, v]) => k + " " + (typeof v === "number" ? v.toFixed(3) : v)).join("   ");
    const rows = reports.map(([run, r]) => el("tr", {}, el("td", {}, run), el("td", {}, (r.records ?? "?") + " records"), el("td", {}, figures(r) || "no metrics")));
    view.append(el("h3", {}, "eval reports"), el("table", {}, el("tbody", {}, ...rows)));
  }
}

// ---- reasoning mode ----------------------------------------------------------------------------------------------
function bars(byCalls, field, cls, max) {
  const keys = Object.keys(byCalls).sort((a, b) => a - b);
  const W = 22 * Math.max(keys.length, 1) + 4, H = 60;
  const svg = svgEl("svg", { width: W, height: H });
  keys.forEach((k, i) => {
    const v = byCalls[k][field];
    const h = v == null ? 0 : (v / max) * (H - 16);
    const r = svgEl("rect", { x: 2 + 22 * i, y: H - 12 - h, width: 18, height: h, class: "bar " + cls });
    const tip = svgEl("title", {}); tip.textContent = k + " calls: " + (v == null ? "–" : fmt(v, 2)); r.append(tip);
    const lab = svgEl("text", { x: 6 + 22 * i, y: H - 1, "font-size": 10 }); lab.textContent = k;
    svg.append(r, lab);
  });
  return svg;
}
function renderReasoning() {
  const view = document.getElementById("view-reasoning");
  view.replaceChildren(el("p", {}, "How many tool calls each trajectory made, the accuracy of the trajectories " +
    "with each number of calls, and the share of calls that ran without error. The paper's deliberative mode: fewer, " +
    "more successful calls with higher accuracy; a reactive policy calls often and fails more."));
  const head = el("tr", {}, ...["run", "step", "trajectories", "accuracy", "calls / traj", "tool success",
    "trajectories by calls", "accuracy by calls", "table"].map((h) => el("th", {}, h)));
  const rows = DATA.reasoning.map((r) => {
    const maxN = Math.max(...Object.values(r.by_calls).map((b) => b.trajectories));
    const detail = Object.entries(r.by_calls).map(([k, b]) => k + ": " + b.trajectories + " @ " + fmt(b.accuracy, 2)).join("; ");
    return el("tr", { "data-run": r.run, "data-step": r.step }, el("td", {}, r.run), el("td", {}, r.kind === "eval" ? "eval" : r.step),
      el("td", {}, r.trajectories), el("td", {}, fmt(r.accuracy)), el("td", {}, fmt(r.calls_mean, 2)),
      el("td", {}, fmt(r.tool_success_rate)), el("td", {}, bars(r.by_calls, "trajectories", "", maxN)),
      el("td", {}, bars(r.by_calls, "accuracy", "acc", 1)), el("td", { class: "by-calls" }, detail));
  });
  view.append(reasoningCompare(), el("h4", {}, "every step and eval run"),
    el("table", { id: "reasoning-table" }, el("thead", {}, head), el("tbody", {}, ...rows)));
}
// The two rows a before/after view opens on: the first and last eval run (eval before vs after RL) when there are
// two, else the first and last row.
function beforeAfter(keys, isEval) {
  const evals = keys.filter(isEval);
  return evals.length >= 2 ? [evals[0], evals[evals.length - 1]] : [keys[0], keys[keys.length - 1]];
}
function reasoningCompare() {
  const byKey = new Map(DATA.reasoning.map((r) => [groupKey(r), r]));
  const keys = [...byKey.keys()];
  const box = el("div", { id: "rm-compare" });
  if (keys.length < 2) return box;
  const [k0, k1] = beforeAfter(keys, (k) => byKey.get(k).kind === "eval");
  const pick = (id, value) => {
    const s = el("select", { id }, ...keys.map((k) => el("option", { value: k }, k)));
    s.value = value;
    return s;
  };
  const a = pick("rm-a", k0), b = pick("rm-b", k1);
  const table = el("table", { id: "rm-compare-table" });
  const update = () => {
    const ra = byKey.get(a.value), rb = byKey.get(b.value);
    const calls = [...new Set([...Object.keys(ra.by_calls), ...Object.keys(rb.by_calls)])].sort((x, y) => x - y);
    const hbar = (v, cls) => el("span", { class: "hbar " + cls, style: "width:" + Math.round(60 * (v || 0)) + "px" });
    const share = (r, n) => {
      const b = r.by_calls[n];
      return b ? [b.trajectories + " (" + fmt(b.trajectories / r.trajectories, 2) + ")", hbar(b.trajectories / r.trajectories, "")] : ["0"];
    };
    const acc = (r, n) => (r.by_calls[n] ? [fmt(r.by_calls[n].accuracy, 2), hbar(r.by_calls[n].accuracy, "acc")] : ["–"]);
    const head = el("tr", {}, ...["tool calls", "before: trajectories (share)", "before: accuracy",
      "after: trajectories (share)", "after: accuracy"].map((h) => el("th", {}, h)));
    const rows = calls.map((n) => el("tr", { "data-calls": n }, el("td", {}, n), el("td", {}, ...share(ra, n)),
      el("td", {}, ...acc(ra, n)), el("td", {}, ...share(rb, n)), el("td", {}, ...acc(rb, n))));
    const total = (label, f, d) => el("tr", { class: "total" }, el("th", {}, label), el("td", { colspan: 2 }, fmt(f(ra), d)),
      el("td", { colspan: 2 }, fmt(f(rb), d)));
    table.replaceChildren(el("thead", {}, head), el("tbody", {}, ...rows,
      total("all: accuracy", (r) => r.accuracy, 3), total("calls / trajectory", (r) => r.calls_mean, 2),
      total("tool success", (r) => r.tool_success_rate, 3), total("trajectories", (r) => r.trajectories, 0)));
  };
  a.addEventListener("change", update); b.addEventListener("change", update);
  update();
  box.append(el("h4", {}, "before / after"), el("label", {}, "before ", a), " ", el("label", {}, "after ", b), table);
  return box;
}

// ---- trajectory list ---------------------------------------------------------------------------------------------
const F = (id) => document.getElementById(id);
function fillSelect(id, values) {
  F(id).replaceChildren(el("option", { value: "" }, "all"), ...values.map((v) => el("option", { value: v }, v)));
}
function setupFilters() {
  const uniq = (f) => [...new Set(TRAJ.flatMap(f))].sort();
  fillSelect("f-run", uniq((t) => [t.run]));
  fillSelect("f-step", [...new Set(TRAJ.map((t) => t.step))]);
  fillSelect("f-source", uniq((t) => [t.source]));
  fillSelect("f-status", uniq((t) => t.statuses));
  fillSelect("f-flag", uniq((t) => t.flags.concat(t.masked ? ["masked"] : [])));
  if (DATA.lazy) F("f-detail").parentElement.hidden = true;  // --serve reads every trajectory's turns
  for (const id of ["f-run", "f-step", "f-source", "f-correct", "f-rmin", "f-rmax", "f-status", "f-flag", "f-detail"]) {
    F(id).addEventListener(id.startsWith("f-r") && id !== "f-run" ? "input" : "change", renderList);
  }
}
function matches(t) {
  const v = (id) => F(id).value;
  if (v("f-run") && t.run !== v("f-run")) return false;
  if (v("f-step") && t.step !== v("f-step")) return false;
  if (v("f-source") && t.source !== v("f-source")) return false;
  if (v("f-correct") && answer(t.correct) !== v("f-correct")) return false;
  if (v("f-rmin") !== "" && !(t.reward >= Number(v("f-rmin")))) return false;
  if (v("f-rmax") !== "" && !(t.reward <= Number(v("f-rmax")))) return false;
  if (v("f-status") && !t.statuses.includes(v("f-status"))) return false;
  if (v("f-flag") && !(t.flags.includes(v("f-flag")) || (v("f-flag") === "masked" && t.masked))) return false;
  if (F("f-detail").checked && !DATA.lazy && !DATA.details[t.id]) return false;
  return true;
}
function renderList() {
  const t0 = performance.now();
  const rows = [];
  for (const t of TRAJ) {
    if (!matches(t)) continue;
    const embedded = DATA.lazy || DATA.details[t.id];
    const tr = el("tr", { "data-id": t.id, class: embedded ? "" : "nodetail" }, el("td", {}, t.run), el("td", {}, t.step), el("td", {}, t.source),
      el("td", {}, t.prompt), el("td", { class: t.correct === true ? "ok" : t.correct === false ? "bad" : "unk" }, answer(t.correct)),
      el("td", {}, fmt(t.reward)), el("td", {}, t.tool_calls), el("td", {}, t.statuses.join(" ")),
      el("td", {}, t.flags.join(" ")), el("td", {}, t.masked ? t.mask_flags.join(" ") || "yes" : ""));
    rows.push(tr);
  }
  document.querySelector("#list tbody").replaceChildren(...rows);
  F("list-count").textContent = rows.length + " of " + TRAJ.length;
  document.body.dataset.listMs = String(performance.now() - t0);
}

// ---- trajectory page ---------------------------------------------------------------------------------------------
const KEYWORDS = new Set(("False None True and as assert async await break class continue def del elif else except " +
  "finally for from global if import in is lambda nonlocal not or pass raise return try while with yield print").split(" "));
function highlight(code) {
  const pre = el("pre", { class: "code" });
  const re = /(#[^\n]*)|("(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*')|(\b\d+(?:\.\d+)?\b)|([A-Za-z_]\w*)|([\s\S])/g;
  let m, plain = "";
  const flush = () => { if (plain) { pre.append(plain); plain = ""; } };
  while ((m = re.exec(code)) !== null) {
    const cls = m[1] ? "com" : m[2] ? "str" : m[3] ? "num" : m[4] && KEYWORDS.has(m[4]) ? "kw" : null;
    if (cls) { flush(); pre.append(el("span", { class: cls }, m[0])); } else plain += m[0];
  }
  flush();
  return pre;
}
function turnBody(turn) {
  const box = el("div", {});
  if (turn.role !== "assistant") { box.append(el("pre", {}, turn.content)); return box; }
  const parts = turn.content.split(/(<tool_call>[\s\S]*?<\/tool_call>)/);
  for (const part of parts) {
    const m = part.match(/^<tool_call>([\s\S]*?)<\/tool_call>$/);
    let code = null;
    if (m) { try { const call = JSON.parse(m[1]); code = (call.arguments || {}).code; } catch (e) { code = null; } }
    if (typeof code === "string") box.append(el("pre", {}, "tool call:"), highlight(code));
    else if (part) box.append(el("pre", {}, part));
  }
  return box;
}
function kvTable(pairs) {
  return el("table", { class: "kv" }, el("tbody", {}, ...pairs.map(([k, v]) => el("tr", {}, el("td", {}, k), el("td", {}, v)))));
}
function tokenView(tokens) {
  const box = el("div", { id: "tokens" });
  tokens.text.forEach((s, i) => {
    const span = el("span", { class: "m" + tokens.mask[i], title: "#" + i + " loss mask " + tokens.mask[i] }, s);
    box.append(span);
  });
  return box;
}
async function loadDetail(id) {
  if (DATA.details[id]) return DATA.details[id];
  if (!DATA.lazy) return null;
  const res = await fetch("api/detail?id=" + encodeURIComponent(id));
  return res.ok ? res.json() : null;
}
async function renderTrajectory(id) {
  const view = document.getElementById("view-trajectory");
  const t = BY_ID.get(id);
  view.replaceChildren();
  if (!t) { view.append(el("p", {}, "unknown trajectory")); return; }
  const b = t.breakdown;
  view.append(el("h3", {}, groupKey(t) + " · " + t.source + " · " + answer(t.correct)),
    el("div", { class: "side" },
      el("div", {}, el("h4", {}, "reward breakdown"), kvTable([["score", fmt(b.score)], ["tool bonus", fmt(b.tool_bonus)],
        ["overlong penalty", fmt(b.overlong_penalty)], ["final reward", fmt(b.final)]])),
      el("div", {}, el("h4", {}, "tools and flags"), kvTable([["tool calls", t.tool_calls], ["failed calls", t.tool_failures],
        ["statuses", t.statuses.join(", ")], ["latency (s)", t.latency_s.map((x) => fmt(x, 2)).join(", ")],
        ["termination", t.termination], ["flags", t.flags.join(", ") || "none"], ["ground truth", t.ground_truth ?? "–"]])),
      el("div", {}, el("h4", {}, "masks"), kvTable([["masked from the update", t.kind === "eval" ? "– (an eval: no update)" : t.masked ? "yes" : "no"],
        ["flagged by (a mask that is off flags, masks nothing)", t.mask_flags.join(", ") || "none"], ["model tokens", t.response_tokens]]))));
  const d = await loadDetail(id);
  if (!d) { view.append(el("p", { class: "unk" }, "turns and tokens not embedded in this page (size budget): open the run with agentrl-recipe view --serve")); return; }
  const turns = el("div", { id: "turns" }, ...d.turns.map((turn) => el("div", { class: "turn " + turn.role },
    el("div", { class: "role" }, turn.role), turnBody(turn))));
  const toggle = el("button", { id: "token-mode", class: "small" }, "token mode");
  const body = el("div", {}, turns);
  if (d.tokens) {
    let tokenMode = false;
    toggle.addEventListener("click", () => {
      tokenMode = !tokenMode;
      toggle.textContent = tokenMode ? "turns" : "token mode";
      body.replaceChildren(tokenMode ? el("div", {}, el("p", {}, "Green: model tokens (loss mask 1). Grey: prompt, tool " +
        "output and template tokens (mask 0)." + (d.tokens.decoded ? "" : " " + (d.tokens.note || "No tokenizer in the dump: ids shown."))),
        tokenView(d.tokens)) : turns);
    });
    view.append(toggle);
  } else view.append(el("p", { class: "unk" }, "no token ids in this dump (an eval without rollouts.tokens.jsonl, or agentrl.trajectory_dump.token_ids false)"));
  view.append(body);
}

// ---- before / after ----------------------------------------------------------------------------------------------
function renderCompare() {
  const view = document.getElementById("view-compare");
  const groups = [...new Set(TRAJ.map(groupKey))];
  const evalGroups = new Set(TRAJ.filter((t) => t.kind === "eval").map(groupKey));
  const [g0, g1] = beforeAfter(groups, (g) => evalGroups.has(g));
  const a = el("select", { id: "cmp-a" }, ...groups.map((g) => el("option", { value: g }, g)));
  const b = el("select", { id: "cmp-b" }, ...groups.map((g) => el("option", { value: g }, g)));
  a.value = g0; b.value = g1;
  const prompt = el("select", { id: "cmp-prompt" });
  const out = el("div", { class: "side", id: "cmp-out" });
  const side = (g, p) => {
    const rows = TRAJ.filter((t) => groupKey(t) === g && t.prompt === p);
    const graded = rows.filter((t) => t.correct != null);
    const acc = graded.length ? graded.filter((t) => t.correct).length / graded.length : null;
    const calls = rows.reduce((s, t) => s + t.tool_calls, 0) / Math.max(rows.length, 1);
    const list = el("ul", {}, ...rows.map((t) => {
      const li = el("li", {}, el("a", { href: "#t=" + encodeURIComponent(t.id) }, answer(t.correct) + ", reward " + fmt(t.reward) + ", " + t.tool_calls + " calls"));
      return li;
    }));
    return el("div", {}, el("h4", {}, g), kvTable([["samples", rows.length], ["accuracy", fmt(acc)], ["calls / traj", fmt(calls, 2)]]), list);
  };
  const update = () => {
    const inA = new Set(TRAJ.filter((t) => groupKey(t) === a.value).map((t) => t.prompt));
    const common = [...new Set(TRAJ.filter((t) => groupKey(t) === b.value && inA.has(t.prompt)).map((t) => t.prompt))];
    const keep = prompt.value;
    prompt.replaceChildren(...common.map((p) => el("option", { value: p }, p)));
    if (common.includes(keep)) prompt.value = keep;
    out.replaceChildren(...(common.length ? [side(a.value, prompt.value), side(b.value, prompt.value)] : [el("p", {}, "no prompt in both")]));
  };
  a.addEventListener("change", update); b.addEventListener("change", update); prompt.addEventListener("change", update);
  view.replaceChildren(el("p", {}, "The same prompt in two runs or steps (eval before vs after RL, or two training steps)."),
    el("label", {}, "before ", a), " ", el("label", {}, "after ", b), " ", el("label", {}, "prompt ", prompt), out);
  update();
}

// ---- routing -----------------------------------------------------------------------------------------------------
function show(name) {
  document.querySelectorAll(".view").forEach((v) => v.classList.toggle("active", v.id === "view-" + name));
  document.querySelectorAll("#tabs button").forEach((b) => b.classList.toggle("active", b.dataset.view === name));
}
function route() {
  const h = decodeURIComponent(location.hash.slice(1));
  if (h.startsWith("t=")) { show("trajectory"); renderTrajectory(h.slice(2)); }
  else show(["overview", "reasoning", "list", "compare"].includes(h) ? h : "overview");
}
document.getElementById("title").textContent = "agentrl view — " + DATA.title;
document.getElementById("notes").replaceChildren(...DATA.notes.map((n) => el("li", {}, n)));
document.querySelectorAll("#tabs button").forEach((b) => b.addEventListener("click", () => { location.hash = b.dataset.view; }));
document.querySelector("#list tbody").addEventListener("click", (e) => {
  const tr = e.target.closest("tr");
  if (tr) location.hash = "t=" + encodeURIComponent(tr.dataset.id);
});
renderOverview(); renderReasoning(); setupFilters(); renderList(); renderCompare();
window.addEventListener("hashchange", route);
route();
document.body.dataset.ready = "1";
