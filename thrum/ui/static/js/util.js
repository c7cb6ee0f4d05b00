// Small DOM and formatting helpers. Text always goes in through textContent:
// nothing a message contains is ever parsed as HTML.

/** Create an element: h("div", {class: "x", dataset: {id: 1}, onclick: fn}, child, "text", ...). */
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  if (attrs) {
    for (const [key, value] of Object.entries(attrs)) {
      if (value === undefined || value === null || value === false) continue;
      if (key === "class") el.className = value;
      else if (key === "dataset") Object.assign(el.dataset, value);
      else if (key.startsWith("on") && typeof value === "function") el.addEventListener(key.slice(2), value);
      else if (key === "text") el.textContent = value;
      else if (value === true) el.setAttribute(key, "");
      else el.setAttribute(key, String(value));
    }
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const child of children) {
    if (child === undefined || child === null || child === false) continue;
    if (Array.isArray(child)) append(el, child);
    else el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

/** Replace an element's children. */
export function fill(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

const pad = (n) => String(n).padStart(2, "0");
const MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];

/** "14:03" today, "Mar 4 14:03" this year, "2025-03-04 14:03" before (local time). */
export function shortTime(iso) {
  if (!iso) return "";
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return iso;
  const now = new Date();
  const hm = `${pad(d.getHours())}:${pad(d.getMinutes())}`;
  if (d.toDateString() === now.toDateString()) return hm;
  if (d.getFullYear() === now.getFullYear()) return `${MONTHS[d.getMonth()]} ${d.getDate()} ${hm}`;
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${hm}`;
}

/** "3 min ago", "2 h ago", "5 d ago" — for last-seen columns. */
export function ago(iso) {
  if (!iso) return "never";
  const ms = Date.now() - new Date(iso).getTime();
  if (Number.isNaN(ms)) return iso;
  const s = Math.max(0, Math.round(ms / 1000));
  if (s < 60) return `${s} s ago`;
  if (s < 3600) return `${Math.round(s / 60)} min ago`;
  if (s < 86400) return `${Math.round(s / 3600)} h ago`;
  return `${Math.round(s / 86400)} d ago`;
}

/** Call fn at most once per `ms`, after the last call (trailing). */
export function debounce(fn, ms) {
  let timer = null;
  const run = (...args) => {
    clearTimeout(timer);
    timer = setTimeout(() => { timer = null; fn(...args); }, ms);
  };
  run.now = (...args) => { clearTimeout(timer); timer = null; fn(...args); };
  return run;
}

/** "type:value" -> {type, value}, or null when it is not of that form. */
export function parseTag(text) {
  const t = (text || "").trim();
  const i = t.indexOf(":");
  if (i <= 0 || i === t.length - 1) return null;
  return { type: t.slice(0, i).trim(), value: t.slice(i + 1).trim() };
}

/** A short message at the bottom of the window. */
export function toast(text, kind = "info") {
  const box = document.getElementById("toasts");
  if (!box) return;
  const el = h("div", { class: `toast ${kind}`, role: kind === "error" ? "alert" : "status" }, text);
  box.append(el);
  setTimeout(() => el.remove(), kind === "error" ? 8000 : 4000);
}

/** The message of an RPC error, with close matches when the daemon suggested some. */
export function errorText(err) {
  let text = (err && err.message) || String(err);
  const close = err && err.data && err.data.close_matches;
  if (Array.isArray(close) && close.length && !close.some((m) => text.includes(String(m)))) {
    text += ` (did you mean ${close.map((m) => "@" + String(m).replace(/^@+/, "")).join(", ")}?)`;
  }
  return text;
}
