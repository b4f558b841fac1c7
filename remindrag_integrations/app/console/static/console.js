// The ReMindRAG console's pages: each fills its sections from the JSON API (server.py).
"use strict";

const $ = (sel) => document.querySelector(sel);
const esc = (s) =>
  String(s ?? "").replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);

async function api(path, body) {
  const opts = body === undefined ? {} : {
    method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body),
  };
  const r = await fetch(path, opts);
  const data = await r.json();
  if (!r.ok) throw new Error(`${data.error}: ${data.message}`);
  return data;
}

function say(el, text, bad) {
  el.innerHTML = `<p class="${bad ? "bad" : "ok"}">${esc(text)}</p>`;
}

function table(el, head, rows) {
  el.innerHTML = `<tr>${head.map((h) => `<th>${esc(h)}</th>`).join("")}</tr>` +
    rows.map((r) => `<tr>${r.map((c) => `<td>${c}</td>`).join("")}</tr>`).join("");
}

// --- overview ------------------------------------------------------------------------------
function plot(series, key, colour, height, width, max) {
  if (!series.length) return "";
  const step = series.length > 1 ? (width - 60) / (series.length - 1) : 0;
  const xy = series.map((p, i) => [30 + i * step, height - 24 - (p[key] / (max || 1)) * (height - 54)]);
  return `<polyline fill="none" stroke="${colour}" stroke-width="2" points="${xy.map((p) => p.join(",")).join(" ")}"/>` +
    xy.map(([x, y]) => `<circle cx="${x}" cy="${y}" r="3" fill="${colour}"/>`).join("");
}

async function overview() {
  const o = await api("/api/overview");
  const c = o.counts;
  const card = (label, value) => `<div class="card"><b>${esc(value)}</b><span>${esc(label)}</span></div>`;
  $("#counts").innerHTML = card("documents", c.documents) + card("chunks", c.chunks) +
    card("entities", c.entities ?? 0) + card("edges", c.edges ?? 0) +
    card("remembered edges", o.remembered_edges) +
    card("memory size", `${(o.memory_bytes / 1024).toFixed(1)} KiB`);
  const s = o.series;
  const tokMax = Math.max(1, ...s.map((p) => Math.max(p.tokens_spent, p.tokens_saved)));
  const decMax = Math.max(1, ...s.map((p) => Math.max(p.decisions, p.replayed)));
  const w = 760, h = 240;
  $("#plot").innerHTML = s.length
    ? `<svg id="plotsvg" width="${w}" height="${h}" class="plot">
      <line x1="30" y1="${h - 24}" x2="${w - 10}" y2="${h - 24}" stroke="#999"/>
      ${plot(s, "replay_share", "#2a7", h, w, 1)}
      ${plot(s, "decisions", "#a6c", h, w, decMax)}
      ${plot(s, "tokens_spent", "#c33", h, w, tokMax)}
      ${plot(s, "tokens_saved", "#36c", h, w, tokMax)}
      <text x="30" y="14" fill="#2a7">replay share (0-1)</text>
      <text x="170" y="14" fill="#a6c">walk decisions (max ${decMax})</text>
      <text x="360" y="14" fill="#c33">traversal tokens spent</text>
      <text x="540" y="14" fill="#36c">saved (est.; max ${tokMax})</text>
      <text x="30" y="${h - 6}" fill="#666">oldest query</text>
      <text x="${w - 70}" y="${h - 6}" fill="#666">newest</text></svg>`
    : "<p>No queries yet.</p>";
  $("#plot-note").textContent = `${s.length} saved queries. Saved tokens are estimated: replayed ` +
    `edges x ${o.tokens_per_decision.toFixed(0)} tokens per LLM traversal decision seen here. ` +
    `Action log kept in ${o.log_kept_in}.`;
  table($("#writes"), ["when", "who", "what", "result"], o.recent_writes.map((a) => [
    esc(a.at), esc(a.who), esc(a.what), `<code>${esc(JSON.stringify(a.result).slice(0, 120))}</code>`]));
  table($("#shaped"), ["query", "enhanced", "penalised"], o.memorized_traces.map((t) => [
    `<a href="/queries/${encodeURIComponent(t.trace_id)}">${esc(t.query)}</a>`, t.enhanced, t.penalised]));
}

