// A virtual list of messages, newest first: a model of every row of the view
// (`total`, the server's count), some of them loaded, and in the DOM only the
// rows near the viewport, between two spacers that stand for the rest.
//
// - Rows are fetched by page number (message.list pages are offsets into the
//   same order), so any part of a 100,000-message history is one request away.
// - Heights are measured once a row is drawn; unmeasured rows count as the
//   running average. The scroll position is anchored to the first visible row,
//   so rows measured, inserted or removed above it never move what is on screen.
// - Live rows go in at their place in the order (a message synced from elsewhere
//   can be older than the top); where that place is in a part not loaded yet, an
//   empty row stands for it until its page is read.
// - A page fetched while rows were inserted or removed is shifted by what
//   changed meanwhile, and every id is in the model at most once.
// - Memory is bounded too: beyond `MAX_LOADED` loaded rows, the pages farthest
//   from the viewport are forgotten (they are read again when scrolled to).

import { h } from "./util.js";

const PAGE = 100;
const OVERSCAN = 900;          // px drawn beyond each edge of the viewport
const MAX_LOADED = 3000;       // loaded rows kept in memory
const MAX_INFLIGHT = 2;

/** Newest first: (created_at desc, message_id desc), the order of message.list. */
export function newestFirst(a, b) {
  if (a.created_at !== b.created_at) return a.created_at > b.created_at ? -1 : 1;
  if (a.message_id === b.message_id) return 0;
  return a.message_id > b.message_id ? -1 : 1;
}

export class VirtualList {
  /**
   * opts: {scroller, fetchPage(page, size) -> Promise<{messages, total}>, render(item, index) -> Element,
   * divider(index) -> label | null, estimate, empty, onChange(), onAbove(n)}
   */
  constructor(opts) {
    this.opts = opts;
    this.scroller = opts.scroller;
    this.items = [];
    this.heights = [];           // px; -1: not measured
    this.byId = new Map();
    this.rows = new Map();       // key -> row element in the DOM now
    this.average = opts.estimate || 80;
    this.measuredSum = 0;
    this.measuredCount = 0;
    this.offsets = new Float64Array(1);
    this.dirtyFrom = 0;
    this.changes = [];           // [index, +1 | -1] since the model was made: to shift late pages
    this.inflight = new Set();
    this.fetchedAt = new Map();  // page -> when it was last read (a page that fills nothing waits)
    this.anchor = null;          // what stays put on screen while the model changes (captureAnchor)
    this.loaded = 0;
    this.started = false;
    this.selectedId = null;
    this.first = 0;
    this.last = -1;
    this.el = h("div", { class: "vlist", role: "feed", "aria-busy": "true" });
    this.top = h("div", { class: "vl-spacer" });
    this.win = h("div", { class: "vl-window" });
    this.bottom = h("div", { class: "vl-spacer" });
    this.status = h("div", { class: "list-status" });
    this.el.append(this.top, this.win, this.bottom, this.status);
    this.frame = null;
    this.onScroll = () => this.schedule();
    this.width = 0;
    this.resize = new ResizeObserver(() => {
      const width = this.el.clientWidth;
      if (width === this.width) return;           // only a new width changes row heights
      this.width = width;
      this.captureAnchor();
      this.heights = this.heights.map((x) => (x < 0 ? x : -1));   // new width: measure again
      this.dirtyFrom = 0;
      this.schedule();
    });
  }

  get total() {
    return this.items.length;
  }

  /** Load the first page; resolves once it is drawn. */
  async start() {
    this.scroller.style.overflowAnchor = "none";   // the list anchors itself; the browser's would move it twice
    this.scroller.addEventListener("scroll", this.onScroll, { passive: true });
    this.resize.observe(this.el);
    await this.fetch(1);
    this.started = true;
    this.el.setAttribute("aria-busy", "false");
    this.draw();
  }

