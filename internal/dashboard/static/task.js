// The task page's live output: the text a running step's model writes,
// shown under that step as it comes, from the page's output stream
// (GET /tasks/{id}/output, Server-Sent Events). Each "output" message is a
// piece of one call's text: {"step_no", "call_index", "offset", "text"},
// where offset counts the characters (code points) of the call's text
// before the piece; the page keeps text[:offset] + text, so a piece with
// offset 0 (the text so far, sent to a page that joins mid-call) replaces
// what it has. Text is only ever set as text, never parsed as HTML.
(function () {
  'use strict';
  var box = document.getElementById('live-output');
  if (!box || !window.EventSource) {
    return;
  }
  var calls = new Map();

  function codePoints(s) {
    var n = 0;
    for (var it = s[Symbol.iterator](), c = it.next(); !c.done; c = it.next()) {
      n++;
    }
    return n;
  }

  // view returns the call's text and the element showing it, made on
  // its first piece: a row under the step's own when the table has it,
  // else a block under the table (a step that began after the page).
  function view(step, call) {
    var key = step + '.' + call;
    var c = calls.get(key);
    if (c) {
      return c;
    }
    var pre = document.createElement('pre');
    pre.className = 'text live-text';
    pre.setAttribute('aria-live', 'polite');
    var row = document.querySelector('tr[data-step="' + key + '"]');
    if (row) {
      var tr = document.createElement('tr');
      tr.className = 'live-row';
      tr.dataset.liveStep = key;
      var td = document.createElement('td');
      td.colSpan = row.children.length;
      td.appendChild(pre);
      tr.appendChild(td);
      var after = row.nextElementSibling;
      (after && after.classList.contains('detail') ? after : row).after(tr);
    } else {
      var block = document.createElement('div');
      block.className = 'live-call';
      block.dataset.liveStep = key;
      var h = document.createElement('h3');
      h.textContent = 'Step ' + key + ', as it is written';
      block.append(h, pre);
      box.appendChild(block);
    }
    c = {text: '', length: 0, pre: pre};
    calls.set(key, c);
    return c;
  }

  var source = new EventSource(box.dataset.src);
  source.addEventListener('output', function (e) {
    var d;
    try {
      d = JSON.parse(e.data);
    } catch (_) {
      return;
    }
    if (!d || !Number.isInteger(d.step_no) || !Number.isInteger(d.call_index) ||
        !Number.isInteger(d.offset) || d.offset < 0 || typeof d.text !== 'string') {
      return;
    }
    var c = view(d.step_no, d.call_index);
    if (d.offset >= c.length) {
      // The next piece; past a gap (none is expected) it still follows
      // what the page has.
      c.text += d.text;
      c.length += codePoints(d.text);
    } else {
      c.text = Array.from(c.text).slice(0, d.offset).join('') + d.text;
      c.length = d.offset + codePoints(d.text);
    }
    c.pre.textContent = c.text;
  });
})();