// --- graph ---------------------------------------------------------------------------------
let cy = null;
function graphPage() {
  cy = cytoscape({
    container: $("#cy"),
    style: [
      { selector: "node", style: { label: "data(label)", "font-size": 9, "background-color": "#89a", width: 14, height: 14, "text-wrap": "ellipsis", "text-max-width": 120 } },
      { selector: "node[kind='chunk']", style: { shape: "round-rectangle", "background-color": "#d95" } },
      { selector: "node[kind='anchor']", style: { shape: "diamond", "background-color": "#bbb" } },
      { selector: "node.open", style: { "border-width": 2, "border-color": "#333" } },
      { selector: "edge", style: { width: "mapData(strength, 0, 1, 1, 9)", "line-color": "#ccc", "curve-style": "bezier" } },
      { selector: "edge[strength > 0]", style: { "line-color": "#2a7" } },
      { selector: "edge:selected", style: { "line-color": "#c33" } },
    ],
    layout: { name: "grid" },
  });
  cy.on("tap", "node", (ev) => openNode(ev.target.id()));
  cy.on("tap", "edge", (ev) => showEdge(ev.target.id()));
  $("#gsearch").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    try {
      const hits = await api(`/api/graph/search?q=${encodeURIComponent($("#gq").value)}&kind=${$("#gkind").value}`);
      $("#ghits").innerHTML = hits.map((h) =>
        `<button class="hit" data-id="${esc(h.id)}">${esc(h.name)} <small>${esc(h.kind)}</small></button>`).join("");
      document.querySelectorAll("#ghits .hit").forEach((b) => b.addEventListener("click", () => openNode(b.dataset.id)));
    } catch (e) { say($("#ghits"), e.message, true); }
  });
  const start = new URLSearchParams(location.search).get("node");
  if (start) openNode(start);
}

async function openNode(id) {
  const n = await api(`/api/graph/node/${encodeURIComponent(id)}`);
  const add = [];
  for (const x of n.nodes) if (!cy.getElementById(x.id).length) add.push({ group: "nodes", data: { id: x.id, label: x.name, kind: x.kind } });
  for (const e of n.edges) if (!cy.getElementById(e.id).length) add.push({ group: "edges", data: { id: e.id, source: e.source, target: e.target, strength: e.strength, kind: e.kind } });
  cy.add(add);
  cy.getElementById(id).addClass("open");
  cy.layout({ name: "cose", animate: false, randomize: false, nodeDimensionsIncludeLabels: true }).run();
  $("#gside").innerHTML = `<h3>${esc(n.node.name)}</h3><p>${esc(n.node.kind)}, ${n.degree} edges ` +
    `(${n.edges.length} shown, the strongest memory first)</p>`;
}

async function showEdge(id) {
  const e = await api(`/api/edges/${encodeURIComponent(id)}`);
  $("#gside").innerHTML = `<h3>${esc(e.u_name)} — ${esc(e.v_name)}</h3><p>${esc(e.kind)}: ${esc(e.text)}</p>` +
    `<p>memory strength <b id="estrength">${e.strength}</b></p>` +
    (e.strength > 0 ? `<button id="eforget">Forget this edge's memory</button>` : "") + `<div id="eout"></div>`;
  const b = $("#eforget");
  if (b) b.addEventListener("click", async () => {
    try {
      const a = await api(`/api/edges/${encodeURIComponent(id)}/forget`, {});
      cy.getElementById(id).data("strength", 0);
      $("#estrength").textContent = "0";
      $("#eout").innerHTML = `<p class="ok">forgotten (action ${esc(a.id)})</p>` +
        `<button id="eundo">Undo</button>`;
      $("#eundo").addEventListener("click", async () => {
        await api(`/api/actions/${encodeURIComponent(a.id)}/undo`, {});
        showEdge(id);
      });
    } catch (err) { say($("#eout"), err.message, true); }
  });
}

