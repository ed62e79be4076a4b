// The AZR dashboard: renders GET /v1/stats with plotly.js and follows the run through
// GET /v1/stats/stream (server-sent events). Every chart names its axes, units and series.
"use strict";

const TYPES = ["deduction", "abduction", "induction"];
const ORIGINS = ["zero-seed", "user", "proposed"];
const COLORS = { deduction: "#2952cc", abduction: "#d9480f", induction: "#2b8a3e" };
const ORIGIN_COLORS = { "zero-seed": "#868e96", user: "#f59f00", proposed: "#4263eb" };
const CONFIG = { responsive: true, displayModeBar: false };
const REFRESH_MS = 1000;

let stats = null;
let refreshTimer = null;
let lastFetch = 0;

function layout(xTitle, yTitle, extra) {
  return Object.assign({
    margin: { l: 56, r: 16, t: 8, b: 96 },
    xaxis: { title: { text: xTitle }, automargin: true },
    yaxis: { title: { text: yTitle }, automargin: true, rangemode: "tozero" },
    // At the foot of the figure, below the x-axis title, however many rows it wraps to on a phone.
    legend: { orientation: "h", yref: "container", y: 0, yanchor: "bottom", x: 0 },
    showlegend: true,
    font: { size: 11 },
    paper_bgcolor: "rgba(0,0,0,0)",
    plot_bgcolor: "rgba(0,0,0,0)",
  }, extra || {});
}

function draw(id, traces, lay) {
  const el = document.getElementById(id);
  if (!traces.length) {
    lay.annotations = [{ text: "no data yet", showarrow: false, xref: "paper", yref: "paper", x: 0.5, y: 0.5 }];
  }
  Plotly.react(el, traces, lay, CONFIG);
}

function series(key, scale) {
  const s = stats.series;
  if (!s[key]) return null;
  const k = scale || 1;
  return { x: s.step, y: s[key].map((v) => (v === null ? null : v * k)) };
}

function lines(specs) {
  const traces = [];
  for (const spec of specs) {
    const data = series(spec.key, spec.scale);
    if (!data) continue;
    traces.push(Object.assign({
      type: "scatter", mode: "lines+markers", marker: { size: 3 }, line: { width: 1.5 },
      name: spec.name, x: data.x, y: data.y, connectgaps: false,
    }, spec.trace || {}));
  }
  return traces;
}

function perType(pattern, scale) {
  return TYPES.map((t) => ({ key: pattern.replace("<type>", t), name: t, scale, trace: { line: { color: COLORS[t], width: 1.5 }, marker: { color: COLORS[t], size: 3 } } }));
}

