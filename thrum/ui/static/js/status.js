// The status board: what a supervisor must see whatever view is open (a failing
// sync, a name claimed twice, a writer's chain with a fork, a gap or a rollback). Each source owns its own lines and replaces them whole; the board
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

/**
 * The status board's lines for every writer's chain (sync.status's ``chains``, the same
 * as sync.chains): a fork or a broken link is an error (the key signs on two machines,
 * or was stolen), missing positions and rolled-back lines are warnings. A few lines
 * each, then how many more, so a remote that withheld much does not flood the board.
 */
export function chainLines(chains) {
  const SHOWN = 3;
  const out = [];
  const some = (items, make) => {
    items.slice(0, SHOWN).forEach((it) => out.push(make(it)));
    return items.length > SHOWN ? items.length - SHOWN : 0;
  };
  const faults = chains.faults || [];
  const moreFaults = some(faults, (f) => ({
    level: "error", title: f.kind === "fork" ? "Chain fork" : "Chain broken", text: f.text, href: "#/sync", link: "details",
  }));
  if (moreFaults) out.push({ level: "error", title: "Chains", text: `${moreFaults} more fork(s) or broken link(s)`, href: "#/sync" });
  const gaps = chains.gaps || [];
  const moreGaps = some(gaps, (g) => ({ level: "warning", title: "Chain gap", text: g.text, href: "#/sync", link: "details" }));
  if (moreGaps) out.push({ level: "warning", title: "Chains", text: `${moreGaps} more gap(s); ${chains.missing} position(s) missing in all`, href: "#/sync" });
  some(chains.rollbacks || [], (r) => ({ level: "warning", title: "Rollback", text: r.text, href: "#/sync", link: "details" }));
  return out;
}
