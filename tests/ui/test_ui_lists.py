"""The page's own building blocks, run in the real browser on the real page: the
virtual list over 100,000 messages (issue 27 finding 7) and the Markdown renderer
against hostile input.

The list is fed by a page source of 100,000 generated messages (served like
message.list pages, at once) so that the test measures the list and not how fast a
daemon can be filled; test_ui_browser.py and test_ui_cockpit.py scroll real
daemons' lists, and scripts/bench_ui.py scrolls a real 100,000-message feed.
"""

from __future__ import annotations

import pytest

from browser_page import Page
from ui_helpers import browser_missing, start_browser, stop_browser

_missing = browser_missing()
pytestmark = pytest.mark.skipif(_missing is not None, reason=_missing or "")

N = 100_000


@pytest.fixture(scope="module")
def page(repo):
    driver = start_browser()
    p = Page(driver, repo)
    try:
        p.login()
        driver.set_script_timeout(120)
        yield p
    finally:
        stop_browser(driver)


SETUP = """
const { VirtualList } = await import('/static/js/vlist.js');
const { renderMessage } = await import('/static/js/messages.js');
window.__lab?.list?.destroy();
document.getElementById('lab')?.remove();
const host = document.createElement('div');
host.id = 'lab';
Object.assign(host.style, {position: 'fixed', inset: '60px 0 0 0', overflowY: 'auto', background: 'white', zIndex: 50});
document.body.append(host);
const N = arguments[0];
const base = Date.UTC(2026, 0, 31);
const item = (i) => ({
  message_id: 'msg_' + String(N - i).padStart(10, '0'), agent_id: 'agent' + (i % 20), thread_id: '',
  subject: i % 11 ? '' : 'subject ' + i,
  body: {format: 'markdown', structured: '',
         content: 'Message ' + i + (i % 7 ? '' : '\\n\\nwith a **second** paragraph\\n- and\\n- a list')},
  scopes: i % 5 ? [] : [{type: 'module', value: 'm' + (i % 3)}], refs: [], priority: 'normal',
  created_at: new Date(base - i * 97000).toISOString(), updated_at: '', deleted: false, is_read: false,
  edited: false, version: 0, reply_to: '',
});
window.__lab = {N, item, reads: 0, inserted: 0, delay: 1};   // ... counting what was inserted meanwhile
const list = new VirtualList({
  scroller: host,
  fetchPage: async (page, size) => {
    window.__lab.reads += 1;
    await new Promise((r) => setTimeout(r, window.__lab.delay));   // the answer is made after a while,
    const shift = window.__lab.inserted;
    const out = [];
    for (let k = (page - 1) * size; k < Math.min(N + shift, page * size); k += 1) {
      out.push(k < shift ? window.__lab.fresh[shift - 1 - k] : item(k - shift));
    }
    return {messages: out, total: N + shift};
  },
  render: (m) => renderMessage(m, {showRead: false}),
  estimate: 80,
});
window.__lab.list = list;
window.__lab.fresh = [];
host.append(list.el);
await list.start();
return list.total;
"""

SCROLL_THROUGH = """
const {list} = window.__lab;
const host = document.getElementById('lab');
const frame = () => new Promise((r) => requestAnimationFrame(() => r()));
let maxNodes = 0, maxRows = 0, maxLoaded = 0, steps = 0, lastIndex = -1;
const seen = new Set();
while (true) {
  host.scrollTop += arguments[0];
  await frame();
  await frame();
  for (let k = 0; k < 60 && host.querySelector('.vl-row.placeholder'); k += 1) await frame();
  steps += 1;
  maxNodes = Math.max(maxNodes, host.getElementsByTagName('*').length);
  maxRows = Math.max(maxRows, host.querySelectorAll('.msg').length);
  maxLoaded = Math.max(maxLoaded, list.loaded);
  for (const el of host.querySelectorAll('.msg[data-id]')) seen.add(el.dataset.id);
  if (host.scrollTop + host.clientHeight >= host.scrollHeight - 1) break;
  if (steps > 5000) break;
}
const ids = [...host.querySelectorAll('.msg[data-id]')].map((e) => e.dataset.id);
return {maxNodes, maxRows, maxLoaded, steps, last: ids[ids.length - 1], status: list.status.textContent,
        total: list.total, seen: seen.size};
"""


