// The keyboard: j/k move through the list, Enter/o open, r reply, e edit (your own),
// / search, n new message, g then f/m/t/a/s go to a view, ? this help, Esc close.

import { h, fill } from "./util.js";

export const KEYS = [
  ["j / k", "next / previous message"],
  ["Enter or o", "open the message's thread"],
  ["r", "reply to the message"],
  ["e", "edit the message (your own)"],
  ["/", "search"],
  ["n", "new message"],
  ["g then f, m, t, a, s", "go to the feed, mentions, threads, agents, sync"],
  ["d", "compact / comfortable density"],
  ["?", "this help"],
  ["Esc", "close the thread or the dialog"],
];

const GO = { f: "#/feed", m: "#/mentions", t: "#/threads", a: "#/agents", s: "#/sync" };

export function installKeys(app) {
  let prefix = null;
  document.addEventListener("keydown", (ev) => {
    if (ev.ctrlKey || ev.metaKey || ev.altKey) return;
    if (ev.target.closest("input, textarea, select, dialog")) return;
    const view = app.view;
    const key = ev.key;
    if (prefix === "g") {
      prefix = null;
      if (GO[key]) {
        ev.preventDefault();
        app.go(GO[key]);
      }
      return;
    }
    const selected = () => (view && view.current ? view.current() : null);
    switch (key) {
      case "j":
      case "k":
        if (view && view.move) {
          ev.preventDefault();
          view.move(key === "j" ? 1 : -1);
        }
        break;
      case "Enter":
      case "o": {
        const m = selected();
        if (m && (key === "o" || !ev.target.closest(".msg"))) {
          ev.preventDefault();
          app.thread.open(m.message_id);
        }
        break;
      }
      case "r": {
        const m = selected() || (app.thread.isOpen && app.thread.focusId ? { message_id: app.thread.focusId } : null);
        if (m) {
          ev.preventDefault();
          app.thread.open(m.message_id, { reply: true });
        }
        break;
      }
      case "e": {
        const m = selected();
        if (m && app.me && m.agent_id === app.me && !m.deleted) {
          ev.preventDefault();
          app.edit.open(m);
        }
        break;
      }
      case "/":
        ev.preventDefault();
        app.focusSearch();
        break;
      case "n":
        ev.preventDefault();
        app.compose.open();
        break;
      case "d":
        ev.preventDefault();
        app.toggleDensity();
        break;
      case "g":
        prefix = "g";
        setTimeout(() => { prefix = null; }, 1500);
        break;
      case "?":
        ev.preventDefault();
        showHelp(document.getElementById("help"));
        break;
      case "Escape":
        if (app.thread.isOpen) app.thread.close();
        break;
      default:
    }
  });
}

export function showHelp(dialog) {
  fill(dialog, h("form", { method: "dialog", class: "help" },
    h("header", { class: "view-head" }, h("h2", {}, "Keyboard"), h("span", { class: "spacer" }),
      h("button", { type: "submit", class: "icon close", "aria-label": "Close" }, "✕")),
    h("table", { class: "kv keys" }, h("tbody", {}, KEYS.map(([k, what]) => h("tr", {},
      h("th", {}, h("kbd", {}, k)), h("td", {}, what)))))));
  dialog.showModal();
}