// --- queries -------------------------------------------------------------------------------
async function queries() {
  const ts = await api("/api/traces?limit=50");
  table($("#traces"), ["question", "walker", "replayed", "moves", "passages", "tokens", "memory"], ts.map((t) => [
    `<a href="#" class="topen" data-id="${esc(t.trace_id)}">${esc(t.query)}</a>`, esc(t.walker), t.replayed, t.moves,
    t.passages, t.tokens,
    t.abstained ? "abstained" : t.memorized ? `+${t.enhanced} / -${t.penalised}` : esc(t.memory_note || "not written")]));
  document.querySelectorAll(".topen").forEach((a) => a.addEventListener("click", (ev) => { ev.preventDefault(); traceDetail(a.dataset.id); }));
}

async function traceDetail(id) {
  const t = await api(`/api/traces/${encodeURIComponent(id)}`);
  const mem = t.memory_result;
  $("#tdetail").innerHTML = `<h2>${esc(t.query)}</h2>
    <p>walker: ${esc(t.walker)}; ${t.replayed} replayed edges, ${t.moves.length} moves, stop: ${esc(t.stop_reason)};
    <a href="/queries/${encodeURIComponent(id)}">the trace page</a></p>
    <p>seeds: ${t.seeds.map((s) => `<a href="/graph?node=${encodeURIComponent(s.id)}">${esc(s.name)}</a>`).join(", ")}</p>
    <h3>Walk</h3><ol>${t.moves.map((m) => `<li>${esc(m.action)} ${esc(m.from ?? "")} → ${esc(m.to ?? "")} ${esc(m.note)}</li>`).join("")}</ol>
    <h3>Passages</h3><ol>${t.passages.map((p) => `<li><code>${esc(p.chunk)}</code> ${esc(p.text.slice(0, 200))}
       <small>${esc(JSON.stringify(p.evidence))}</small></li>`).join("")}</ol>
    <h3>Memory</h3><p>${mem ? (mem.applied ? `enhanced ${mem.enhanced.length}, penalised ${mem.penalised.length}` : `not written: ${esc(mem.skipped_reason)}`) : "not memorized"}</p>
    <p><button data-h="1" class="fb">Confirm (helpful)</button> <button data-h="0" class="fb">Penalise</button>
    <button id="tforget">Forget what it wrote</button></p><div id="tout"></div>`;
  document.querySelectorAll(".fb").forEach((b) => b.addEventListener("click", async () => {
    try { const a = await api(`/api/traces/${encodeURIComponent(id)}/feedback`, { helpful: b.dataset.h === "1" }); say($("#tout"), `${a.what}: ${JSON.stringify(a.result)}`); }
    catch (e) { say($("#tout"), e.message, true); }
  }));
  $("#tforget").addEventListener("click", async () => {
    try { const a = await api(`/api/traces/${encodeURIComponent(id)}/forget`, {}); say($("#tout"), `forgot ${a.result.forgot.length} edges (undo on the Correct page)`); }
    catch (e) { say($("#tout"), e.message, true); }
  });
}

// --- correct -------------------------------------------------------------------------------
const picked = new Set();
async function actions() {
  const as = await api("/api/actions");
  table($("#actions"), ["when", "who", "what", "arguments", "result", ""], as.map((a) => [
    esc(a.at), esc(a.who), esc(a.what), `<code>${esc(JSON.stringify(a.args).slice(0, 100))}</code>`,
    `<code>${esc(JSON.stringify(a.result).slice(0, 100))}</code>`,
    a.undone ? `undone ${esc(a.undone.at)}` : a.undoable ? `<button class="undo" data-id="${esc(a.id)}">Undo</button>` : ""]));
  document.querySelectorAll(".undo").forEach((b) => b.addEventListener("click", async () => {
    await api(`/api/actions/${encodeURIComponent(b.dataset.id)}/undo`, {});
    actions();
  }));
}