function renderCharts() {
  const step = "training step";
  draw("chart-buffers", ORIGINS.map((o) => ({
    type: "bar", name: o, x: TYPES, y: TYPES.map((t) => stats.buffers[t].by_origin[o]),
    marker: { color: ORIGIN_COLORS[o] },
  })), layout("task type", "tasks (count)", { barmode: "stack" }));
  draw("chart-solve", lines(perType("solve/<type>/accuracy", 100)),
    layout(step, "solve rate (%)", { yaxis: { title: { text: "solve rate (%)" }, range: [0, 100] } }));
  draw("chart-valid", lines(perType("propose/<type>/valid_rate", 100)),
    layout(step, "valid proposals (%)", { yaxis: { title: { text: "valid proposals (%)" }, range: [0, 100] } }));
  const errors = Object.entries(stats.error_classes).filter(([, n]) => n > 0);
  draw("chart-errors", errors.length ? [{
    type: "bar", name: "rejections, all steps", x: errors.map(([c]) => c), y: errors.map(([, n]) => n), marker: { color: "#b3261e" },
  }] : [], layout("error class", "rejections (count)"));
  const learn = TYPES.filter((t) => stats.learnability[t].counts.some((c) => c > 0)).map((t) => {
    const h = stats.learnability[t];
    return {
      type: "bar", name: t, marker: { color: COLORS[t] }, y: h.counts,
      x: h.counts.map((_, i) => (h.edges[i] + h.edges[i + 1]) / 2), width: 0.03,
    };
  });
  draw("chart-learnability", learn, layout("mean r_propose in a step (0–1)", "steps (count)", { barmode: "group" }));
  draw("chart-complexity", lines(perType("propose/<type>/complexity_mean")), layout(step, "program size (AST nodes)"));
  const div = TYPES.filter((t) => stats.buffers[t].diversity !== null);
  draw("chart-diversity", div.length ? [{
    type: "bar", name: "distinct programs / tasks seen", x: div, marker: { color: div.map((t) => COLORS[t]) },
    y: div.map((t) => stats.buffers[t].diversity * 100),
    text: div.map((t) => `${stats.buffers[t].distinct_programs} distinct`), textposition: "auto",
  }] : [], layout("task type", "distinct programs (%)", { yaxis: { title: { text: "distinct programs (%)" }, range: [0, 100] } }));
  draw("chart-reward", lines([
    ...perType("propose/<type>/reward_mean").map((s) => Object.assign(s, { name: `propose ${s.name}`, trace: Object.assign(s.trace, { line: { color: COLORS[s.name], dash: "dot", width: 1.5 } }) })),
    ...perType("solve/<type>/reward_mean").map((s) => Object.assign(s, { name: `solve ${s.name}` })),
  ]), layout(step, "mean reward", { yaxis: { title: { text: "mean reward" } } }));
  draw("chart-kl", lines([
    { key: "train/kl", name: "KL to reference (nats)" },
    { key: "train/entropy", name: "entropy (nats/token)", trace: { yaxis: "y2" } },
    // Drawn only when the run imitates demonstrations (selfplay.demonstrations > 0).
    { key: "train/imitation_nll", name: "imitation NLL (nats/token)", trace: { yaxis: "y2", line: { dash: "dot", width: 1.5 } } },
  ]), layout(step, "KL (nats)", { yaxis2: { title: { text: "nats/token" }, overlaying: "y", side: "right", rangemode: "tozero" }, margin: { l: 56, r: 56, t: 8, b: 96 } }));
  draw("chart-length", lines([{ key: "response/length_mean", name: "mean response length" }]), layout(step, "length (tokens)"));
  draw("chart-throughput", lines([{ key: "perf/tokens_per_s", name: "generated tokens per second" }]), layout(step, "throughput (tokens/s)"));
  draw("chart-step-time", lines([
    { key: "perf/generate_s", name: "generate", trace: { stackgroup: "t" } },
    { key: "perf/execute_s", name: "execute", trace: { stackgroup: "t" } },
    { key: "perf/train_s", name: "train", trace: { stackgroup: "t" } },
    { key: "perf/publish_s", name: "publish", trace: { stackgroup: "t" } },
  ]), layout(step, "time (s)"));
  draw("chart-policy", lines([
    { key: "policy_version", name: "policy version" },
    { key: "batch/staleness_max", name: "max staleness (versions)", trace: { yaxis: "y2" } },
  ]), layout(step, "policy version", { yaxis2: { title: { text: "staleness (versions)" }, overlaying: "y", side: "right", rangemode: "tozero" }, margin: { l: 56, r: 56, t: 8, b: 96 } }));
}

function escapeHtml(text) {
  return text.replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
}

