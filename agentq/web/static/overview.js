// The operator's overview: cost and tokens per tenant and agent by UTC day as stacked bar
// charts, and the slowest and costliest turns of the period, each linking to its timeline.
// Plain JavaScript and SVG on the page's helpers (h, api, authHeaders, ROOT from app.js and
// timelineHref, duration from timeline.js, called only once the page runs). Amounts stay
// exact: the API's decimal text is summed as whole nanos in BigInt, never as floats; only a
// bar's height is a float. Shown when the page's key is AGENTQ_OPERATOR_KEY.
"use strict";

const OPERATOR = "agentq.operator"; // set at sign-in when the key reads the overview
const OVERVIEW_DAYS = [7, 30, 90];
const PALETTE = ["#2f6fb0", "#d1802a", "#2e8b57", "#a2398f", "#c0392b", "#5d6d7e", "#b7950b", "#17a2b8"];
const SVG = "http://www.w3.org/2000/svg";
const NANOS = 1000000000n;
const DAY_MS = 86400000;

/** An SVG element with attributes (never markup); children are nodes or text. */
function svg(tag, attrs = {}, ...children) {
  const node = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (name === "data") Object.assign(node.dataset, value);
    else node.setAttribute(name, String(value));
  }
  for (const child of children.flat()) {
    if (child !== null && child !== undefined) node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

/** Decimal text with up to nine places ("0.012000000") as whole nanos. */
function nanosOf(text) {
  const [whole, fraction = ""] = String(text ?? "0").split(".");
  return BigInt(whole || "0") * NANOS + BigInt((fraction + "000000000").slice(0, 9));
}

/** Whole nanos as decimal text, nine places, as the API writes amounts. */
const moneyText = (nanos) => `${nanos / NANOS}.${(nanos % NANOS).toString().padStart(9, "0")}`;

/** An amount for people: trailing zeros dropped, two places at least. */
const money = (nanos) => moneyText(nanos).replace(/(\.\d\d\d*?)0+$/, "$1");

const tokens = (count) => count.toLocaleString("en-US");

/** Whether this key is the operator's: it may read the overview (a tenant's key is refused). */
async function isOperatorKey() {
  const to = new Date();
  const from = new Date(to.getTime() - 3600000);
  const query = `from=${encodeURIComponent(from.toISOString())}&to=${encodeURIComponent(to.toISOString())}&turns=1&limit=1`;
  const response = await fetch(`${ROOT}v1/usage/overview?${query}`, { headers: authHeaders() });
  return response.ok;
}

/** The nav for the key: the operator's overview, or a tenant's own pages. */
function operatorNav(operator) {
  for (const link of document.querySelectorAll("#nav a")) link.hidden = operator ? !("operator" in link.dataset) : "operator" in link.dataset;
}

/** The days of the range, oldest first, as "YYYY-MM-DD" (UTC). */
function daysOf(first, count) {
  return Array.from({ length: count }, (_, i) => new Date(first.getTime() + i * DAY_MS).toISOString().slice(0, 10));
}

/** Each tenant and agent of the rows, with its totals and its figures per day. */
function seriesOf(rows) {
  const series = new Map();
  for (const row of rows) {
    const tenant = row.group.tenant;
    const agent = row.group.agent;
    const key = `${tenant}\u0000${agent ?? ""}`;
    if (!series.has(key)) series.set(key, { tenant, agent, cost: 0n, tokens: 0, calls: 0, days: new Map() });
    const one = series.get(key);
    const day = row.start.slice(0, 10);
    const cost = nanosOf(row.cost);
    const spent = row.input_tokens + row.output_tokens;
    one.cost += cost;
    one.tokens += spent;
    one.calls += row.calls;
    const was = one.days.get(day) || { cost: 0n, tokens: 0 };
    one.days.set(day, { cost: was.cost + cost, tokens: was.tokens + spent });
  }
  const all = [...series.values()].sort((a, b) => (b.cost > a.cost ? 1 : b.cost < a.cost ? -1 : b.tokens - a.tokens));
  all.forEach((one, index) => { one.color = PALETTE[index % PALETTE.length]; });
  return all;
}

const seriesName = (one) => `${one.tenant} / ${one.agent ?? "no agent"}`;

/** A stacked bar per day: each tenant and agent's share of `measure` (cost in nanos, or tokens). */
function dayChart(id, title, days, series, measure, label) {
  const width = 920;
  const height = 220;
  const left = 70;
  const bottom = 24;
  const plot = height - bottom - 8;
  const totals = days.map((day) => series.reduce((sum, one) => sum + Number(measure(one.days.get(day))), 0));
  const top = Math.max(...totals, 0) || 1;
  const slot = (width - left) / days.length;
  const barWidth = Math.max(2, Math.min(40, slot * 0.7));
  const chart = svg("svg", { id, class: "ov-chart", viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": title });
  for (const fraction of [0, 0.5, 1]) {
    const y = 8 + plot * (1 - fraction);
    chart.append(svg("line", { x1: left, x2: width, y1: y, y2: y, class: "ov-grid" }),
      svg("text", { x: left - 6, y: y + 4, "text-anchor": "end", class: "ov-axis" }, label(top * fraction)));
  }
  days.forEach((day, index) => {
    const x = left + index * slot + (slot - barWidth) / 2;
    let y = 8 + plot;
    for (const one of series) {
      const figures = one.days.get(day);
      const value = Number(measure(figures));
      if (!value) continue;
      const tall = (value / top) * plot;
      y -= tall;
      chart.append(svg("rect", { x, y, width: barWidth, height: Math.max(tall, 0.5), fill: one.color, class: "ov-bar",
        data: { day, tenant: one.tenant, agent: one.agent ?? "" } },
      svg("title", {}, `${day} · ${seriesName(one)}: cost ${money(figures.cost)}, ${tokens(figures.tokens)} tokens`)));
    }
    if (days.length <= 10 || index % Math.ceil(days.length / 10) === 0) {
      chart.append(svg("text", { x: x + barWidth / 2, y: height - 6, "text-anchor": "middle", class: "ov-axis" }, day.slice(5)));
    }
  });
  return h("figure", { class: "ov-figure" }, h("figcaption", { text: title }), chart);
}

function seriesLegend(series) {
  return h("ul", { id: "overview-series", class: "ov-legend" }, series.map((one) => {
    const swatch = h("span", { class: "ov-swatch" });
    swatch.style.background = one.color;
    return h("li", { class: "ov-series", data: { tenant: one.tenant, agent: one.agent ?? "", cost: moneyText(one.cost), tokens: one.tokens, calls: one.calls } },
      swatch, h("strong", { class: "ov-name", text: seriesName(one) }), " ",
      h("span", { class: "ov-cost", text: `cost ${money(one.cost)}` }), " · ",
      h("span", { class: "ov-tokens muted", text: `${tokens(one.tokens)} tokens · ${one.calls} model call(s)` }));
  }));
}

function turnsTable(id, title, turns) {
  const body = turns.map((turn) => h("tr", { class: "ov-turn", data: { tenant: turn.tenant, turn: turn.turn_id, conversation: turn.conversation_id, cost: turn.cost } },
    h("td", { text: turn.tenant }), h("td", { text: turn.agent ?? "no agent" }), h("td", { text: when(turn.started_at) }),
    h("td", { class: "num", text: duration(turn.duration_ms) }),
    h("td", { class: "num", text: `${tokens(turn.input_tokens)} in / ${tokens(turn.output_tokens)} out` }),
    h("td", { class: "num", text: money(nanosOf(turn.cost)) }),
    h("td", {}, h("a", { class: "timeline-link", href: timelineHref(turn.conversation_id, turn.turn_id), text: "timeline" }))));
  return h("section", { class: "ov-turns" }, h("h3", { text: title }), turns.length
    ? h("table", { id }, h("thead", {}, h("tr", {}, ["tenant", "agent", "started", "took", "tokens", "cost", ""].map((name) => h("th", { text: name })))),
      h("tbody", {}, body))
    : h("p", { class: "empty", text: "No turns in this period." }));
}

async function overviewView(main, view, arg) {
  const count = OVERVIEW_DAYS.includes(Number(arg)) ? Number(arg) : OVERVIEW_DAYS[0];
  const today = new Date(`${new Date().toISOString().slice(0, 10)}T00:00:00Z`);
  const first = new Date(today.getTime() - (count - 1) * DAY_MS);
  const end = new Date(today.getTime() + DAY_MS);
  const picker = h("select", { id: "overview-days", onchange: () => { location.hash = `#/overview/${picker.value}`; } },
    OVERVIEW_DAYS.map((days) => h("option", { value: days, selected: days === count, text: `last ${days} days` })));
  const body = h("div", { id: "overview" });
  main.append(h("h2", { text: "Usage and cost" }),
    h("p", { class: "toolbar" }, picker, " ", h("span", { class: "muted", text: "per tenant and agent, by UTC day" })), body);
  const query = `from=${encodeURIComponent(first.toISOString())}&to=${encodeURIComponent(end.toISOString())}&turns=10`;
  const found = await api("GET", `v1/usage/overview?${query}`, undefined, view.signal);
  const series = seriesOf(found.days);
  const days = daysOf(first, count);
  const total = series.reduce((sum, one) => sum + one.cost, 0n);
  body.replaceChildren(
    h("p", { id: "overview-total" }, "Total cost ", h("strong", { text: money(total) }), ` · ${tokens(series.reduce((sum, one) => sum + one.tokens, 0))} tokens`,
      found.truncated ? h("span", { class: "problem", text: " · more rows than shown: narrow the period" }) : null),
    series.length ? seriesLegend(series) : h("p", { class: "empty", text: "No model calls in this period." }),
    series.length ? dayChart("overview-cost", "Cost per day", days, series, (f) => (f ? f.cost : 0n), (v) => money(BigInt(Math.round(v)))) : null,
    series.length ? dayChart("overview-tokens", "Tokens per day (input + output)", days, series, (f) => (f ? f.tokens : 0), (v) => tokens(Math.round(v))) : null,
    turnsTable("overview-costliest", "Costliest turns", found.costliest_turns),
    turnsTable("overview-slowest", "Slowest turns", found.slowest_turns));
  body.dataset.state = "loaded";
}
