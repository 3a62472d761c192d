// A turn's timeline as bars on one time axis, and a conversation's tree of sub-agents.
// Plain JavaScript on the page's own helpers (h, api, convLink, badge from app.js, called
// only once the page runs): each step a row, each attempt a bar coloured by how it ended,
// waits for a slot or a person hatched, model calls as ticks. Positions are set through
// element.style, which the page's content security policy allows (no inline markup).
"use strict";

const TIMELINE_POLL_MS = 1000; // while the turn runs

const timelinePath = (cid, turn) => `${conversationPath(cid)}/turns/${encodeURIComponent(turn)}/timeline`;
const timelineHref = (cid, turn) => `#/timeline/${encodeURIComponent(cid)}/${encodeURIComponent(turn)}`;
const ms = (a, b) => new Date(b).getTime() - new Date(a).getTime();

function duration(totalMs) {
  if (totalMs < 1000) return `${Math.round(totalMs)} ms`;
  if (totalMs < 120000) return `${(totalMs / 1000).toFixed(1)} s`;
  if (totalMs < 7200000) return `${(totalMs / 60000).toFixed(1)} min`;
  return `${(totalMs / 3600000).toFixed(1)} h`;
}

/** The span the axis covers: from the turn's start to its end, or to now while it runs. */
function axisOf(drawn, nowMs) {
  const start = new Date(drawn.started_at).getTime();
  const times = [drawn.ended_at, ...drawn.steps.flatMap((s) => [s.finished_at, s.scheduled_at,
    ...s.attempts.map((a) => a.claimed_at)]), ...drawn.calls.flatMap((c) => [c.resolved_at, c.created_at]),
    ...drawn.model_calls.map((m) => m.at)].filter(Boolean).map((t) => new Date(t).getTime());
  const end = Math.max(start + 1, drawn.ended_at ? Math.max(...times) : Math.max(nowMs, ...times));
  return { start, end, at: (t) => (t ? new Date(t).getTime() : end) };
}

/** A bar on a track, from `from` to `to` (null: to the axis's end), as percents of the axis. */
function bar(axis, from, to, cls, label, title) {
  const left = ((axis.at(from) - axis.start) / (axis.end - axis.start)) * 100;
  const right = ((axis.at(to) - axis.start) / (axis.end - axis.start)) * 100;
  const node = h("span", { class: `bar ${cls}`, title, text: label || "" });
  node.style.left = `${Math.max(0, Math.min(left, 99.5))}%`;
  node.style.width = `${Math.max(0.5, right - left)}%`;
  return node;
}

function tick(axis, at, cls, title) {
  const node = h("span", { class: `tick ${cls}`, title });
  node.style.left = `${((axis.at(at) - axis.start) / (axis.end - axis.start)) * 100}%`;
  return node;
}

function row(kind, label, track, data) {
  return h("div", { class: `tl-row ${kind}`, data }, h("div", { class: "tl-label" }, label), track);
}