// A small Python highlighter: comments, strings, numbers, keywords and the defined function's name.
const PY_TOKEN = /(#[^\n]*)|("""[\s\S]*?"""|'''[\s\S]*?'''|"(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*')|\b(\d+(?:\.\d+)?)\b|\b(def|return|if|elif|else|for|while|in|not|and|or|is|lambda|None|True|False|import|from|as|class|try|except|finally|with|yield|break|continue|pass)\b/g;

function highlight(code) {
  let out = "";
  let last = 0;
  for (const m of code.matchAll(PY_TOKEN)) {
    out += escapeHtml(code.slice(last, m.index));
    const cls = m[1] ? "com" : m[2] ? "str" : m[3] ? "num" : "kw";
    out += `<span class="${cls}">${escapeHtml(m[0])}</span>`;
    last = m.index + m[0].length;
  }
  return out + escapeHtml(code.slice(last));
}

function renderTables() {
  const rows = stats.user_seeds.map((s) => `<tr data-task-id="${s.id}">
    <td><code title="${s.id}">${s.id.slice(0, 10)}</code></td><td>${s.type}</td><td>${s.step}</td>
    <td>${s.in_buffer ? "yes" : "evicted or removed"}</td><td>${s.use.drawn_as_reference}</td>
    <td>${s.use.drawn_for_solving}</td>
    <td>${s.use.solve_rate === null ? "–" : (s.use.solve_rate * 100).toFixed(0) + "%"}</td></tr>`);
  document.querySelector("#seeds-table tbody").innerHTML = rows.join("") ||
    '<tr><td colspan="7">no user seeds yet</td></tr>';
  document.getElementById("newest-tasks").innerHTML = stats.newest_tasks.map((t) => `<div class="task">
    <div class="meta">${t.type} · ${t.origin} · step ${t.step} · <code>${t.id.slice(0, 10)}</code></div>
    <pre class="code">${highlight(t.program)}</pre>
    <div class="meta">inputs: <code>${escapeHtml(t.inputs.slice(0, 3).join(" | "))}</code> → outputs:
      <code>${escapeHtml(t.outputs.slice(0, 3).join(" | "))}</code>${t.message ? " · " + escapeHtml(t.message) : ""}</div></div>`).join("") ||
    "<p>no tasks yet</p>";
}

function renderHeadline() {
  document.getElementById("run-id").textContent = stats.run_id;
  document.getElementById("step").textContent = stats.latest_step === null ? "–" : stats.latest_step;
  document.getElementById("policy-version").textContent = stats.policy_version;
  const stale = stats.latest["batch/staleness_max"];
  document.getElementById("staleness").textContent = stale === undefined || stale === null ? "–" : stale;
}

async function refresh() {
  lastFetch = Date.now();
  const reply = await fetch("/v1/stats", { cache: "no-store" });
  if (!reply.ok) return;
  stats = await reply.json();
  renderHeadline();
  renderCharts();
  renderTables();
  document.body.dataset.rendered = String(Number(document.body.dataset.rendered || 0) + 1);
}

function scheduleRefresh(delayMs) {
  if (refreshTimer !== null) return;
  const wait = delayMs === undefined ? Math.max(0, REFRESH_MS - (Date.now() - lastFetch)) : delayMs;
  refreshTimer = setTimeout(() => { refreshTimer = null; refresh().catch(console.error); }, wait);
}

function follow() {
  const live = document.getElementById("live");
  const source = new EventSource("/v1/stats/stream");
  source.onopen = () => { live.textContent = "connected"; live.className = "on"; };
  source.onerror = () => { live.textContent = "reconnecting"; live.className = "off"; };
  source.addEventListener("step", (event) => {
    const record = JSON.parse(event.data);
    document.getElementById("step").textContent = record.step;
    scheduleRefresh();
  });
  // Buffers also change between steps (seeds, proposals): refresh now and then without an event.
  setInterval(() => scheduleRefresh(), 10 * REFRESH_MS);
}

function seedBody(form) {
  const body = {
    type: form.type.value,
    program: form.program.value,
    inputs: form.inputs.value.split("\n").map((s) => s.trim()).filter((s) => s),
  };
  if (body.type === "induction") body.message = form.message.value;
  return body;
}

async function submitSeed(event) {
  event.preventDefault();
  const form = event.target;
  const verdict = document.getElementById("seed-verdict");
  const button = document.getElementById("seed-submit");
  const headers = { "Content-Type": "application/json" };
  const token = form.token.value.trim();
  if (token) headers.Authorization = `Bearer ${token}`;
  button.disabled = true;
  verdict.className = "";
  verdict.textContent = "validating in the executor…";
  try {
    const reply = await fetch("/v1/seeds", { method: "POST", headers, body: JSON.stringify(seedBody(form)) });
    const body = await reply.json();
    if (reply.ok) {
      const r = body.results[0];
      verdict.className = "ok";
      verdict.textContent = `${r.status === "created" ? "added" : "already present"}: task ${r.task_id}\ngold outputs: ${r.outputs.join(" | ")}`;
      scheduleRefresh(1500);
    } else {
      verdict.className = "bad";
      const cls = body.error_class ? `${body.error_class}: ` : "";
      const fields = (body.errors || []).filter((e) => e.msg).map((e) => `${e.loc.join(".")}: ${e.msg}`);
      verdict.textContent = `refused (${reply.status}) ${cls}${body.detail}${fields.length ? "\n" + fields.join("\n") : ""}`;
    }
  } catch (err) {
    verdict.className = "bad";
    verdict.textContent = `could not reach the API: ${err}`;
  } finally {
    button.disabled = false;
  }
}

function start() {
  const form = document.getElementById("seed-form");
  const toggle = () => { document.querySelector(".induction-only").hidden = form.type.value !== "induction"; };
  form.type.addEventListener("change", toggle);
  toggle();
  form.addEventListener("submit", submitSeed);
  refresh().catch(console.error);
  follow();
}

document.addEventListener("DOMContentLoaded", start);
