// turnledger serve: the scrubber and the live view. Everything from the server is
// put into the page with textContent (never innerHTML): transcript text is untrusted.
"use strict";

function el(tag, cls, text) {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  if (text !== undefined) node.textContent = text;
  return node;
}

async function getJSON(url) {
  const answer = await fetch(url, { headers: { Accept: "application/json" }, credentials: "same-origin" });
  if (!answer.ok) throw new Error("HTTP " + answer.status);
  return answer.json();
}

function renderHistory(list, messages) {
  list.replaceChildren();
  for (const m of messages) {
    const item = el("li", "msg role-" + m.role + (m.kind === "breadcrumb" ? " breadcrumb" : ""));
    item.append(el("span", "role", m.kind === "breadcrumb" ? "trim" : m.role));
    if (m.text) item.append(el("span", "text", m.text));
    for (const c of m.tool_calls) item.append(el("pre", "arguments", "-> " + c.name + " " + c.arguments));
    for (const r of m.tool_results) item.append(el("pre", "tool-output", "[" + (r.name || r.call_id) + (r.is_error ? " error" : "") + "] " + r.content));
    list.append(item);
  }
}

function refs(recalled) {
  return recalled.map(function (r) { return r.key + (r.score === null ? "" : " (" + r.score.toFixed(3) + ")"); }).join(", ") || "nothing";
}

function setupScrubber() {
  const slider = document.getElementById("scrubber");
  if (!slider) return;
  const status = document.getElementById("scrub-status");
  const index = document.getElementById("scrub-index");
  const history = document.getElementById("scrub-history");
  const memory = document.getElementById("scrub-memory");
  const costs = document.getElementById("scrub-costs");
  let timer = null;
  let asked = 0;
  async function show() {
    const ticket = ++asked;
    const at = slider.value;
    try {
      const s = await getJSON("/api/sessions/" + slider.dataset.stream + "/at?index=" + encodeURIComponent(at));
      if (ticket !== asked) return;
      index.textContent = String(s.index + 1);
      status.textContent = "as of position " + s.position + " (" + s.type + "): " + s.replay.messages + " visible message(s), " + s.replay.turns_completed + " turn(s) completed" + (s.replay.ok ? "" : ", DIGEST DIFFERS");
      status.dataset.position = String(s.position);
      renderHistory(history, s.messages);
      memory.replaceChildren(
        el("p", null, s.memory.keys.length + " entr" + (s.memory.keys.length === 1 ? "y" : "ies") + " stored: " + (s.memory.keys.join(", ") || "none")),
        el("p", null, "last recall injected " + s.memory.injected_chars + " characters: " + refs(s.memory.recalled)),
        el("p", "next-recall", s.memory.next === null
          ? "no later turn recalled anything in this session"
          : "the next turn (" + s.memory.next.turn_id + ") was given " + s.memory.next.injected_chars + " characters: " + refs(s.memory.next.recalled)),
      );
      costs.replaceChildren(el("p", null, s.costs.calls + " call(s), " + s.costs.input_tokens + " in / " + s.costs.output_tokens + " out tokens, $" + s.costs.cost_usd.toFixed(6)));
    } catch (err) {
      status.textContent = "could not load that position: " + err.message;
    }
  }
  slider.addEventListener("input", function () { clearTimeout(timer); timer = setTimeout(show, 120); });
  show();
}

function setupLive() {
  const live = document.getElementById("live");
  if (!live) return;
  const list = document.getElementById("live-events");
  const status = document.getElementById("live-status");
  const count = document.getElementById("event-count");
  let head = Number(live.dataset.head);
  async function poll() {
    try {
      const answer = await getJSON("/api/sessions/" + live.dataset.stream + "/events?after=" + head);
      for (const e of answer.events) {
        const item = el("li", "live-event");
        item.dataset.version = String(e.version);
        item.append(el("span", "type", e.type));
        for (const i of e.items) {
          const parts = [];
          for (const k in i) if (k !== "event" && k !== "at") parts.push(k + "=" + (typeof i[k] === "object" ? JSON.stringify(i[k]) : String(i[k])));
          item.append(el("span", "detail", " " + parts.join(" ")));
        }
        list.prepend(item);
        head = Math.max(head, e.version);
      }
      if (answer.events.length && count) count.textContent = String(Number(count.textContent) + answer.events.length);
      status.textContent = "following new events (head version " + head + ")";
    } catch (err) {
      status.textContent = "live view paused: " + err.message;
    }
    setTimeout(poll, 1000);
  }
  setTimeout(poll, 1000);
}

document.addEventListener("DOMContentLoaded", function () { setupScrubber(); setupLive(); });