function stepRow(step, axis, models) {
  const track = h("div", { class: "tl-track" });
  track.append(bar(axis, step.scheduled_at, step.finished_at, "span-step", "", `${step.label}: ${step.status}`));
  for (const wait of step.waits) {
    track.append(bar(axis, wait.start, wait.end, `wait wait-${wait.kind}`, "",
      `waited for a ${wait.kind}${wait.end ? ` ${duration(ms(wait.start, wait.end))}` : ", still waiting"}`));
  }
  step.attempts.forEach((attempt, index) => {
    const next = step.attempts[index + 1];
    const until = attempt.ended_at || next?.claimed_at || (attempt.outcome === "running" ? null : step.finished_at);
    const node = bar(axis, attempt.claimed_at || step.scheduled_at, until, `attempt outcome-${attempt.outcome}`,
      `#${attempt.number} ${attempt.outcome}`,
      `attempt ${attempt.number} on ${attempt.worker || "?"}: ${attempt.outcome}${attempt.error ? ` (${attempt.error})` : ""}`);
    Object.assign(node.dataset, { number: attempt.number, outcome: attempt.outcome, worker: attempt.worker || "" });
    track.append(node);
  });
  for (const model of models.get(step.step_key) || []) {
    const usage = model.usage || {};
    track.append(tick(axis, model.at, "model-call", `model call: ${usage.input_tokens ?? "?"} in / ${usage.output_tokens ?? "?"} out tokens`
      + (model.time_to_first_token_ms != null ? `, first token after ${model.time_to_first_token_ms} ms` : "")
      + (model.cost != null ? `, cost ${model.cost}` : "")));
  }
  const took = step.finished_at ? duration(ms(step.scheduled_at, step.finished_at)) : step.status;
  const workers = [...new Set(step.attempts.map((a) => a.worker).filter(Boolean))];
  const retries = step.retries ? h("span", { class: "tag retries", text: `${step.retries} provider retr${step.retries === 1 ? "y" : "ies"}` }) : null;
  const label = [h("strong", { text: step.label }), " ", h("span", { class: "muted", text: took }), " ", retries,
    h("div", { class: "muted attempts-text", text: step.attempts.map((a) => `#${a.number} ${a.outcome} on ${a.worker || "?"}`).join(" · ")
      || (step.waits.length ? "waiting for a slot" : "not claimed yet") }),
    workers.length > 1 ? h("div", { class: "muted", text: `${workers.length} workers` }) : null];
  return row("step", label, track, { kind: step.kind, status: step.status, stepKey: step.step_key });
}

function callRow(call, axis, cid) {
  const track = h("div", { class: "tl-track" });
  track.append(bar(axis, call.created_at, call.resolved_at, `span-call call-${call.executor}`, "", `${call.name}: ${call.status}`));
  for (const wait of call.waits) {
    track.append(bar(axis, wait.start, wait.end, `wait wait-${wait.kind}`, "waiting for a person",
      `waited for a person${wait.end ? ` ${duration(ms(wait.start, wait.end))}` : ", still waiting"}`));
  }
  const child = call.child_conversation_id;
  const label = [h("strong", { class: "call-name", text: call.name }), " ",
    h("span", { class: "tag", text: call.executor }), call.needs_approval ? h("span", { class: "tag gate", text: "needs approval" }) : null,
    h("span", { class: `tag result-${call.status}`, text: call.status }),
    call.resolved_at ? h("span", { class: "muted", text: ` ${duration(ms(call.created_at, call.resolved_at))}` }) : null,
    child ? h("div", { class: "child" }, `sub-agent ${call.child_agent || ""} `, call.child_state ? badge(call.child_state) : null, " ",
      h("a", { class: "child-timeline", href: timelineHref(child, "last"), text: "its timeline" }), " · ", convLink(child)) : null];
  return row("call", label, track, { executor: call.executor, status: call.status, callId: call.tool_call_id, child: child || "", cid });
}

function marksRow(drawn, axis) {
  const track = h("div", { class: "tl-track" });
  for (const mark of drawn.marks) {
    const node = tick(axis, mark.at, `mark mark-${mark.type}`, `#${mark.seq} ${mark.type}: ${JSON.stringify(mark.content).slice(0, 200)}`);
    node.dataset.type = mark.type;
    track.append(node);
  }
  return row("marks", h("span", { class: "muted", text: drawn.marks.map((m) => m.type).join(", ") || "no other events" }), track);
}

function axisRow(axis) {
  const track = h("div", { class: "tl-track tl-axis" });
  for (let i = 0; i <= 4; i += 1) {
    const at = h("span", { class: "axis-label", text: `+${duration(((axis.end - axis.start) * i) / 4)}` });
    at.style.left = `${i * 25}%`;
    track.append(at);
  }
  return row("axis", "", track);
}

