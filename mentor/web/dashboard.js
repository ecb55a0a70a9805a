// The analyst dashboard. It reads the analyst API with the analyst token, which it keeps in sessionStorage (this
// tab only) and sends as an Authorization header, never in an address. Charts are inline SVG drawn here. Nothing
// the API returns is ever parsed as HTML: every text goes into the page through text nodes.

const TOKEN_KEY = "mentor.analystToken";
const PAGE_SIZE = 20;
const POLL_MS = 60_000; // the summary is a handful of GROUP BY queries; once a minute keeps it current enough
const SVG_NS = "http://www.w3.org/2000/svg";
const OUT_OF_SCOPE = "(out of scope)";
const PANELS = {
  heatmap: ["questions_per_section", "heatmap"],
  gaps: ["content_gaps"],
  asked: ["most_asked"],
  feedback: ["feedback_by_section", "feedback_by_prompt_version"],
  tools: ["tool_usage"],
  grounding: ["fallback_reasons", "engine_mix", "totals"],
};

const $ = (id) => document.getElementById(id);
// A phone's width (390 px): charts put their labels in less room, or above their bars, so the page never scrolls
// sideways; a wide heatmap still scrolls inside its own region.
const narrow = () => window.matchMedia("(max-width: 40rem)").matches;
const state = { cursors: [null], page: 0, next: null, timer: null, titles: new Map() };

// ------------------------------------------------------------------------------------------------ DOM helpers

function el(tag, attrs = {}, ...children) {
  return build(document.createElement(tag), attrs, children);
}

function svg(tag, attrs = {}, ...children) {
  return build(document.createElementNS(SVG_NS, tag), attrs, children);
}

