// The status board: what a supervisor must see whatever view is open (a failing
// sync, a name claimed twice; later the trust issue's revoked or rotated keys and
// chain gaps). Each source owns its own lines and replaces them whole; the board
// shows every source's lines above every view, worst first, and hides itself when
// nothing is wrong. A source adds nothing here but a call to set().

import { h, fill } from "./util.js";

const LEVELS = { error: 0, warning: 1 };

export class StatusBoard {
  constructor(el) {
    this.el = el;
    this.sources = new Map();
  }

  /**
   * Replace what ``source`` says. items: [{level: "error"|"warning", title, text, href?, link?}];
   * an empty list (or none) clears it.
   */
  set(source, items) {
    if (items && items.length) this.sources.set(source, items);
    else this.sources.delete(source);
    this.render();
  }

  /** The worst level any source reports, or null when all is well. */
  level() {
    let worst = null;
    for (const items of this.sources.values()) {
      for (const it of items) if (worst === null || LEVELS[it.level] < LEVELS[worst]) worst = it.level;
    }
    return worst;
  }

  render() {
    const lines = [];
    for (const [source, items] of this.sources) {
      for (const it of items) lines.push({ source, ...it });
    }
    lines.sort((a, b) => (LEVELS[a.level] ?? 9) - (LEVELS[b.level] ?? 9));
    fill(this.el, lines.map((it) => h("div", { class: `status-line ${it.level}`, dataset: { source: it.source } },
      h("strong", {}, it.title), it.text ? `: ${it.text} ` : " ",
      it.href ? h("a", { href: it.href }, it.link || "details") : null)));
    this.el.hidden = lines.length === 0;
    this.el.dataset.level = this.level() || "";
  }
}