/** The whole chart of one turn: the axis, each step, each call, the other events. */
function drawTimeline(drawn, nowMs, cid) {
  const axis = axisOf(drawn, nowMs);
  const models = new Map();
  for (const model of drawn.model_calls) {
    if (!models.has(model.step_key)) models.set(model.step_key, []);
    models.get(model.step_key).push(model);
  }
  return h("div", { class: "tl-chart" }, axisRow(axis),
    drawn.steps.map((step) => stepRow(step, axis, models)),
    drawn.calls.map((call) => callRow(call, axis, cid)),
    drawn.marks.length ? marksRow(drawn, axis) : null);
}

function legend() {
  return h("p", { class: "tl-legend muted" }, ["done", "retried", "died", "released", "given_up", "running"]
    .map((o) => h("span", { class: `bar-key outcome-${o}`, text: o.replace("_", " ") })),
  h("span", { class: "bar-key wait", text: "waiting" }), h("span", { class: "bar-key model-call", text: "model call" }));
}

async function timelineView(main, view) {
  const [cid = "", asked = "last"] = location.hash.split("/").slice(2).map(decodeURIComponent);
  const status = h("span", { id: "timeline-status", class: "muted" });
  const chart = h("div", { id: "timeline" });
  const title = h("code", { text: asked });
  main.append(h("h2", {}, "Turn ", title),
    h("p", { class: "toolbar" }, "In ", convLink(cid), " · ",
      h("a", { href: `#/tree/${encodeURIComponent(cid)}`, text: "tree of agents" }), " · ", status),
    legend(), chart);
  const turn = asked === "last" ? (await api("GET", conversationPath(cid), undefined, view.signal)).turn_id : asked;
  if (!turn) { chart.replaceChildren(h("p", { class: "empty", text: "No turn yet." })); return; }
  title.textContent = turn;
  let timer = null;
  const load = async () => {
    const drawn = await api("GET", timelinePath(cid, turn), undefined, view.signal);
    chart.replaceChildren(drawTimeline(drawn, Date.now(), cid));
    const steps = `${drawn.steps.length} step(s), ${drawn.model_calls.length} model call(s)`;
    status.textContent = drawn.ended_at ? `${steps} · took ${duration(ms(drawn.started_at, drawn.ended_at))}` : `${steps} · running`;
    chart.dataset.state = drawn.ended_at ? "ended" : "running";
    if (drawn.ended_at && timer) { clearInterval(timer); timer = null; }
    return drawn;
  };
  const first = await load();
  if (!first.ended_at) { // live: read it again until the turn ends
    timer = setInterval(() => load().catch(report), TIMELINE_POLL_MS);
    view.signal.addEventListener("abort", () => clearInterval(timer));
  }
}

async function treeView(main, view, cid) {
  const list = h("ul", { id: "tree", class: "tree" });
  main.append(h("h2", {}, "Tree of agents under ", convLink(cid)), list);
  const load = async () => {
    const tree = await api("GET", `${conversationPath(cid)}/tree`, undefined, view.signal);
    const items = new Map();
    for (const node of tree.nodes) {
      const children = h("ul");
      const item = h("li", { class: "tree-node", data: { id: node.id, depth: node.depth, state: node.state } },
        badge(node.state), " ", node.agent ? h("strong", { text: node.agent }) : h("span", { class: "muted", text: "no agent" }), " ",
        convLink(node.id), " ",
        h("span", { class: "tokens muted", text: `${node.input_tokens} in / ${node.output_tokens} out tokens · ${node.model_calls} model call(s)`
          + (node.cost != null ? ` · cost ${node.cost}` : "") }), " ",
        h("a", { class: "timeline-link", href: timelineHref(node.id, "last"), text: "last turn's timeline" }), children);
      items.set(node.id, children);
      (items.get(node.parent_conversation_id) || list).append(item);
    }
  };
  list.replaceChildren();
  await load();
  view.every(REFRESH_MS, async () => { list.replaceChildren(); await load(); });
}