function build(node, attrs, children) {
  for (const [name, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    node.setAttribute(name === "className" ? "class" : name, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function fill(target, ...children) {
  const node = typeof target === "string" ? $(target) : target;
  node.replaceChildren(...children.flat().filter((c) => c !== null && c !== undefined));
  return node;
}

const number = (n) => (n === null || n === undefined ? "hidden" : n.toLocaleString("en"));
const percent = (share) => (share === null || share === undefined ? "hidden" : `${Math.round(share * 1000) / 10}%`);
const plural = (n, one, many = `${one}s`) => `${number(n)} ${n === 1 ? one : many}`;
const shorten = (text, max) => (text.length > max ? `${text.slice(0, max - 1)}…` : text);
const utc = (iso) => `${new Date(iso).toISOString().slice(0, 16).replace("T", " ")} UTC`;

function sectionTitle(id) {
  if (id === null || id === undefined || id === OUT_OF_SCOPE) return "Not covered by the module";
  return state.titles.get(id) || id;
}

// A chart label cut to `max` characters; the whole text stays as its tooltip when cut.
function labelled(text, max) {
  const short = shorten(text, max);
  return short === text ? [text] : [svg("title", {}, text), short];
}

function empty(text) {
  return el("p", { className: "empty" }, text);
}

// ------------------------------------------------------------------------------------------------ the API

const STALE = -1; // the status of an answer that came back after the analyst signed out

class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

async function api(path, { method = "GET", params = {}, auth = true } = {}) {
  const url = new URL(path, window.location.origin);
  for (const [name, value] of Object.entries(params)) {
    if (value !== null && value !== undefined && value !== "") url.searchParams.set(name, value);
  }
  const token = sessionStorage.getItem(TOKEN_KEY);
  const headers = auth ? { Authorization: `Bearer ${token || ""}` } : {};
  let response;
  try {
    response = await fetch(url, { method, headers, cache: "no-store" });
  } catch {
    throw new ApiError(0, "The server cannot be reached. Check that mentor is running, then refresh.");
  }
  // Signed out (or in as someone else) while this was on its way: its data must not reach the page.
  if (sessionStorage.getItem(TOKEN_KEY) !== token) throw new ApiError(STALE, "");
  if (response.ok) return response;
  let message = `The server answered ${response.status}.`;
  try {
    message = (await response.json()).message || message;
  } catch {
    // not JSON: keep the status
  }
  const wait = response.headers.get("Retry-After");
  if (wait) message += ` Try again in ${wait} s.`;
  if (response.status === 401 && auth) {
    signOut("The analyst token was refused. Sign in again.");
  }
  throw new ApiError(response.status, message);
}

// A JSON answer, dropped (like api's) if the analyst signed out while its body was still arriving.
async function getJson(path, options = {}) {
  const token = sessionStorage.getItem(TOKEN_KEY);
  const data = await (await api(path, options)).json();
  if (sessionStorage.getItem(TOKEN_KEY) !== token) throw new ApiError(STALE, "");
  return data;
}

function say(text, kind = "info") {
  const status = $("status");
  status.className = `status ${kind}`;
  status.textContent = text;
}

function failed(error) {
  if (error instanceof ApiError && (error.status === 401 || error.status === STALE)) return; // signOut said so
  say(error.message || String(error), "error");
}

// ------------------------------------------------------------------------------------------------ filters

function filters() {
  const from = $("f-from").value;
  const to = $("f-to").value;
  let until = null;
  if (to) {
    const next = new Date(`${to}T00:00:00Z`);
    next.setUTCDate(next.getUTCDate() + 1); // "to" is inclusive; the API's until is exclusive
    until = next.toISOString().slice(0, 10);
  }
  return { module_id: $("f-module").value || null, since: from || null, until };
}

function browserFilters() {
  const kind = $("b-kind").value;
  return {
    section_id: $("b-section").value || null,
    out_of_scope: kind === "oos" ? "true" : null,
    grounded: kind === "ungrounded" ? "false" : null,
  };
}

async function loadModules() {
  const modules = await getJson("/v1/modules", { auth: false });
  const select = $("f-module");
  const chosen = select.value;
  fill(select, el("option", { value: "" }, "All modules"), modules.map((m) => el("option", { value: m.id }, m.title)));
  select.value = chosen || (modules.length === 1 ? modules[0].id : "");
  state.titles = new Map(modules.flatMap((m) => m.sections.map((s) => [s.id, s.title])));
}

// ------------------------------------------------------------------------------------------------ summary

async function loadSummary({ quiet = false } = {}) {
  const bucket = $("f-bucket").value;
  const summary = await getJson("/v1/signals/summary", { params: { ...filters(), bucket } });
  renderSummary(summary);
  if (!quiet) say(`Updated ${new Date().toLocaleTimeString("en-GB")}.`);
}

function renderSummary(s) {
  $("t-questions").textContent = number(s.questions);
  $("t-learners").textContent = number(s.learners);
  $("t-grounded").textContent = percent(s.grounded_share);
  $("t-oos").textContent = percent(s.out_of_scope_share);
  fill("cohort-note", cohortNote(s));
  renderHeatmap(s.heatmap, s.min_cohort);
  fill("gaps", s.content_gaps.length ? groups(s.content_gaps) : emptyGaps(s));
  fill(
    "asked",
    s.most_asked.length
      ? groups(s.most_asked)
      : emptyGroups(s, "most_asked", "No question in this range is shared by enough learners yet.", [
          "Here you would see the questions learners ask most, grouped by meaning, each with its most frequent ",
          "wording, how many learners asked it and the sections that answered it.",
        ]),
  );
  renderFeedback(s);
  fill(
    "tools",
    s.tool_usage.length
      ? bars(
          s.tool_usage.map((t) => ({
            label: t.name,
            parts: [{ value: t.calls, cls: "bar" }],
            text: `${plural(t.calls, "call")} · ${plural(t.learners, "learner")}`,
          })),
          "Calculator runs per calculator",
        )
      : empty("No calculator was used by enough learners."),
  );
  renderGrounding(s);
  for (const [panel, keys] of Object.entries(PANELS)) {
    const hidden = keys.reduce((sum, key) => sum + (s.suppressed_by_panel[key] || 0), 0);
    const section = $(`panel-${panel}`);
    section.querySelector(".hidden-note")?.remove();
    if (hidden) {
      const why = `each from fewer than ${s.min_cohort} learners (${s.min_cohort_setting})`;
      section.append(el("p", { className: "hidden-note" }, `${plural(hidden, "group")} hidden here: ${why}.`));
    }
  }
  const sections = $("b-section");
  const chosen = sections.value;
  fill(
    sections,
    el("option", { value: "" }, "Any section"),
    s.heatmap.rows
      .filter((r) => r.section_id !== OUT_OF_SCOPE)
      .map((r) => el("option", { value: r.section_id }, shorten(r.title, 60))),
  );
  sections.value = [...sections.options].some((o) => o.value === chosen) ? chosen : "";
}

function level(count, max) {
  if (count === null) return "hidden";
  if (count === 0) return "l0";
  return `l${Math.min(5, Math.max(1, Math.ceil((count / max) * 5)))}`;
}

function renderHeatmap(map, minCohort) {
  const columns = map.buckets;
  if (!columns.length) {
    fill("heatmap", empty("No questions in this range."));
    fill("heatmap-table");
    fill("heatmap-legend");
    return;
  }
  const cell = 24;
  const gap = 3;
  const labelWidth = narrow() ? 150 : 270;
  const labelChars = narrow() ? 20 : 36;
  const head = 64;
  const step = cell + gap;
  const totalWidth = 80;
  const width = labelWidth + columns.length * step + totalWidth;
  const height = head + map.rows.length * step + 4;
  const counts = map.rows.flatMap((r) => r.counts).filter((c) => c !== null);
  const max = Math.max(1, ...counts);
  const every = Math.max(1, Math.ceil(columns.length / 20));
  let busiest = null;
  const chart = svg("svg", {
    width,
    height,
    viewBox: `0 0 ${width} ${height}`,
    role: "img",
    className: "heatmap",
  });
  columns.forEach((day, i) => {
    if (i % every !== 0) return;
    const x = labelWidth + i * step + cell / 2;
    chart.append(
      svg("text", { x, y: head - 8, className: "axis", transform: `rotate(-45 ${x} ${head - 8})` }, day.slice(5)),
    );
  });
  chart.append(svg("text", { x: labelWidth + columns.length * step + 8, y: head - 8, className: "axis" }, "Total"));
  map.rows.forEach((row, r) => {
    const y = head + r * step;
    const indent = row.level >= 3 ? 14 : 0;
    chart.append(
      svg(
        "text",
        { x: 4 + indent, y: y + cell * 0.7, className: `row-label${row.module_id ? "" : " extra"}` },
        labelled(row.title, row.level >= 3 ? labelChars - 2 : labelChars),
      ),
    );
    row.counts.forEach((count, i) => {
      const x = labelWidth + i * step;
      const cls = level(count, max);
      const label =
        count === null
          ? `${row.title}, ${columns[i]}: hidden, fewer than ${minCohort} learners`
          : `${row.title}, ${columns[i]}: ${plural(count, "question")}`;
      if (count !== null && (busiest === null || count > busiest.count)) busiest = { count, row, day: columns[i] };
      const group = svg("g", { className: `cell ${cls}` }, svg("title", {}, label));
      group.append(svg("rect", { x, y, width: cell, height: cell, rx: 3 }));
      if (count) group.append(svg("text", { x: x + cell / 2, y: y + cell * 0.68 }, count > 999 ? "1k+" : count));
      if (count === null) group.append(svg("text", { x: x + cell / 2, y: y + cell * 0.68 }, "·"));
      chart.append(group);
    });
    chart.append(
      svg(
        "text",
        { x: labelWidth + columns.length * step + 8, y: y + cell * 0.7, className: "total" },
        row.questions === null ? "hidden" : row.questions,
      ),
    );
  });
  const per = map.bucket === "week" ? "weeks" : "days";
  chart.setAttribute(
    "aria-label",
    `Heatmap of ${map.rows.length} sections by ${columns.length} ${per}` +
      (busiest ? `; the busiest cell is ${busiest.row.title} on ${busiest.day} with ${busiest.count} questions.` : "."),
  );
  fill("heatmap", chart);
  fill(
    "heatmap-legend",
    "Fewer ",
    ["l1", "l2", "l3", "l4", "l5"].map((l) => el("span", { className: `swatch ${l}`, "aria-hidden": "true" })),
    ` more (up to ${max} per ${map.bucket}) · `,
    el("span", { className: "swatch hidden", "aria-hidden": "true" }),
    ` hidden: fewer than ${minCohort} learners`,
    map.omitted_buckets ? ` · ${map.omitted_buckets} earlier ${per} not shown` : "",
  );
  fill(
    "heatmap-table",
    el(
      "table",
      {},
      el("caption", {}, `Questions per section and ${map.bucket}`),
      el(
        "thead",
        {},
        el("tr", {}, el("th", { scope: "col" }, "Section"), columns.map((d) => el("th", { scope: "col" }, d)), el("th", { scope: "col" }, "Total")),
      ),
      el(
        "tbody",
        {},
        map.rows.map((row) =>
          el(
            "tr",
            {},
            el("th", { scope: "row" }, row.title),
            row.counts.map((c) => el("td", {}, c === null ? "hidden" : c)),
            el("td", {}, row.questions === null ? "hidden" : row.questions),
          ),
        ),
      ),
    ),
  );
}

// Why groups are hidden, and what would show them: the minimum cohort, the setting that sets it, more learners.
function cohortNote(s) {
  const setting = `${s.min_cohort_setting}=${s.min_cohort}`;
  if (s.suppressed_groups === 0) {
    return `Groups with fewer than ${s.min_cohort} distinct learners would be hidden (${setting}); none is.`;
  }
  return [
    el(
      "strong",
      {},
      `${plural(s.suppressed_groups, "group")} hidden: fewer than ${s.min_cohort} distinct learners are in ` +
        `${s.suppressed_groups === 1 ? "it" : "each"}.`,
    ),
    ` The minimum cohort (${setting}) keeps any figure from pointing at one person. They appear as more learners `,
    `ask; on a scratch database (demo data, a trial), a lower ${s.min_cohort_setting} shows them.`,
  ];
}

// A panel of groups with nothing to show: why (no data, or every group under the cohort) and what it would show.
function emptyGroups(s, panel, why, would) {
  const hidden = s.suppressed_by_panel[panel] || 0;
  let reason = why;
  if (s.questions === null) {
    reason = `Fewer than ${s.min_cohort} learners asked anything in this range, so nothing is shown (${s.min_cohort_setting}).`;
  } else if (hidden) {
    reason = `${plural(hidden, "group")} of questions, each from fewer than ${s.min_cohort} learners: hidden (${s.min_cohort_setting}).`;
  }
  return el("div", { className: "empty-panel" }, empty(reason), el("p", { className: "hint" }, would));
}

function emptyGaps(s) {
  const none = s.out_of_scope_questions === 0;
  return emptyGroups(
    s,
    "content_gaps",
    none
      ? "No question in this range fell outside the module."
      : `${plural(s.out_of_scope_questions, "question")} fell outside the module, none shared by enough learners yet.`,
    [
      "Here you would see the questions the module does not answer, grouped by meaning, each with how many ",
      "learners asked it: the topics learners expect and do not find, candidates for a new section.",
    ],
  );
}

function groups(list) {
  return el(
    "ol",
    { className: "groups" },
    list.map((g) =>
      el(
        "li",
        {},
        el("p", { className: "group-head" }, `${plural(g.questions, "question")} from ${plural(g.learners, "learner")}`),
        el(
          "ul",
          { className: "examples" },
          g.examples.map((text) => el("li", {}, el("q", {}, text))),
        ),
        g.sections.length ? el("p", { className: "hint" }, `Answered from: ${g.sections.map(sectionTitle).join(", ")}`) : null,
      ),
    ),
  );
}

// Horizontal bars: each row a label, one or more stacked parts, and the numbers in words. On a phone the label
// goes above its bar, so a row is 300 px wide instead of 610.
function bars(rows, title) {
  const stacked = narrow();
  const labelWidth = stacked ? 0 : 200;
  const barWidth = stacked ? 150 : 220;
  const textWidth = stacked ? 150 : 190;
  const rowHeight = stacked ? 46 : 30;
  const above = stacked ? 16 : 0; // the label's line, when it is above the bar
  const width = labelWidth + barWidth + textWidth;
  const height = rows.length * rowHeight + 4;
  const max = Math.max(1, ...rows.map((r) => r.parts.reduce((sum, p) => sum + p.value, 0)));
  const chart = svg("svg", { width, height, viewBox: `0 0 ${width} ${height}`, role: "img", className: "bars" });
  chart.setAttribute("aria-label", `${title}: ${rows.map((r) => `${r.label} ${r.text}`).join("; ")}`);
  rows.forEach((row, i) => {
    const y = i * rowHeight + 4 + above;
    const label = labelled(row.label, stacked ? 40 : 28);
    chart.append(svg("text", { x: 0, y: y + 16 - above, className: "row-label" }, label));
    let x = labelWidth;
    for (const part of row.parts) {
      const w = (part.value / max) * barWidth;
      if (w > 0) chart.append(svg("rect", { x, y: y + 2, width: w, height: 20, rx: 2, className: part.cls }));
      x += w;
    }
    chart.append(svg("text", { x: labelWidth + barWidth + 8, y: y + 16, className: "value" }, row.text));
  });
  return el("div", { className: "scroll", tabindex: "0", role: "region", "aria-label": title }, chart);
}

function renderFeedback(s) {
  const vote = (name, label) => (r) => ({
    label: label(r[name]),
    parts: [
      { value: r.up, cls: "up" },
      { value: r.down, cls: "down" },
    ],
    text: `${r.up} up · ${r.down} down`,
  });
  fill(
    "feedback-sections",
    s.feedback_by_section.length
      ? [bars(s.feedback_by_section.map(vote("section_id", sectionTitle)), "Ratings per section"), legendUpDown()]
      : empty("No section was rated by enough learners."),
  );
  fill(
    "feedback-prompts",
    s.feedback_by_prompt_version.length
      ? bars(
          s.feedback_by_prompt_version.map(vote("prompt_version", (v) => (v === "(none)" ? "no prompt (extractive)" : v))),
          "Ratings per prompt version",
        )
      : empty("No prompt version was rated by enough learners."),
  );
}

function legendUpDown() {
  return el(
    "p",
    { className: "legend" },
    el("span", { className: "swatch up", "aria-hidden": "true" }),
    " helpful (up) ",
    el("span", { className: "swatch down", "aria-hidden": "true" }),
    " not helpful (down)",
  );
}

function renderGrounding(s) {
  if (s.grounded_share === null) {
    fill("grounding", empty(s.questions === null ? `Hidden: fewer than ${s.min_cohort} learners.` : "No questions yet."));
  } else {
    const width = 420;
    const done = Math.round(s.grounded_share * width);
    const chart = svg(
      "svg",
      { width, height: 28, viewBox: `0 0 ${width} 28`, role: "img", className: "bars share" },
      svg("rect", { x: 0, y: 2, width: done, height: 24, className: "up" }),
      svg("rect", { x: done, y: 2, width: width - done, height: 24, className: "rest" }),
    );
    chart.setAttribute("aria-label", `${percent(s.grounded_share)} of answers passed the grounding check`);
    fill("grounding", chart, el("p", {}, `${percent(s.grounded_share)} of answers passed the check against the module.`));
  }
  fill(
    "fallbacks",
    s.fallback_reasons.length
      ? bars(
          s.fallback_reasons.map((f) => ({
            label: f.reason,
            parts: [{ value: f.questions, cls: "down" }],
            text: `${plural(f.questions, "answer")} (${percent(f.share)})`,
          })),
          "Answers that fell back to the extractive engine, by reason",
        )
      : empty("No answer fell back from the language model (or too few learners to show)."),
  );
  fill(
    "engines",
    s.engine_mix.length
      ? bars(
          s.engine_mix.map((e) => ({
            label: e.engine,
            parts: [{ value: e.questions, cls: "bar" }],
            text: `${plural(e.questions, "answer")} (${percent(e.share)})`,
          })),
          "Answers per engine",
        )
      : empty("Nothing to show."),
  );
}

// ------------------------------------------------------------------------------------------------ question browser

async function loadPage() {
  const cursor = state.cursors[state.page];
  const params = { ...filters(), ...browserFilters(), limit: PAGE_SIZE, cursor };
  const page = await getJson("/v1/signals/questions", { params });
  state.next = page.next_cursor;
  const first = state.page * PAGE_SIZE + 1;
  $("browser-range").textContent = page.items.length
    ? `Questions ${first}–${first + page.items.length - 1} of ${page.total}, newest first.`
    : "No question matches these filters.";
  fill("browser", page.items.map(question));
  $("prev").disabled = state.page === 0;
  $("next").disabled = !state.next;
}

function resetPages() {
  state.cursors = [null];
  state.page = 0;
}

function verdict(q) {
  if (q.out_of_scope) return el("span", { className: "badge oos" }, "not covered");
  return q.grounded
    ? el("span", { className: "badge ok" }, "✓ checked")
    : el("span", { className: "badge warn" }, "not fully supported");
}

function question(q) {
  const cited = q.passages.filter((p) => p.cited);
  const shown = cited.length ? cited : q.passages;
  return el(
    "details",
    { className: "question" },
    el(
      "summary",
      {},
      el("span", { className: "q-text" }, q.text, readAs(q)),
      el("span", { className: "q-meta" }, `${utc(q.created_at)} · ${sectionTitle(q.section_id)} · `, verdict(q)),
    ),
    el(
      "div",
      { className: "q-body" },
      el(
        "dl",
        { className: "facts" },
        fact("Learner (pseudonym)", `${q.learner.slice(0, 12)}…`),
        fact("Module", `${q.module_id} (${q.module_version.slice(0, 12)})`),
        fact("Engine", [q.engine, q.model, q.prompt_version && `prompt ${q.prompt_version}`].filter(Boolean).join(" · ")),
        fact("Style", q.style),
        fact("Answered in", `${Math.round(q.latency_ms)} ms`),
        q.fallback_reason ? fact("Fell back because", q.fallback_reason) : null,
        q.redactions.length ? fact("Removed from the question", q.redactions.join(", ")) : null,
        q.feedback.length
          ? fact("Feedback", q.feedback.map((f) => (f.comment ? `${f.rating}: ${f.comment}` : f.rating)).join("; "))
          : null,
      ),
      el("h3", {}, "Answer"),
      el("div", { className: "answer" }, q.answer),
      q.unsupported_sentences.length
        ? [el("h4", {}, "Not supported by the passages"), el("ul", {}, q.unsupported_sentences.map((t) => el("li", {}, t)))]
        : null,
      el("h3", {}, cited.length ? "Cited passages" : "Retrieved passages (none cited)"),
      shown.length
        ? el(
            "ol",
            { className: "passages" },
            shown.map((p) =>
              el(
                "li",
                {},
                el("p", { className: "passage-head" }, `${p.section_title || p.section_id} · score ${p.score.toFixed(3)}`),
                p.text
                  ? el("blockquote", {}, shorten(p.text, 600))
                  : el("p", { className: "hint" }, "This passage is no longer in the module as served now."),
              ),
            ),
          )
        : empty("No passage."),
      q.tool_calls.length
        ? [
            el("h3", {}, "Calculator runs"),
            el(
              "ul",
              { className: "tools" },
              q.tool_calls.map((t) =>
                el(
                  "li",
                  {},
                  el("strong", {}, t.name),
                  el("code", {}, JSON.stringify(t.arguments)),
                  t.error ? el("span", { className: "error" }, ` error: ${t.error}`) : el("code", {}, `→ ${JSON.stringify(t.result)}`),
                ),
              ),
            ),
          ]
        : null,
    ),
  );
}

// The question as mentor read it (spelling corrected, a follow-up joined to what it continues), shown only where
// it differs from what the learner wrote: a wrong reading there is a misreading, not a gap in the module.
function readAs(q) {
  if (q.read_as === null || q.read_as === undefined) return null;
  const plain = (text) => text.toLowerCase().replace(/[\s?.!,;:]+/g, " ").trim();
  if (plain(q.read_as) === plain(q.text)) return null;
  return el(
    "span",
    { className: "q-read" },
    "read as: ",
    q.read_as ? el("q", {}, q.read_as) : el("em", {}, "no question (chat only)"),
  );
}

function fact(term, value) {
  return [el("dt", {}, term), el("dd", {}, value)];
}

// ------------------------------------------------------------------------------------------------ exports, erasure

async function download(button) {
  const format = button.dataset.format;
  button.disabled = true;
  button.setAttribute("aria-busy", "true");
  try {
    const response = await api("/v1/signals/export", { params: { ...filters(), format } });
    const blob = await response.blob();
    const named = /filename="([^"]+)"/.exec(response.headers.get("Content-Disposition") || "");
    const name = named ? named[1] : `mentor-signals.${format}`;
    const url = URL.createObjectURL(blob);
    const link = el("a", { href: url, download: name, hidden: true });
    document.body.append(link);
    link.click();
    link.remove();
    setTimeout(() => URL.revokeObjectURL(url), 30_000);
    say(`Downloaded ${name} (${Math.max(1, Math.round(blob.size / 1024))} KB).`);
  } catch (error) {
    failed(error);
  } finally {
    button.disabled = false;
    button.removeAttribute("aria-busy");
  }
}

function askToErase(event) {
  event.preventDefault();
  const learner = $("erase-id").value.trim();
  if (!learner) return;
  $("erase-text").textContent =
    `Every question, answer, rating and conversation of learner “${learner}” will be deleted. This cannot be undone.`;
  const dialog = $("erase-dialog");
  dialog.returnValue = "";
  dialog.showModal();
}

async function erase() {
  const dialog = $("erase-dialog");
  const input = $("erase-id");
  input.focus();
  if (dialog.returnValue !== "erase") return;
  const learner = input.value.trim();
  try {
    await api(`/v1/learners/${encodeURIComponent(learner)}`, { method: "DELETE" });
    input.value = "";
    resetPages();
    await Promise.all([loadSummary({ quiet: true }), loadPage()]);
    say(`Erased every record of learner “${learner}”.`, "done");
  } catch (error) {
    failed(error);
  }
}

// ------------------------------------------------------------------------------------------------ sign-in

function showBoard(signedIn) {
  $("sign-in").hidden = signedIn;
  $("board").hidden = !signedIn;
  $("sign-out").hidden = !signedIn;
}

function signOut(message = "") {
  sessionStorage.removeItem(TOKEN_KEY);
  clearInterval(state.timer);
  state.timer = null;
  showBoard(false);
  // Leave no analyst data in the page once the token is gone.
  for (const id of ["heatmap", "heatmap-table", "heatmap-legend", "gaps", "asked", "feedback-sections", "feedback-prompts", "tools", "grounding", "fallbacks", "engines", "browser", "browser-range"]) {
    fill(id);
  }
  $("sign-in-error").textContent = message;
  say(message ? "" : "Signed out.");
  $("token").value = "";
  $("token").focus();
}

async function openBoard() {
  showBoard(true);
  say("Loading…");
  try {
    await loadModules();
    resetPages();
    await loadSummary();
    await loadPage();
  } catch (error) {
    failed(error);
    return;
  }
  clearInterval(state.timer);
  state.timer = setInterval(() => {
    if (document.visibilityState === "visible" && sessionStorage.getItem(TOKEN_KEY)) {
      loadSummary({ quiet: true }).catch(failed);
    }
  }, POLL_MS);
}

async function signIn(event) {
  event.preventDefault();
  const token = $("token").value.trim();
  if (!token) return;
  sessionStorage.setItem(TOKEN_KEY, token);
  $("token").value = "";
  $("sign-in-error").textContent = "";
  await openBoard();
  if ($("board").hidden === false) $("main").focus();
}

async function apply(event) {
  event?.preventDefault();
  const { since, until } = filters();
  if (since && until && since >= until) {
    say("“From” must not be after “To”.", "error");
    return;
  }
  resetPages();
  try {
    await loadSummary();
    await loadPage();
  } catch (error) {
    failed(error);
  }
}

function start() {
  $("sign-in-form").addEventListener("submit", signIn);
  $("sign-out").addEventListener("click", () => signOut());
  $("filters").addEventListener("submit", apply);
  $("refresh").addEventListener("click", () => apply());
  $("browser-filters").addEventListener("change", () => {
    resetPages();
    loadPage().catch(failed);
  });
  $("prev").addEventListener("click", () => {
    state.page = Math.max(0, state.page - 1);
    loadPage().catch(failed);
  });
  $("next").addEventListener("click", () => {
    state.cursors[state.page + 1] = state.next;
    state.page += 1;
    loadPage().catch(failed);
  });
  for (const button of document.querySelectorAll("button.export")) {
    button.addEventListener("click", () => download(button));
  }
  $("erase-form").addEventListener("submit", askToErase);
  $("erase-dialog").addEventListener("close", erase);
  if (sessionStorage.getItem(TOKEN_KEY)) {
    openBoard();
  } else {
    showBoard(false);
  }
}

start();