def test_the_virtual_list_keeps_the_dom_bounded_through_100000_messages(page):
    assert page.js_async(SETUP, N) == N
    stats = page.js_async(SCROLL_THROUGH, 60_000)
    assert stats["last"] == "msg_" + "1".zfill(10)  # the oldest message, at the very end
    assert stats["status"] == "— the beginning —"
    assert stats["maxRows"] <= 60, stats  # whatever the length: the rows in view and a margin
    assert stats["maxNodes"] <= 2_500, stats
    assert stats["maxLoaded"] <= 3_000, stats  # memory too: far pages are let go
    assert stats["steps"] > 50  # it really went through the whole length


def test_rows_are_read_by_page_and_every_one_is_drawn_in_order(page):
    page.js_async(SETUP, 1_000)
    ids = page.js_async(
        """
        const {list} = window.__lab;
        const host = document.getElementById('lab');
        const frame = () => new Promise((r) => requestAnimationFrame(() => r()));
        const order = [];
        const seen = new Set();
        while (true) {
          for (let k = 0; k < 60 && host.querySelector('.vl-row.placeholder'); k += 1) await frame();
          for (const el of host.querySelectorAll('.msg[data-id]')) {
            if (!seen.has(el.dataset.id)) order.push(el.dataset.id);
            seen.add(el.dataset.id);
          }
          if (host.scrollTop + host.clientHeight >= host.scrollHeight - 1) break;
          host.scrollTop += host.clientHeight * 0.9;
          await frame();
          await frame();
        }
        return order;
        """
    )
    assert ids == ["msg_" + str(1_000 - i).zfill(10) for i in range(1_000)]


def test_new_messages_above_never_move_what_you_are_reading(page):
    page.js_async(SETUP, 5_000)
    moved = page.js_async(
        """
        const {list, item} = window.__lab;
        const host = document.getElementById('lab');
        const frame = () => new Promise((r) => requestAnimationFrame(() => r()));
        window.__lab.delay = 40;                   // answers lag behind the inserts below
        host.scrollTop = 40000;
        await frame();
        await frame();
        for (let k = 0; k < 60 && host.querySelector('.vl-row.placeholder'); k += 1) await frame();
        await frame();
        const top = host.getBoundingClientRect().top;
        const pick = [...host.querySelectorAll('.msg[data-id]')].find((e) => e.getBoundingClientRect().top >= top);
        const before = pick.getBoundingClientRect().top;
        for (let k = 0; k < 25; k += 1) {          // a burst arrives while you read further down
          const m = item(-1 - k);
          m.message_id = 'msg_new_' + k;
          window.__lab.fresh.push(m);
          window.__lab.inserted += 1;
          list.insert(m);
          if (k % 5 === 0) list.forgetFrom(list.last + 1);   // and pages below are being read meanwhile
          await frame();
        }
        for (let k = 0; k < 60 && host.querySelector('.vl-row.placeholder'); k += 1) await frame();
        await new Promise((r) => setTimeout(r, 200));
        await frame();
        const again = host.querySelector(`.msg[data-id="${pick.dataset.id}"]`);
        if (!again) {
          return {lost: pick.dataset.id, index: list.indexOf(pick.dataset.id), first: list.first,
                  last: list.last, total: list.total, top: host.scrollTop};
        }
        return {moved: again.getBoundingClientRect().top - before, total: list.total,
                first: list.items[0].message_id, pill: list.total};
        """
    )
    assert "moved" in moved, moved
    assert abs(moved["moved"]) <= 1, moved
    assert moved["total"] == 5_025 and moved["first"] == "msg_new_24"