function correct() {
  $("#ask").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    try {
      const r = await api("/api/ask", { question: $("#askq").value });
      $("#askout").innerHTML = `<p class="answer">${esc(r.abstained ? "(no passage relevant enough: no answer)" : r.answer)}</p>
        <p>${r.replayed_edges} replayed edges, ${r.moves} moves; trace <a href="/queries/${encodeURIComponent(r.trace_id)}">${esc(r.trace_id)}</a></p>
        <ol>${r.passages.map((p) => `<li>${r.citations.includes(p.chunk) ? "<b>cited</b> " : ""}<code>${esc(p.chunk)}</code> (${p.score}) ${esc(p.text.slice(0, 200))}</li>`).join("")}</ol>`;
    } catch (e) { say($("#askout"), e.message, true); }
  });
  $("#teachfind").addEventListener("click", async () => {
    try {
      const hits = await api(`/api/graph/search?kind=passage&q=${encodeURIComponent($("#teachs").value)}`);
      $("#teachhits").innerHTML = hits.map((h) => `<label class="pick"><input type="checkbox" value="${esc(h.id)}">
        <code>${esc(h.id)}</code> ${esc((h.text || h.name).slice(0, 160))}</label>`).join("");
      document.querySelectorAll("#teachhits input").forEach((c) => c.addEventListener("change", () => {
        if (c.checked) picked.add(c.value); else picked.delete(c.value);
      }));
    } catch (e) { say($("#teachhits"), e.message, true); }
  });
  $("#teachgo").addEventListener("click", async () => {
    try {
      const a = await api("/api/teach", { question: $("#teachq").value, chunk_ids: [...picked] });
      say($("#teachout"), `taught: ${a.result.summary}`);
      actions();
    } catch (e) { say($("#teachout"), e.message, true); }
  });
  $("#forget").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const id = $("#forgetid").value.trim();
    const path = id.startsWith("k-") ? `/api/edges/${encodeURIComponent(id)}/forget` : `/api/traces/${encodeURIComponent(id)}/forget`;
    try { const a = await api(path, {}); say($("#forgetout"), `${a.what}: ${a.result.edges_changed} edges changed`); actions(); }
    catch (e) { say($("#forgetout"), e.message, true); }
  });
  actions();
}

// --- documents -----------------------------------------------------------------------------
async function docs() {
  const d = await api(`/api/documents?q=${encodeURIComponent($("#dq").value)}`);
  table($("#docs"), ["document", "chunks", ""], d.documents.map((x) => [
    `<code>${esc(x.id)}</code>`, x.chunks,
    `<button class="ddel" data-id="${esc(x.id)}">Delete</button> <button class="dre" data-id="${esc(x.id)}">Re-index</button>`]));
  document.querySelectorAll(".ddel").forEach((b) => b.addEventListener("click", async () => {
    if (!confirm(`Delete ${b.dataset.id}? (undo on the Correct page)`)) return;
    await api("/api/documents/delete", { doc_id: b.dataset.id });
    docs();
  }));
  document.querySelectorAll(".dre").forEach((b) => b.addEventListener("click", () => reindex(b.dataset.id)));
}

async function reindex(path) {
  try {
    let job = await api("/api/documents/reindex", { path });
    const el = document.createElement("p");
    $("#jobs").prepend(el);
    while (job.state === "running") {
      el.innerHTML = `${esc(job.what)}: <progress max="${job.total || 1}" value="${job.done}"></progress> ${job.done}/${job.total}`;
      await new Promise((r) => setTimeout(r, 500));
      job = await api(`/api/jobs/${job.id}`);
    }
    el.innerHTML = `${esc(job.what)}: ${esc(job.state)} ${esc(job.error || JSON.stringify(job.result))}`;
    docs();
  } catch (e) { say($("#jobs"), e.message, true); }
}

function documentsPage() {
  $("#dsearch").addEventListener("submit", (ev) => { ev.preventDefault(); docs(); });
  $("#reindex").addEventListener("submit", (ev) => { ev.preventDefault(); reindex($("#rpath").value); });
  docs();
}

const pages = {
  overview, graph: graphPage, correct, documents: documentsPage,
  queries: () => { queries(); setInterval(queries, 5000); },
};
pages[document.body.dataset.page]?.();