  destroy() {
    this.scroller.removeEventListener("scroll", this.onScroll);
    this.resize.disconnect();
    if (this.frame) cancelAnimationFrame(this.frame);
    this.destroyed = true;
  }

  /** Forget everything and read the first page again (after a gap nothing can replay). */
  async reset() {
    this.items = [];
    this.heights = [];
    this.byId.clear();
    this.rows.clear();
    this.win.replaceChildren();
    this.changes = [];
    this.fetchedAt.clear();
    this.loaded = 0;
    this.dirtyFrom = 0;
    this.anchor = null;
    this.settled = null;
    await this.fetch(1);
    this.draw();
  }

  has(id) {
    return this.byId.has(id);
  }

  get(id) {
    return this.byId.get(id) || null;
  }

  indexOf(id) {
    const item = this.byId.get(id);
    return item ? this.items.indexOf(item) : -1;
  }

  // ------------------------------------------------------------------ the model

  async fetch(page) {
    if (this.inflight.has(page)) return;
    this.inflight.add(page);
    const mark = this.changes.length;
    try {
      const result = await this.opts.fetchPage(page, PAGE);
      if (this.destroyed) return;
      this.apply(page, result, mark);
    } catch (err) {
      this.status.textContent = `could not load messages: ${err.message}`;
    } finally {
      this.inflight.delete(page);
    }
  }

  apply(page, result, mark) {
    this.captureAnchor();
    const base = (page - 1) * PAGE;
    // Where the page's rows are in the model now: rows inserted or removed since the
    // request moved them, unless the server had counted those changes already (a
    // notification can arrive before an answer computed after it). A row both sides
    // know says which: the page is placed by it; without one, by what changed since.
    const later = this.changes.slice(mark);
    let shift = null;
    for (let j = 0; j < result.messages.length && shift === null; j += 1) {
      const known = this.byId.get(result.messages[j].message_id);
      const k = known ? this.items.indexOf(known) : -1;
      if (k >= 0) shift = k - (base + j);
    }
    const moved = (i) => {
      if (shift !== null) return i + shift;
      for (const [at, d] of later) if (at <= i) i += d;
      return i;
    };
    const total = Math.max(0, (result.total || 0) + (shift !== null ? shift : later.reduce((n, [, d]) => n + d, 0)));
    if (total > this.items.length) this.grow(total - this.items.length);
    else if (total < this.items.length && !later.length) this.shrinkTo(total);
    result.messages.forEach((m, j) => {
      const idx = moved(base + j);
      if (idx < 0 || idx >= this.items.length) return;
      const known = this.byId.get(m.message_id);
      if (known && this.items[idx] === known) return;
      // the server is right about where a message is: one of ours elsewhere, or another
      // one here, is forgotten (and read again where it really is)
      if (known) this.forgetAt(this.items.indexOf(known));
      if (this.items[idx]) this.forgetAt(idx);
      this.items[idx] = m;
      this.byId.set(m.message_id, m);
      this.loaded += 1;
    });
    this.fetchedAt.set(page, performance.now());
    this.dirtyFrom = Math.max(0, Math.min(this.dirtyFrom, moved(base)));
    this.trim();
    this.updateStatus();
    this.schedule();
  }

  forgetAt(index) {
    const m = this.items[index];
    if (!m) return;
    this.byId.delete(m.message_id);
    this.items[index] = null;
    this.loaded -= 1;
  }

  grow(n) {
    for (let k = 0; k < n; k += 1) {
      this.items.push(null);
      this.heights.push(-1);
    }
  }

  shrinkTo(n) {
    for (const m of this.items.splice(n)) {
      if (m) {
        this.byId.delete(m.message_id);
        this.loaded -= 1;
      }
    }
    this.heights.length = n;
    this.dirtyFrom = Math.min(this.dirtyFrom, n);
  }