MARKDOWN = """
const { renderMarkdown } = await import('/static/js/markdown.js');
const out = {};
for (const [name, text] of Object.entries(arguments[0])) {
  const div = document.createElement('div');
  div.append(renderMarkdown(text));
  const bad = [...div.querySelectorAll('*')].filter((e) =>
    ['SCRIPT', 'IMG', 'IFRAME', 'OBJECT', 'EMBED', 'STYLE', 'SVG', 'FORM', 'INPUT'].includes(e.tagName.toUpperCase())
    || [...e.attributes].some((a) => a.name.startsWith('on') || a.name === 'style' || a.name === 'src'));
  out[name] = {html: div.innerHTML, text: div.textContent, bad: bad.length,
    links: [...div.querySelectorAll('a')].map((a) => [a.getAttribute('href'), a.getAttribute('rel'), a.textContent])};
}
return out;
"""

CASES = {
    "js": "[click me](javascript:alert(1))",
    "js_case": "[x](JaVaScRiPt:alert(1))",
    "js_space": "[x]( javascript:alert(1) )",
    "js_entity": "[x](&#106;avascript:alert(1))",
    "js_auto": "<javascript:alert(1)>",
    "data": "[x](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)",
    "vbscript": "[x](vbscript:msgbox(1))",
    "protocol_relative": "[x](//evil.example/a)",
    "code_html": "`<img src=x onerror=alert(1)>` and ``<script>x</script>``",
    "raw_html": '<script>alert(1)</script><img src=x onerror="alert(2)"><a href="javascript:x">a</a>',
    "fence_html": "```html\n<iframe src=javascript:alert(1)></iframe>\n```",
    "nested": "**bold *italic* bold** and ***both*** and *em **strong** em*",
    "unclosed": "*not closed and **neither",
    "snake": "call snake_case_name and __init__ and a_b_c",
    "link_ok": "see [the docs](https://example.com/a_(b)?q=1) and https://example.com/x. and <mailto:a@b.example>",
    "link_label_code": "[`code` and *em*](https://example.com)",
    "heading_list_quote": "# Title\n- one\n- two\n\n1. first\n2. second\n\n> quoted <b>",
    "many_stars": "*" * 20_000,
    "many_brackets": "[" * 5_000 + "](x)",
}


def test_markdown_renders_safely(page):
    r = page.js_async(MARKDOWN, CASES)
    assert all(v["bad"] == 0 for v in r.values()), {k: v["html"][:200] for k, v in r.items() if v["bad"]}
    for name in ("js", "js_case", "js_space", "js_entity", "js_auto", "data", "vbscript", "protocol_relative"):
        assert r[name]["links"] == [], (name, r[name]["html"])
        assert r[name]["text"].strip(), name  # still shown, as text
    assert "javascript:alert(1)" in r["js"]["text"]
    code = r["code_html"]["html"]
    assert "<code>&lt;img src=x onerror=alert(1)&gt;</code>" in code
    assert "<code>&lt;script&gt;x&lt;/script&gt;</code>" in code
    assert r["raw_html"]["text"].startswith("<script>alert(1)</script>")
    assert '<pre><code data-lang="html">&lt;iframe' in r["fence_html"]["html"]
    nested = r["nested"]["html"]
    assert "<strong>bold <em>italic</em> bold</strong>" in nested
    assert "<strong><em>both</em></strong>" in nested or "<em><strong>both</strong></em>" in nested
    assert "<em>em <strong>strong</strong> em</em>" in nested
    assert "<em>" not in r["unclosed"]["html"] and "<strong>" not in r["unclosed"]["html"]
    assert "<em>" not in r["snake"]["html"] and "snake_case_name" in r["snake"]["text"]
    assert r["link_ok"]["links"] == [
        ["https://example.com/a_(b)?q=1", "noopener noreferrer", "the docs"],
        ["https://example.com/x", "noopener noreferrer", "https://example.com/x"],
        ["mailto:a@b.example", "noopener noreferrer", "mailto:a@b.example"],
    ]
    assert r["link_label_code"]["html"].count("<code>code</code>") == 1
    hlq = r["heading_list_quote"]["html"]
    assert '<p class="md-h md-h1">Title</p>' in hlq and "<ul><li>one</li><li>two</li></ul>" in hlq
    assert "<ol><li>first</li><li>second</li></ol>" in hlq and "<blockquote>quoted &lt;b&gt;</blockquote>" in hlq
    assert r["many_stars"]["text"] == "*" * 20_000
