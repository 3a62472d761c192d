// The agentq page: conversations, one conversation live, approvals, failures.
// Plain JavaScript, no build step. Every call goes to /v1 with the key kept in
// sessionStorage; every piece of data reaches the DOM through textContent, never as markup.
"use strict";

const KEY = "agentq.key";
const USER = "agentq.user";
const ROOT = new URL("..", location.href).pathname; // the app's root: /ui/ lives under it
const STATES = ["idle", "running", "awaiting_input", "failed", "ended"];
const REFRESH_MS = 5000;

// -- building the DOM -------------------------------------------------------------------

/** An element; props set class, text, data-*, handlers (on…) and attributes; children are nodes or text. */
function h(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(props)) {
    if (value === undefined || value === null || value === false) continue;
    if (name === "class") node.className = value;
    else if (name === "text") node.textContent = value;
    else if (name === "data") Object.assign(node.dataset, value);
    else if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else node.setAttribute(name, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === undefined || child === null || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

const json = (value) => JSON.stringify(value, null, 2);
const when = (ts) => (ts ? new Date(ts).toLocaleString() : "");
const badge = (state) => h("span", { class: `state state-${state}`, text: state.replace("_", " ") });
const convLink = (id) => h("a", { class: "conversation-link", href: `#/conversation/${encodeURIComponent(id)}`, text: id });

function flash(message) {
  const box = document.getElementById("flash");
  box.textContent = message || "";
  box.hidden = !message;
}

// -- the API ----------------------------------------------------------------------------

class ApiError extends Error {
  constructor(status, error) {
    super(error?.message || `HTTP ${status}`);
    this.status = status;
    this.code = error?.code;
    this.details = error?.details;
  }
}

function authHeaders() {
  const headers = { Authorization: `Bearer ${sessionStorage.getItem(KEY) || ""}` };
  const user = sessionStorage.getItem(USER);
  if (user) headers["X-Agentq-User"] = user;
  return headers;
}

/** One API call; a refused key sends the person back to the sign-in form. */
async function api(method, path, body, signal) {
  const headers = authHeaders();
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(ROOT + path, {
    method, headers, signal, body: body === undefined ? undefined : JSON.stringify(body),
  });
  const data = (response.headers.get("Content-Type") || "").includes("json") ? await response.json() : null;
  if (response.status === 401) signOut("The API refused this key: " + (data?.error?.message || "unauthorized"));
  if (!response.ok) throw new ApiError(response.status, data?.error);
  return data;
}

const conversationPath = (id) => `v1/conversations/${encodeURIComponent(id)}`;

// -- signing in -------------------------------------------------------------------------

function signOut(reason) {
  sessionStorage.removeItem(KEY);
  sessionStorage.removeItem(OPERATOR);
  current?.stop();
  current = null;
  showLogin(reason);
}

function showLogin(reason) {
  document.getElementById("login").hidden = false;
  document.getElementById("main").replaceChildren();
  for (const id of ["nav", "forget", "who"]) document.getElementById(id).hidden = true;
  document.getElementById("login-error").textContent = reason || "";
  document.getElementById("key").focus();
}

async function signIn(event) {
  event.preventDefault();
  const key = document.getElementById("key").value.trim();
  const user = document.getElementById("user").value.trim();
  sessionStorage.setItem(KEY, key);
  if (user) sessionStorage.setItem(USER, user); else sessionStorage.removeItem(USER);
  try {
    const operator = await isOperatorKey(); // overview.js: the operator's key reads no tenant's pages
    if (operator) sessionStorage.setItem(OPERATOR, "1"); else sessionStorage.removeItem(OPERATOR);
    if (!operator) await api("GET", "v1/conversations?limit=1");
  } catch (error) {
    if (error.status !== 401) document.getElementById("login-error").textContent = error.message;
    return;
  }
  document.getElementById("key").value = "";
  route();
}

// -- views ------------------------------------------------------------------------------

/** A view's lifetime: leaving it aborts its requests, streams and timers. */
class View {
  constructor() {
    this.aborter = new AbortController();
    this.signal = this.aborter.signal;
  }
  every(ms, task) {
    const timer = setInterval(() => task().catch(report), ms);
    this.signal.addEventListener("abort", () => clearInterval(timer));
  }
  stop() { this.aborter.abort(); }
}

let current = null;

function report(error) {
  if (error?.name === "AbortError" || error?.status === 401) return;
  flash(error?.message || String(error));
}

function route() {
  if (!sessionStorage.getItem(KEY)) return showLogin();
  document.getElementById("login").hidden = true;
  for (const id of ["nav", "forget"]) document.getElementById(id).hidden = false;
  const who = document.getElementById("who");
  who.hidden = !sessionStorage.getItem(USER);
  who.textContent = sessionStorage.getItem(USER) ? `acting as ${sessionStorage.getItem(USER)}` : "";
  current?.stop();
  current = new View();
  flash("");
  const operator = Boolean(sessionStorage.getItem(OPERATOR));
  operatorNav(operator);
  let [, name = "conversations", arg = ""] = location.hash.split("/");
  if (operator && name !== "timeline") name = "overview"; // the operator's key reads no tenant's pages
  for (const link of document.querySelectorAll("#nav a")) {
    link.classList.toggle("current", link.getAttribute("href") === `#/${name}`);
  }
  const main = document.getElementById("main");
  main.replaceChildren();
  const views = { conversations: conversationsView, conversation: conversationView, approvals: approvalsView, failed: failedView,
    timeline: timelineView, tree: treeView, schedules: schedulesView, overview: overviewView }; // timeline.js, overview.js
  (views[name] || conversationsView)(main, current, decodeURIComponent(arg)).catch(report);
}

/** Keep one row per key in `list`: new items are built, gone ones removed, the rest kept as typed
 * in, unless `update` returns a row to put in their place. */
function syncRows(list, items, keyOf, build, update) {
  const wanted = new Map(items.map((item) => [keyOf(item), item]));
  for (const row of [...list.children]) {
    if (!wanted.has(row.dataset.key)) row.remove();
  }
  const have = new Map([...list.children].map((row) => [row.dataset.key, row]));
  for (const [key, item] of wanted) {
    let row = have.get(key);
    if (!row) {
      row = build(item);
      row.dataset.key = key;
    } else if (update) {
      const fresh = update(row, item);
      if (fresh) {
        fresh.dataset.key = key;
        row.replaceWith(fresh);
        row = fresh;
      }
    }
    list.append(row); // also puts kept rows in the answer's order
  }
}

// (a) conversations, filterable by state

async function conversationsView(main, view, filter) {
  const status = STATES.includes(filter) ? filter : "";
  const select = h("select", { id: "status-filter", onchange: () => { location.hash = `#/conversations/${select.value}`; } },
    h("option", { value: "", text: "every state" }),
    STATES.map((s) => h("option", { value: s, text: s.replace("_", " "), selected: s === status })));
  const rows = h("tbody", { id: "conversations" });
  const more = h("button", { type: "button", hidden: true, text: "More" });
  const create = h("button", { type: "button", text: "New conversation", onclick: async () => {
    const made = await api("POST", "v1/conversations", {}).catch(report);
    if (made) location.hash = `#/conversation/${encodeURIComponent(made.id)}`;
  } });
  main.append(
    h("h2", { text: "Conversations" }),
    h("div", { class: "toolbar" }, h("label", {}, "State ", select), create),
    h("table", {}, h("thead", {}, h("tr", {}, ["Title", "State", "Acting for", "Events", "Last activity", "Conversation"]
      .map((t) => h("th", { text: t })))), rows),
    more,
  );
  const sig = (c) => `${c.state}/${c.last_seq}/${c.acting_user}`;
  const row = (c) => h("tr", { data: { sig: sig(c) } },
    h("td", {}, h("a", { class: "title-link", href: `#/conversation/${encodeURIComponent(c.id)}`,
      text: c.title || "(no message yet)" })),
    h("td", {}, badge(c.state)), h("td", { class: "acting-user", text: c.acting_user || "" }),
    h("td", { text: c.last_seq }), h("td", { text: when(c.updated_at) }), h("td", {}, convLink(c.id)));
  let shown = 50;
  const load = async () => {
    const found = [];
    let cursor = null;
    do { // the first `shown`, oldest first, in pages of at most 200 (the API's largest)
      const query = new URLSearchParams({ limit: String(Math.min(200, shown - found.length)) });
      if (status) query.set("status", status);
      if (cursor) query.set("cursor", cursor);
      const page = await api("GET", `v1/conversations?${query}`, undefined, view.signal);
      found.push(...page.conversations);
      cursor = page.next_cursor;
    } while (cursor && found.length < shown);
    // a row is rebuilt only when it changed, so a click never lands on a row being replaced
    syncRows(rows, found, (c) => c.id, row, (old, item) => (old.dataset.sig === sig(item) ? null : row(item)));
    if (!found.length) rows.replaceChildren(h("tr", {}, h("td", { colspan: 6, class: "empty", text: "No conversations." })));
    more.hidden = !cursor;
  };
  more.onclick = () => { shown += 50; load().catch(report); };
  await load();
  view.every(REFRESH_MS, load);
}

// (c) pending approvals across conversations

async function approvalsView(main, view) {
  const list = h("div", { id: "approvals", class: "cards" });
  const empty = h("p", { class: "empty", text: "Nothing waits on a person." });
  const othersList = h("ul", { id: "others-decide", class: "others" });
  const others = h("section", { hidden: true }, h("h3", { text: "Waiting on others" }), othersList);
  main.append(h("h2", { text: "Waiting on a person" }), helpText(), list, empty, others);
  const load = async () => {
    const calls = [];
    let cursor = null;
    do { // every page: a person's queue is short, and a partial queue would hide work
      const query = new URLSearchParams({ status: "pending", limit: "200" });
      if (cursor) query.set("cursor", cursor);
      const page = await api("GET", `v1/tool-calls?${query}`, undefined, view.signal);
      calls.push(...page.tool_calls.filter(waitsOnAPerson));
      cursor = page.next_cursor;
    } while (cursor);
    const mine = calls.filter((c) => c.may_decide !== false); // the rest: only others may decide
    const theirs = calls.filter((c) => c.may_decide === false);
    syncRows(list, mine, (c) => `${c.conversation_id}/${c.tool_call_id}`,
      (call) => approvalCard(call, view, () => load().catch(report)));
    othersList.replaceChildren(...theirs.map((c) => h("li", { data: { callId: c.tool_call_id } },
      h("span", { class: "call-name", text: c.name }), " in ", convLink(c.conversation_id),
      h("span", { class: "muted", text: ` · ${whoDecides(c)}` }))));
    others.hidden = theirs.length === 0;
    empty.hidden = mine.length > 0;
  };
  await load();
  view.every(REFRESH_MS, load);
}

/** Calls a person answers: human and client calls, server calls that wait for approval and
 * tool servers' questions (not a sub-agent's call: its child conversation answers it). */
const waitsOnAPerson = (call) =>
  call.executor === "human" || call.executor === "client" || call.needs_approval || call.elicitation
  || call.outcome_unknown;

/** Who may decide a call this key or user may not. */
const whoDecides = (call) => `only ${call.deciders?.description || "someone else"} may decide it`;

/** An approval card: everything a person needs to decide, without a click (the context is
 * read once: the log it comes from never changes). */
function approvalCard(call, view, done) {
  const context = h("div", { class: "context" }, h("p", { class: "muted", text: "loading the context…" }));
  const card = h("article", { class: "approval card" },
    h("header", { class: "card-head" },
      h("h3", { class: "title", text: "…" }),
      h("p", { class: "muted" }, "In ", convLink(call.conversation_id), ` · waiting since ${when(call.created_at)}`)),
    context, pendingCall(call.conversation_id, call, done));
  const path = `${conversationPath(call.conversation_id)}/tool-calls/${encodeURIComponent(call.tool_call_id)}/context`;
  api("GET", path, undefined, view.signal).then((found) => {
    card.querySelector(".title").textContent = found.conversation.title || call.conversation_id;
    context.replaceChildren(...callContext(found, call));
  }).catch((error) => { context.replaceChildren(h("p", { class: "problem", text: error.message })); });
  return card;
}

/** Who asked what, what the model said, what the tool does, and what the turn did before. */
function callContext(found, call) {
  const ctx = found.context;
  const who = ctx.acting_user?.user || ctx.acting_user?.tenant || "unknown";
  const out = [
    h("p", { class: "acting-user" }, "Acting for ", h("strong", { text: who })),
    h("blockquote", { class: "asked" }, h("span", { class: "who", text: "user" }), h("span", { class: "text", text: ctx.user_message || "" })),
  ];
  if (ctx.assistant_text) {
    out.push(h("blockquote", { class: "said" }, h("span", { class: "who", text: "model" }), h("span", { class: "text", text: ctx.assistant_text })));
  }
  out.push(h("p", { class: "tool" }, h("strong", { class: "call-name", text: found.call.name }),
    found.call.needs_approval ? h("span", { class: "tag gate", text: "needs approval" }) : null,
    found.call.kind === "outcome_unknown" ? h("span", { class: "tag gate", text: "outcome unknown" }) : null,
    h("span", { class: "description", text: found.call.description || "" })));
  const earlier = ctx.earlier_calls || [];
  if (earlier.length) {
    const items = earlier.map((e) => h("li", {}, h("span", { class: "call-name", text: e.name }),
      h("code", { text: ` ${JSON.stringify(e.args)}` }), " → ",
      h("span", { class: `tag result-${e.status || "pending"}`, text: e.status || "no result yet" }),
      h("pre", { class: "output", text: typeof e.output === "string" ? e.output : JSON.stringify(e.output) })));
    const long = earlier.length > 2 || JSON.stringify(earlier).length > 600;
    out.push(h("details", { class: "earlier", open: !long },
      h("summary", { text: `Earlier in this turn: ${earlier.length} call(s)` }), h("ul", {}, items)));
  }
  return out;
}

/** The arguments as fields: each name, and its value as the model gave it. */
function argumentFields(args) {
  return h("dl", { class: "args fields" }, Object.entries(args || {}).flatMap(([name, value]) => [
    h("dt", { text: name }),
    h("dd", { text: typeof value === "string" ? value : JSON.stringify(value) })]));
}

function helpText() {
  return document.getElementById("answers-help").content.cloneNode(true);
}

/** What a pending call's answers share: the status line, the buttons, and the confirmation a
 * second click gives before the answer is posted to `path` (`box()` is the call's element,
 * whose buttons are disabled while the answer is on its way). */
function confirmedAnswers(path, done, box) {
  const outcome = h("p", { class: "outcome", role: "status" });
  const buttons = h("div", { class: "actions" });
  const confirm = h("div", { class: "confirm", hidden: true });
  const send = async (body, label) => {
    for (const b of box().querySelectorAll("button")) b.disabled = true;
    try {
      const after = await api("POST", path, body);
      outcome.textContent = `${label}: the call is ${after.status}.`;
      confirm.hidden = true;
      done();
    } catch (error) {
      const status = error.details?.status;
      outcome.textContent = status ? `Too late: the call is already ${status}.` : error.message;
      for (const b of box().querySelectorAll("button")) b.disabled = false;
      if (status) done();
    }
  };
  const ask = (question, body, label, cls) => { // the second click is the decision
    confirm.replaceChildren(h("span", { class: "question", text: question }),
      h("button", { type: "button", class: `confirm-${cls}`, text: `Yes, ${label.toLowerCase()}`, onclick: () => send(body, label) }),
      h("button", { type: "button", class: "cancel-confirm", text: "Cancel", onclick: () => { confirm.hidden = true; buttons.hidden = false; } }));
    confirm.hidden = false;
    buttons.hidden = true;
  };
  return { outcome, buttons, confirm, ask };
}

/** A pending call: its name, arguments and deadline, and the buttons that answer it.
 * Every answer asks for a confirmation first; a gated call is approved or rejected as it
 * stands (its arguments cannot be changed), a human call is resolved with the answer. */
function pendingCall(cid, call, done) {
  if (call.may_decide === false) {
    return h("div", { class: "pending-call others", data: { callId: call.tool_call_id } },
      h("p", {}, h("strong", { class: "call-name", text: call.name }), h("span", { class: "muted", text: ` · ${whoDecides(call)}` })),
      argumentFields(call.args));
  }
  if (call.elicitation) return questionCall(cid, call, done);
  if (call.outcome_unknown && !call.outcome_unknown.answered) return unknownOutcomeCall(cid, call, done);
  const gated = Boolean(call.needs_approval);
  const edits = call.editable ? h("textarea", { class: "edit-args", rows: 3, "aria-label": "arguments to approve",
    text: JSON.stringify(call.args || {}, null, 2) }) : null;
  const note = h("input", { class: "reply", placeholder: gated ? "reason (reject)" : "reason (reject) or answer",
    "aria-label": gated ? "reason" : "reason or answer" });
  const path = `${conversationPath(cid)}/tool-calls/${encodeURIComponent(call.tool_call_id)}/resolution`;
  const { outcome, buttons, confirm, ask } = confirmedAnswers(path, done, () => box);
  const shown = `${call.name}(${Object.entries(call.args || {}).map(([k, v]) => `${k}=${JSON.stringify(v)}`).join(", ")})`;
  const reason = () => note.value.trim();
  const approve = () => {
    if (edits) { // an editable tool's call runs with the arguments as the person left them
      let args;
      try { args = JSON.parse(edits.value); } catch { outcome.textContent = "The arguments are not JSON."; return; }
      const edited = JSON.stringify(args) !== JSON.stringify(call.args || {});
      return ask(`Approve ${shown}?${edited ? ` It runs with your arguments ${JSON.stringify(args)}.` : " It runs as shown."}`,
        edited ? { status: "approved", args } : { status: "approved" }, "Approve", "approve");
    }
    return ask(`Approve ${shown}?${gated ? " It runs as shown." : ""}`,
      gated ? { status: "approved" } : { status: "resolved", result: { approved: true } }, "Approve", "approve");
  };
  const reject = () => ask(`Reject ${shown}${reason() ? ` because "${reason()}"` : ""}?${gated ? " It will not run." : ""}`,
    gated ? (reason() ? { status: "rejected", reason: reason() } : { status: "rejected" })
      : { status: "resolved", result: { approved: false, reason: reason() || "rejected by a person" } }, "Reject", "reject");
  const answer = () => {
    const text = note.value.trim();
    if (!text) { outcome.textContent = "Type the answer first."; note.focus(); return; }
    let value = text;
    try { value = JSON.parse(text); } catch { /* not JSON: the text itself is the answer */ }
    ask(`Answer ${call.name} with ${JSON.stringify(value)}?`, { status: "resolved", result: value }, "Answer", "answer");
  };
  buttons.append(
    h("button", { type: "button", class: "approve", text: "Approve", onclick: approve }),
    h("button", { type: "button", class: "reject", text: "Reject", onclick: reject }), note);
  if (!gated) buttons.append(h("button", { type: "button", class: "answer", text: "Answer", onclick: answer }));
  const box = h("div", { class: "pending-call", data: { callId: call.tool_call_id } },
    h("p", {}, h("strong", { class: "call-name", text: call.name }),
      gated ? h("span", { class: "tag gate", text: "needs approval" }) : ` (${call.executor}) `,
      h("code", { class: "muted", text: call.tool_call_id }),
      call.expires_at ? h("span", { class: "muted", text: gated
        ? ` · refused by the system at ${when(call.expires_at)} unless approved`
        : ` · expires ${when(call.expires_at)}` }) : null),
    argumentFields(call.args),
    h("pre", { class: "args raw", text: json(call.args) }),
    edits ? h("label", { class: "muted" }, "Edit the arguments before approving (JSON):") : null, edits,
    buttons, confirm, outcome);
  return box;
}

/** A call whose tool server asked a person something: its message, the schema of the answer
 * it wants (or the address it sends them to), and accept / decline / cancel. */
function questionCall(cid, call, done) {
  const q = call.elicitation;
  const path = `${conversationPath(cid)}/tool-calls/${encodeURIComponent(call.tool_call_id)}/resolution`;
  const reply = h("textarea", { class: "reply", rows: 3, placeholder: "answer as JSON, e.g. {\"confirm\": true}",
    "aria-label": "answer" });
  const outcome = h("p", { class: "outcome", role: "status" });
  const send = async (body, label) => {
    try {
      const after = await api("POST", path, body);
      outcome.textContent = `${label}: the call is ${after.status}.`;
      done();
    } catch (error) {
      outcome.textContent = error.message; // a 422 says which field does not fit the schema
    }
  };
  const accept = () => {
    let content = {};
    if (reply.value.trim()) {
      try { content = JSON.parse(reply.value); } catch { outcome.textContent = "The answer is not JSON."; return; }
    }
    send(q.mode === "url" ? { status: "answered", action: "accept" }
      : { status: "answered", action: "accept", content }, "Accepted");
  };
  return h("div", { class: "pending-call question", data: { callId: call.tool_call_id } },
    h("p", {}, h("strong", { class: "call-name", text: call.name }),
      h("span", { class: "tag gate", text: "asks you" }),
      h("code", { class: "muted", text: call.tool_call_id }),
      call.expires_at ? h("span", { class: "muted", text: ` · expires ${when(call.expires_at)}` }) : null),
    h("p", { class: "question-message", text: q.message }),
    q.mode === "url" ? h("p", {}, h("code", { text: q.url }))
      : h("pre", { class: "args raw", text: json(q.requested_schema) }),
    q.mode === "url" ? null : reply,
    h("div", { class: "actions" },
      h("button", { type: "button", class: "approve", text: "Accept", onclick: accept }),
      h("button", { type: "button", class: "reject", text: "Decline",
        onclick: () => send({ status: "answered", action: "decline" }, "Declined") }),
      h("button", { type: "button", class: "cancel-confirm", text: "Cancel",
        onclick: () => send({ status: "answered", action: "cancel" }, "Cancelled") })),
    outcome);
}

/** A `once` call whose run was found started and unfinished: when it started, on which
 * worker, how long it ran until found, and the three answers: it ran (with its result), it
 * did not run (it runs now, once), abandon (the model reads that the outcome is unknown). */
function unknownOutcomeCall(cid, call, done) {
  const found = call.outcome_unknown;
  const path = `${conversationPath(cid)}/tool-calls/${encodeURIComponent(call.tool_call_id)}/resolution`;
  const note = h("input", { class: "reply", placeholder: "its result (ran) or a reason (abandon)",
    "aria-label": "result or reason" });
  const { outcome, buttons, confirm, ask } = confirmedAnswers(path, done, () => box);
  const ran = () => {
    const text = note.value.trim();
    if (!text) { outcome.textContent = "Type what it returned first: the model reads it."; note.focus(); return; }
    let value = text;
    try { value = JSON.parse(text); } catch { /* not JSON: the text itself is the result */ }
    ask(`It ran, and returned ${JSON.stringify(value)}?`, { status: "ran", result: value }, "It ran", "approve");
  };
  const rerun = () => ask(`It did not run: run ${call.name} now, once?`, { status: "did_not_run" }, "Run it", "answer");
  const abandon = () => {
    const reason = note.value.trim();
    ask(`Abandon it${reason ? ` because "${reason}"` : ""}? The model reads that its outcome is unknown.`,
      reason ? { status: "abandoned", reason } : { status: "abandoned" }, "Abandon", "reject");
  };
  buttons.append(
    h("button", { type: "button", class: "approve ran", text: "It ran", onclick: ran }),
    h("button", { type: "button", class: "answer rerun", text: "It did not run", onclick: rerun }),
    h("button", { type: "button", class: "reject abandon", text: "Abandon", onclick: abandon }), note);
  const box = h("div", { class: "pending-call outcome-unknown", data: { callId: call.tool_call_id } },
    h("p", {}, h("strong", { class: "call-name", text: call.name }),
      h("span", { class: "tag gate", text: "outcome unknown" }),
      h("code", { class: "muted", text: call.tool_call_id })),
    h("p", { class: "started", text: `Started ${when(found.started_at)} on ${found.worker}; `
      + `found unfinished ${found.ran_s} s later. It may or may not have taken effect.` }),
    found.description ? h("p", { class: "description", text: found.description }) : null,
    found.reconcile ? h("p", { class: "muted", text: `Its reconcile could not tell: ${found.reconcile}` }) : null,
    argumentFields(call.args),
    h("pre", { class: "args raw", text: json(call.args) }),
    buttons, confirm, outcome);
  return box;
}

// (d) failed conversations, with what failed and a retry

async function failedView(main, view) {
  const list = h("div", { id: "failed", class: "cards" });
  const empty = h("p", { class: "empty", text: "No conversation has failed." });
  const done = h("p", { class: "outcome", role: "status" });
  main.append(h("h2", { text: "Failed conversations" }),
    h("p", { class: "muted", text: "Retry re-drives the turn from where it stopped; the failure stays in the log." }),
    done, list, empty);
  const load = async () => {
    const page = await api("GET", "v1/conversations?status=failed&limit=200", undefined, view.signal);
    syncRows(list, page.conversations, (c) => c.id, (c) => failedCard(c, view, async () => {
      done.replaceChildren("Re-driven: ", convLink(c.id));
      await load();
    }));
    empty.hidden = page.conversations.length > 0;
  };
  await load();
  view.every(REFRESH_MS, load);
}

function failedCard(conv, view, retried) {
  const why = h("p", { class: "why", text: "…" });
  const retry = h("button", { type: "button", class: "retry", text: "Retry", onclick: async () => {
    retry.disabled = true;
    try {
      await api("POST", `${conversationPath(conv.id)}/retry`);
      await retried();
    } catch (error) {
      retry.disabled = false;
      report(error);
    }
  } });
  lastError(conv, view).then((error) => {
    why.textContent = error ? `${error.content.code}: ${error.content.message}` : "no error in the log";
  }).catch(report);
  return h("article", { class: "failed card" },
    h("p", {}, convLink(conv.id), ` failed · updated ${when(conv.updated_at)}`), why, retry);
}

async function lastError(conv, view) {
  const after = Math.max(0, conv.last_seq - 20);
  const page = await api("GET", `${conversationPath(conv.id)}/events?after_seq=${after}`, undefined, view.signal);
  return page.events.filter((e) => e.type === "error").pop();
}

// (e) schedules: their next runs, the runs so far (each links to its conversation), pause / resume

async function schedulesView(main, view) {
  const list = h("div", { id: "schedules", class: "cards" });
  const empty = h("p", { class: "empty", text: "No schedules. POST /v1/schedules makes one." });
  main.append(h("h2", { text: "Schedules" }), list, empty);
  const sig = (s) => `${s.paused}/${s.next_runs.join()}/${s.updated_at}`;
  const load = async () => {
    const page = await api("GET", "v1/schedules?upcoming=5", undefined, view.signal);
    syncRows(list, page.schedules, (s) => s.id, (s) => scheduleCard(s, view, load),
      (old, s) => (old.dataset.sig === sig(s) ? null : scheduleCard(s, view, load)));
    for (const card of list.children) card.dataset.sig = sig(page.schedules.find((s) => s.id === card.dataset.key));
    empty.hidden = page.schedules.length > 0;
  };
  await load();
  view.every(REFRESH_MS, load);
}

function scheduleCard(schedule, view, reload) {
  const path = `v1/schedules/${encodeURIComponent(schedule.id)}`;
  const calendar = schedule.cron ? `cron ${schedule.cron} (${schedule.timezone})` : `every ${schedule.every_s} s`;
  const target = schedule.agent ? `starts a conversation from ${schedule.agent}` : "posts into ";
  const toggle = h("button", { type: "button", class: "toggle", text: schedule.paused ? "Resume" : "Pause",
    onclick: async () => {
      toggle.disabled = true;
      await api("POST", `${path}/${schedule.paused ? "resume" : "pause"}`).catch(report);
      await reload();
    } });
  const runs = h("ul", { class: "runs" }, h("li", { class: "muted", text: "loading the runs…" }));
  api("GET", `${path}/runs?limit=10`, undefined, view.signal).then((found) => {
    runs.replaceChildren(...(found.runs.length ? found.runs.map((r) => h("li", {},
      `${when(r.slot_at)} · ${r.status}${r.attempts > 1 ? ` after ${r.attempts} attempts` : ""}`
      + `${r.error ? `: ${r.error}` : ""}${r.retry_at ? ` · tried again ${when(r.retry_at)}` : ""} · `,
      convLink(r.conversation_id)))
      : [h("li", { class: "muted", text: "no runs yet" })]));
  }).catch(report);
  return h("article", { class: "schedule card" },
    h("h3", { class: "title", text: schedule.name }),
    h("p", {}, `${calendar} · ${target}`, schedule.conversation_id ? convLink(schedule.conversation_id) : "",
      schedule.paused ? " · paused" : ""),
    h("p", { class: "muted", text: schedule.next_runs.length
      ? `next: ${schedule.next_runs.map(when).join(", ")}` : "fires nothing while paused" }),
    toggle, h("h4", { text: "Runs so far" }), runs);
}

// (b) one conversation, live

async function conversationView(main, view, cid) {
  const state = h("span", { id: "state" });
  const live = h("span", { id: "live", class: "muted", text: "connecting…" });
  const actions = h("span", { class: "actions" });
  const calls = h("div", { class: "cards" });
  const pending = h("div", { id: "pending", hidden: true }, helpText(), calls);
  const log = new Log(h("div", { id: "log" }), cid);
  const form = messageForm(cid);
  main.append(
    h("h2", {}, "Conversation ", h("code", { text: cid })),
    h("p", { class: "toolbar" }, state, " ", live, " ", actions, " ",
      h("a", { class: "tree-link", href: `#/tree/${encodeURIComponent(cid)}`, text: "tree of agents" })),
    pending, log.root, form);

  const show = async () => {
    const conv = await api("GET", conversationPath(cid), undefined, view.signal);
    state.replaceChildren(badge(conv.state));
    actions.replaceChildren(...conversationActions(conv, show));
    let waiting = [];
    if (conv.pending.length) { // with its sub-agents' (its people are theirs), and who may decide each
      const listed = await api("GET", `${conversationPath(cid)}/tool-calls?status=pending`, undefined, view.signal);
      waiting = listed.tool_calls.filter(waitsOnAPerson);
    }
    syncRows(calls, waiting, (c) => `${c.conversation_id || cid}/${c.tool_call_id}`, (call) => h("div", { class: "card approval" },
      call.conversation_id ? h("p", { class: "muted sub-agent" }, `Asked by the sub-agent ${call.agent || ""} in `, convLink(call.conversation_id)) : null,
      pendingCall(call.conversation_id || cid, call, () => show().catch(report))));
    pending.hidden = waiting.length === 0;
  };
  await show();
  let queued = null; // one state refresh at a time, after a burst of events
  const changed = () => {
    if (queued) return;
    queued = setTimeout(() => { queued = null; show().catch(report); }, 150);
  };
  follow(cid, view, (frame) => {
    if (frame.event === "event") { log.event(frame.data); changed(); }
    else if (frame.event === "delta") log.delta(frame.data);
    else if (frame.event === "retry") log.retry(frame.data);
  }, (up) => { live.textContent = up ? "live" : "reconnecting…"; });
}

function conversationActions(conv, show) {
  const act = (label, path, cls) => h("button", { type: "button", class: cls, text: label, onclick: async (event) => {
    event.target.disabled = true;
    await api("POST", `${conversationPath(conv.id)}/${path}`).catch(report);
    await show();
  } });
  const out = [];
  if (conv.state === "failed") out.push(act("Retry", "retry", "retry"));
  if (conv.state === "running" || conv.state === "awaiting_input") out.push(act("Cancel turn", "cancel", "cancel"));
  if (conv.inbox) out.push(h("span", { class: "muted", text: ` ${conv.inbox} message(s) wait in the inbox` }));
  return out;
}

function messageForm(cid) {
  const text = h("textarea", { id: "message", rows: 3, placeholder: "Write a message…", required: true });
  const onBusy = h("select", { id: "on-busy", "aria-label": "when a turn is running" },
    h("option", { value: "enqueue", text: "queue it if a turn runs" }),
    h("option", { value: "interrupt", text: "interrupt the running turn" }));
  const said = h("span", { class: "muted", role: "status" });
  return h("form", { id: "message-form", onsubmit: async (event) => {
    event.preventDefault();
    const content = text.value;
    if (!content.trim()) return;
    try {
      const answer = await api("POST", `${conversationPath(cid)}/messages`, { content, on_busy: onBusy.value });
      text.value = "";
      said.textContent = answer.queued ? "queued: it starts when the running turn ends" : "";
    } catch (error) { report(error); }
  } }, text, h("div", { class: "toolbar" }, onBusy, h("button", { type: "submit", text: "Send" }), said));
}

/** Reads the conversation's Server-Sent Events with fetch (EventSource cannot send a key). */
async function follow(cid, view, onFrame, onLive) {
  let lastSeq = 0;
  let retryMs = 2000;
  while (!view.signal.aborted) {
    try {
      const headers = { ...authHeaders(), Accept: "text/event-stream" };
      if (lastSeq) headers["Last-Event-ID"] = String(lastSeq);
      const response = await fetch(`${ROOT}${conversationPath(cid)}/stream?after_seq=${lastSeq}`,
        { headers, signal: view.signal, cache: "no-store" });
      if (response.status === 401) return signOut("The API refused this key.");
      if (response.status === 404) return flash(`No conversation ${cid}.`);
      if (!response.ok) throw new Error(`stream: HTTP ${response.status}`);
      onLive(true);
      const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
      let buffer = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        // line ends may be \r\n, \n or \r; a \r that ends a chunk waits for its possible \n
        buffer = (buffer + value).replace(/\r\n|\r(?!$)/g, "\n");
        let cut;
        while ((cut = buffer.indexOf("\n\n")) >= 0) {
          const frame = parseFrame(buffer.slice(0, cut));
          buffer = buffer.slice(cut + 2);
          if (frame.retry) retryMs = frame.retry;
          if (frame.data === undefined) continue;
          onFrame(frame);
          if (frame.id) lastSeq = Number(frame.id); // only persisted events carry an id
        }
      }
    } catch (error) {
      if (view.signal.aborted) return;
    }
    onLive(false);
    await new Promise((resolve) => setTimeout(resolve, retryMs));
  }
}

/** One SSE frame: `event:`, `id:`, `retry:` and (possibly several) `data:` lines; `:` lines are comments. */
function parseFrame(block) {
  const frame = { event: "message", id: null, retry: null, data: undefined };
  const data = [];
  for (const line of block.split("\n")) {
    if (!line || line.startsWith(":")) continue;
    const colon = line.indexOf(":");
    const name = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (name === "event") frame.event = value;
    else if (name === "id") frame.id = value;
    else if (name === "retry" && /^\d+$/.test(value)) frame.retry = Number(value);
    else if (name === "data") data.push(value);
  }
  if (data.length) {
    try { frame.data = JSON.parse(data.join("\n")); } catch { frame.data = undefined; }
  }
  return frame;
}

/** The log as people read it: turns, then rounds, each round's text and its tool calls. */
class Log {
  constructor(root, cid) {
    this.root = root;
    this.cid = cid;
    this.lastSeq = 0;
    this.turns = new Map();
    this.rounds = new Map();
    this.calls = new Map();
  }

  turn(turnId) {
    const key = turnId || "";
    if (!this.turns.has(key)) {
      const box = h("section", { class: "turn" }, h("h3", { class: "muted" }, `turn ${this.turns.size + 1} `,
        turnId ? h("a", { class: "timeline-link", href: timelineHref(this.cid, turnId), text: "timeline" }) : null));
      this.turns.set(key, box);
      this.root.append(box);
    }
    return this.turns.get(key);
  }

  round(roundId, turnId) {
    if (!this.rounds.has(roundId)) {
      const text = h("div", { class: "answer partial" });
      const box = h("div", { class: "round", data: { roundId } }, text);
      this.rounds.set(roundId, { box, text, attempt: 0, pieces: [], final: false });
      this.turn(turnId).append(box);
    }
    return this.rounds.get(roundId);
  }

  /** Where an event goes: its round if it has one, else its turn. */
  place(event) {
    return event.round_id ? this.round(event.round_id, event.turn_id).box : this.turn(event.turn_id);
  }

  event(event) {
    if (event.seq <= this.lastSeq) return; // a replay after reconnecting
    this.lastSeq = event.seq;
    const c = event.content;
    const seq = h("span", { class: "seq", text: `#${event.seq}` });
    switch (event.type) {
      case "user_msg":
        this.turn(event.turn_id).append(h("div", { class: "msg user" }, seq, h("span", { class: "who", text: "user" }),
          h("span", { class: "text", text: c.text ?? json(c.parts) })));
        break;
      case "assistant_msg": {
        if (!event.round_id) {
          this.turn(event.turn_id).append(h("div", { class: "answer final" }, seq,
            h("span", { class: "who", text: "model" }), h("span", { class: "text", text: c.text || "" })));
          break;
        }
        const round = this.round(event.round_id, event.turn_id);
        round.final = true;
        round.text.className = "answer final";
        round.text.replaceChildren(seq, h("span", { class: "who", text: "model" }),
          h("span", { class: "text", text: c.text || "" }));
        if (c.interrupted) round.text.append(h("span", { class: "tag", text: "interrupted" }));
        if (!c.text && !c.interrupted) round.text.hidden = true;
        break;
      }
      case "tool_call": {
        const result = h("div", { class: "result muted", text: "no result yet" });
        const box = h("div", { class: "call", data: { callId: c.tool_call_id } }, seq,
          h("span", { class: "call-name", text: c.name }), h("span", { class: "muted", text: ` (${c.executor})` }),
          c.needs_approval ? h("span", { class: "tag gate", text: "needs approval" }) : null,
          c.child_conversation_id ? h("span", { class: "muted child" }, " → ", convLink(c.child_conversation_id)) : null,
          h("pre", { class: "args", text: json(c.args) }), result);
        this.calls.set(c.tool_call_id, result);
        this.place(event).append(box);
        break;
      }
      case "tool_result": {
        const slot = this.calls.get(c.tool_call_id);
        const shown = resultStatus(c);
        const body = [seq, h("span", { class: `tag result-${shown}`, text: shown }),
          h("pre", { class: "output", text: typeof c.output === "string" ? c.output : json(c.output) })];
        if (slot) { slot.className = "result"; slot.replaceChildren(...body); }
        else this.place(event).append(h("div", { class: "result" }, ...body));
        break;
      }
      case "suspension":
        this.place(event).append(h("div", { class: "note suspension" }, seq,
          `waiting on ${c.pending.length} call(s): `, c.pending.join(", ")));
        break;
      case "resolution": {
        const refused = ["rejected", "expired", "cancelled", "errored"].includes(c.status);
        this.place(event).append(h("div", { class: `note resolution resolution-${c.status}${refused ? " refused" : ""}` }, seq,
          `${c.tool_call_id} ${c.status} by ${c.by}`, c.reason ? `: ${c.reason}` : "",
          c.args ? `, with the arguments changed to ${JSON.stringify(c.args)}` : "",
          c.decider?.key_id ? ` (key ${c.decider.key_id})` : ""));
        break;
      }
      case "error":
        this.place(event).append(h("div", { class: "note error" }, seq,
          h("strong", { text: c.code }), `: ${c.message}`, c.status ? ` (${c.status})` : ""));
        break;
      case "guardrail":
        this.place(event).append(h("div", { class: `note guardrail${c.tripped ? " refused" : ""}` }, seq,
          `${c.phase} guardrail ${c.name} ${c.tripped ? "tripped" : "passed"}`, c.info != null ? `: ${json(c.info)}` : "",
          c.usage ? ` [${(c.usage.input_tokens || 0) + (c.usage.output_tokens || 0)} tokens]` : ""));
        break;
      case "handoff":
        this.place(event).append(h("div", { class: "note handoff" }, seq, `handed off to ${c.to}`,
          c.from ? ` from ${c.from}` : "", c.by === "person" ? ` by ${c.user || "a person"}` : "",
          c.why ? `: ${c.why}` : ""));
        break;
      default:
        this.place(event).append(h("div", { class: "note" }, seq, `${event.type}: ${json(c)}`));
    }
  }

  /** A piece of an answer as it streams; a newer attempt of the round starts the text over. */
  delta(delta) {
    const round = this.round(delta.round_id, delta.turn_id);
    if (round.final) return;
    if (delta.attempt > round.attempt) { round.attempt = delta.attempt; round.pieces = []; }
    if (delta.attempt < round.attempt) return;
    round.pieces[delta.index] = delta.text;
    round.text.textContent = round.pieces.join("");
  }

  retry(retry) {
    const round = this.round(retry.round_id, retry.turn_id);
    if (round.final) return;
    round.pieces = [];
    round.text.textContent = `(attempt ${retry.attempt} failed: ${retry.error}; trying again in ${retry.next_delay_s}s)`;
  }
}

/** What a result says: a person's "no" to a human call reads as a rejection, not a green ok. */
function resultStatus(content) {
  const out = content.output;
  if (content.status === "ok" && out && typeof out === "object" && out.approved === false) return "rejected";
  return content.status;
}

// -- start --------------------------------------------------------------------------------

document.getElementById("key-form").addEventListener("submit", signIn);
document.getElementById("forget").addEventListener("click", () => {
  sessionStorage.removeItem(USER);
  signOut("");
});
window.addEventListener("hashchange", route);
route();