  /** Put a new message at its place (newest first). Returns its index, or -1 when known. */
  insert(item, order = newestFirst) {
    if (this.byId.has(item.message_id)) return -1;
    this.captureAnchor();
    const n = this.items.length;
    let at = 0;
    if (n && !(this.items[0] && order(item, this.items[0]) <= 0)) {
      // not the newest: just after the last loaded row that is newer than it
      let newer = -1;
      for (let k = 0; k < n; k += 1) {
        const m = this.items[k];
        if (!m) continue;
        if (order(m, item) < 0) newer = k;
        else break;
      }
      at = newer + 1;
    }
    // in a part not loaded, its exact place is unknown: an empty row stands for it
    const exact = at < n ? this.items[at] !== null : n === 0 || this.items[n - 1] !== null;
    this.items.splice(at, 0, exact ? item : null);
    this.heights.splice(at, 0, -1);
    if (exact) {
      this.byId.set(item.message_id, item);
      this.loaded += 1;
    }
    this.changes.push([at, 1]);
    this.dirtyFrom = Math.min(this.dirtyFrom, at);
    if (this.opts.onAbove && this.anchor && !this.anchor.top && at <= this.anchorIndex(this.anchor)) this.opts.onAbove(1);
    this.updateStatus();
    this.schedule();
    return at;
  }

  /** Take a message out (it left the view). Unknown ids: everything not loaded is read again. */
  remove(id) {
    const item = this.byId.get(id);
    if (!item) {
      this.forgetFrom(this.items.indexOf(null));
      return;
    }
    this.captureAnchor();
    const at = this.items.indexOf(item);
    this.items.splice(at, 1);
    this.heights.splice(at, 1);
    this.byId.delete(id);
    this.loaded -= 1;
    this.changes.push([at, -1]);
    this.dirtyFrom = Math.min(this.dirtyFrom, at);
    this.updateStatus();
    this.schedule();
  }

  /** Forget the loaded rows from ``index`` on (their offsets may be wrong): they are read again. */
  forgetFrom(index) {
    if (index < 0) return;
    for (let k = index; k < this.items.length; k += 1) this.forgetAt(k);
    this.fetchedAt.clear();
    this.schedule();
  }

  /** Merge fields into a loaded message and redraw it. */
  update(id, patch) {
    const item = this.byId.get(id);
    if (!item) return false;
    this.captureAnchor();
    Object.assign(item, patch);
    item._v = (item._v || 0) + 1;
    const at = this.items.indexOf(item);
    if (at >= 0) this.heights[at] = -1;
    this.dirtyFrom = Math.min(this.dirtyFrom, Math.max(0, at));
    this.schedule();
    return true;
  }

  /** Redraw every row (the context they are drawn in changed). */
  repaint() {
    for (const m of this.byId.values()) m._v = (m._v || 0) + 1;
    this.schedule();
  }

  trim() {
    if (this.loaded <= MAX_LOADED) return;
    const centre = Math.floor((this.first + this.last) / 2);
    const pages = Math.ceil(this.items.length / PAGE);
    const byDistance = [...Array(pages).keys()].sort(
      (a, b) => Math.abs(b * PAGE - centre) - Math.abs(a * PAGE - centre));
    for (const p of byDistance) {
      if (this.loaded <= MAX_LOADED * 0.8) break;
      if (p * PAGE <= this.last + PAGE && (p + 1) * PAGE >= this.first - PAGE) continue;
      for (let k = p * PAGE; k < Math.min(this.items.length, (p + 1) * PAGE); k += 1) {
        if (this.items[k] && this.items[k].message_id !== this.selectedId) this.forgetAt(k);
      }
      this.fetchedAt.delete(p + 1);
    }
  }

  updateStatus() {
    if (!this.started && !this.items.length && this.inflight.size) return;
    this.status.textContent = this.items.length === 0 ? (this.opts.empty || "No messages.")
      : this.last >= this.items.length - 1 && this.items[this.items.length - 1] ? "— the beginning —" : "";
    if (this.opts.onChange) this.opts.onChange();
  }

  // ------------------------------------------------------------------ geometry

  heightAt(i) {
    const x = this.heights[i];
    return x >= 0 ? x : this.average;
  }

  ensureOffsets() {
    const n = this.items.length;
    if (this.offsets.length !== n + 1) {
      const old = this.offsets;
      this.offsets = new Float64Array(n + 1);
      this.offsets.set(old.subarray(0, Math.min(old.length, this.dirtyFrom + 1, n + 1)));
    }
    for (let i = Math.max(0, this.dirtyFrom); i < n; i += 1) this.offsets[i + 1] = this.offsets[i] + this.heightAt(i);
    this.dirtyFrom = n;
  }

  /** The row at ``y`` px from the list's top. */
  indexAt(y) {
    const o = this.offsets;
    let lo = 0;
    let hi = this.items.length - 1;
    if (hi < 0) return 0;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (o[mid] <= y) lo = mid;
      else hi = mid - 1;
    }
    return lo;
  }

  listTop() {
    return this.el.getBoundingClientRect().top - this.scroller.getBoundingClientRect().top + this.scroller.scrollTop;
  }

  // ------------------------------------------------------------------ drawing

  schedule() {
    if (this.frame || this.destroyed) return;
    this.frame = requestAnimationFrame(() => {
      this.frame = null;
      this.draw();
    });
  }

  /** Remember which row is at the top of the viewport, before the model changes under it. */
  captureAnchor() {
    if (this.anchor || !this.started) return;
    const at = this.scroller.scrollTop;
    if (this.settled && Math.abs(at - this.settled.top) < 1) {
      // nobody scrolled since the last draw: keep its anchor (re-measuring it from a
      // scroll position the browser rounded would creep by a fraction of a pixel each time)
      this.anchor = { ...this.settled.anchor, at };
      return;
    }
    this.ensureOffsets();
    const y = this.scroller.scrollTop - this.listTop();
    if (y <= 2) {
      this.anchor = { top: true, at };
      return;
    }
    const index = this.indexAt(y);
    const m = this.items[index];
    this.anchor = { id: m ? m.message_id : null, index, mark: this.changes.length, shift: y - this.offsets[index], at };
  }

  anchorIndex(a) {
    if (a.id && this.byId.has(a.id)) return this.indexOf(a.id);
    let index = a.index;
    for (const [at, d] of this.changes.slice(a.mark)) if (at <= index) index += d;
    return Math.max(0, Math.min(index, this.items.length - 1));
  }

  draw() {
    if (this.destroyed) return;
    if (this.anchor && Math.abs(this.anchor.at - this.scroller.scrollTop) >= 1) {
      this.anchor = null;                 // the reader scrolled since: keep what is in view now
      this.settled = null;
    }
    if (!this.anchor) this.captureAnchor();
    const anchor = this.anchor || { top: true };
    this.anchor = null;
    for (let pass = 0; pass < 4; pass += 1) {
      this.ensureOffsets();
      const listTop = this.listTop();
      if (!anchor.top && this.items.length) {
        const want = listTop + this.offsets[this.anchorIndex(anchor)] + anchor.shift;
        if (Math.abs(this.scroller.scrollTop - want) > 0.5) this.scroller.scrollTop = want;
      }
      if (!this.layout(listTop)) break;
    }
    let kept = anchor;
    if (!anchor.top && this.items.length) {            // by id from now on, where the row has loaded
      const index = this.anchorIndex(anchor);
      const m = this.items[index];
      kept = { id: m ? m.message_id : null, index, mark: this.changes.length, shift: anchor.shift };
    }
    this.settled = { anchor: kept, top: this.scroller.scrollTop };
    this.load();
    if (this.opts.onChange) this.opts.onChange();
  }

  /** Draw the rows in view; measure them. True when a measured height changed. */
  layout(listTop) {
    const n = this.items.length;
    const view = this.scroller.clientHeight || window.innerHeight;
    const y0 = this.scroller.scrollTop - listTop - OVERSCAN;
    const y1 = this.scroller.scrollTop - listTop + view + OVERSCAN;
    const first = n ? this.indexAt(Math.max(0, y0)) : 0;
    const last = n ? this.indexAt(Math.max(0, y1)) : -1;
    this.first = first;
    this.last = last;
    const wanted = [];
    const keep = new Map();
    for (let i = first; i <= last; i += 1) {
      const m = this.items[i];
      const label = m && this.opts.divider ? this.opts.divider(i) : null;
      const key = m ? `${m.message_id}:${m._v || 0}:${label || ""}:${m.message_id === this.selectedId}` : `-${i}`;
      let row = this.rows.get(key);
      if (!row || keep.has(key)) {
        row = m ? this.drawRow(m, i, label) : h("div", { class: "vl-row placeholder", "aria-hidden": "true" },
          h("div", { class: "msg ghost" }));
        if (!m) row.style.height = `${this.heightAt(i)}px`;
      }
      row.dataset.index = String(i);
      keep.set(key, row);
      wanted.push(row);
    }
    this.rows = keep;
    const same = wanted.length === this.win.children.length && wanted.every((r, k) => this.win.children[k] === r);
    if (!same) this.win.replaceChildren(...wanted);
    this.top.style.height = `${this.offsets[first] || 0}px`;
    this.bottom.style.height = `${Math.max(0, this.offsets[n] - (this.offsets[last + 1] || 0))}px`;
    let changed = false;
    for (const row of wanted) {
      if (row.classList.contains("placeholder")) continue;
      const i = Number(row.dataset.index);
      const height = row.getBoundingClientRect().height;
      if (height > 0 && Math.abs(height - this.heights[i]) > 0.5) {
        if (this.heights[i] < 0) {
          this.measuredSum += height;
          this.measuredCount += 1;
        }
        this.heights[i] = height;
        this.dirtyFrom = Math.min(this.dirtyFrom, i);
        changed = true;
      }
    }
    if (this.measuredCount) this.average = this.measuredSum / this.measuredCount;
    this.updateStatus();
    return changed;
  }

  drawRow(m, i, label) {
    const row = h("div", { class: "vl-row" });
    if (label) row.append(h("div", { class: `divider ${label.kind || ""}`, role: "separator" }, h("span", {}, label.text)));
    const el = this.opts.render(m, i);
    if (m.message_id === this.selectedId) el.classList.add("selected");
    row.append(el);
    return row;
  }

  /** Read the pages the drawn rows need that are not loaded (a few at a time). */
  load() {
    if (this.last < this.first) return;
    const now = performance.now();
    for (let i = this.first; i <= this.last && this.inflight.size < MAX_INFLIGHT; i += 1) {
      if (this.items[i] === null) {
        const page = Math.floor(i / PAGE) + 1;
        const recent = now - (this.fetchedAt.get(page) || -1e9) < 1000;
        if (!this.inflight.has(page) && !recent) this.fetch(page);
        else if (recent) setTimeout(() => this.schedule(), 1000);
        i = page * PAGE - 1;
      }
    }
  }

  // ------------------------------------------------------------------ moving around

  /** Scroll so that row ``index`` is in view (loading it if needed). */
  reveal(index, block = "nearest") {
    this.ensureOffsets();
    const top = this.listTop() + this.offsets[index];
    const bottom = top + this.heightAt(index);
    const view = this.scroller.clientHeight;
    const st = this.scroller.scrollTop;
    if (block === "start" || top < st) this.scroller.scrollTop = top - 8;
    else if (bottom > st + view) this.scroller.scrollTop = bottom - view + 8;
    this.draw();
  }

  select(id) {
    this.selectedId = id;
    this.repaint();
  }

  /** The element drawn for ``id`` (null when it is not in the DOM now). */
  element(id) {
    for (const row of this.win.children) {
      const el = row.lastElementChild;
      if (el && el.dataset.id === id) return el;
    }
    return null;
  }
}
