"use strict";
(function () {
  const started = performance.now();
  const D = JSON.parse(document.getElementById("data").textContent);
  const S = D.steps;
  const NS = "http://www.w3.org/2000/svg";

  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = text;
    return e;
  }
  function svg(tag, attrs, parent) {
    const e = document.createElementNS(NS, tag);
    for (const k in attrs) e.setAttribute(k, attrs[k]);
    if (parent) parent.appendChild(e);
    return e;
  }
  function secs(ms) { return (ms / 1000).toFixed(ms < 10000 ? 3 : 2) + " s"; }
  function dur(ms) {
    if (ms === undefined || ms === null) return "";
    if (ms < 1) return ms.toFixed(2) + " ms";
    if (ms < 1000) return ms.toFixed(ms < 10 ? 1 : 0) + " ms";
    return (ms / 1000).toFixed(2) + " s";
  }
  function label(s) { return s.final ? "final" : "#" + s.n; }
  // Links go only to files of the trace: relative URLs, never another
  // scheme (agentbox view writes no other; this holds whatever the data).
  function relative(u) {
    return typeof u === "string" && u !== "" && !/^[a-z][a-z0-9+.-]*:/i.test(u) && !/^[\/\\]/.test(u) ? u : null;
  }

  // ---- header ----
  const R = D.run;
  const header = el("header");
  const top = el("div", "top");
  const outcome = R.outcome || "incomplete";
  top.appendChild(el("span", "badge " + outcome, outcome));
  if (R.reason) top.appendChild(el("span", "reason", R.reason));
  top.appendChild(el("span", "message", R.message || (R.status === "running" ? "the run did not finish" : "")));
  header.appendChild(top);
  const facts = el("div", "facts");
  function fact(name, value, mono) {
    if (!value && value !== 0) return;
    const f = el("span", mono ? "mono" : "");
    f.appendChild(document.createTextNode(name + " "));
    f.appendChild(el("b", "", String(value)));
    facts.appendChild(f);
  }
  fact("run", R.id, true);
  fact("task", R.task);
  fact("forked from", R.forked_from);
  fact("agent", R.agent);
  fact("app", R.app);
  fact("steps", R.steps);
  fact("duration", R.duration_ms ? dur(R.duration_ms) : "");
  fact("screen", R.screen);
  fact("image", R.image);
  fact("settle", R.settle && R.settle !== "none" ? R.settle + (R.settle_capped ? " · ⚠ " + R.settle_capped : "") : "");
  fact("app exit", R.app_exit);
  fact("input confirmed", R.confirm);
  fact("started", R.started ? R.started.replace("T", " ").replace(/\.\d+/, "") : "");
  header.appendChild(facts);

  const T = R.timings || {};
  const total = R.duration_ms || 0;
  if (total > 0) {
    const bar = el("div", "bar");
    bar.title = "where the run's time went";
    let used = 0;
    for (const k of ["create", "launch", "loop", "teardown"]) {
      if (!T[k]) continue;
      const sp = el("span", k, k + " " + dur(T[k]));
      sp.style.flex = String(Math.max(T[k], total / 200));
      sp.title = k + ": " + dur(T[k]);
      bar.appendChild(sp);
      used += T[k];
    }
    if (total - used > total / 100) {
      const sp = el("span", "other", "");
      sp.style.flex = String(total - used);
      sp.title = "other: " + dur(total - used);
      bar.appendChild(sp);
    }
    header.appendChild(bar);
  }
  const chips = el("div", "chips");
  for (const k of ["app_ready", "first_screenshot", "trace_write", "trace_finish"]) {
    if (T[k] !== undefined) chips.appendChild(el("span", "", k.replace("_", " ") + " " + dur(T[k])));
  }
  if (R.image_id) chips.appendChild(el("span", "", "image " + R.image_id.replace("sha256:", "").slice(0, 12)));
  if (R.sandbox) chips.appendChild(el("span", "", "sandbox " + R.sandbox));
  if (R.app_digest) chips.appendChild(el("span", "", "app " + R.app_digest.slice(0, 12)));
  if (R.agentbox) chips.appendChild(el("span", "", "agentbox " + R.agentbox));
  for (const lg of D.logs) {
    const sp = el("span");
    if (relative(lg.url)) {
      const a = el("a", "", lg.name);
      a.href = relative(lg.url);
      sp.appendChild(a);
    } else {
      sp.appendChild(document.createTextNode(lg.name));
    }
    sp.appendChild(document.createTextNode(" " + lg.bytes + " B" + (lg.dropped ? ", " + lg.dropped + " B dropped" : "")));
    chips.appendChild(sp);
  }
  const keys = el("span", "keys");
  keys.innerHTML = "<kbd>←</kbd> <kbd>→</kbd> step · <kbd>Home</kbd> <kbd>End</kbd> first/last";
  chips.appendChild(keys);
  header.appendChild(chips);
  document.body.appendChild(header);

  // ---- banners: incomplete trace, replay verdict ----
  const banners = el("div");
  if (D.incomplete && D.incomplete.length) {
    const b = el("div", "banner incomplete", "Incomplete trace — this run did not finish cleanly:");
    b.id = "incomplete";
    const ul = el("ul");
    for (const m of D.incomplete) ul.appendChild(el("li", "", m));
    b.appendChild(ul);
    banners.appendChild(b);
  }
  if (D.resume && D.resume.length) {
    const b = el("div", "banner", "Resume:");
    b.id = "resume";
    const ul = el("ul");
    for (const m of D.resume) ul.appendChild(el("li", "", m));
    b.appendChild(ul);
    banners.appendChild(b);
  }
  if (D.refused && D.refused.length) {
    const b = el("div", "banner incomplete", "Not read — files this trace names that are not plain files inside it (paths that leave it, symbolic links, devices):");
    b.id = "refused";
    const ul = el("ul");
    for (const m of D.refused) ul.appendChild(el("li", "", m));
    b.appendChild(ul);
    banners.appendChild(b);
  }
  if (D.replay) {
    const rp = D.replay;
    const b = el("div", "banner " + (rp.verdict === "matched" ? "matched" : "diverged"),
      "Replay" + (rp.source ? " of " + rp.source : "") + ": " + rp.message);
    b.id = "replay";
    const link = relative(rp.compare) || relative(rp.diff);
    if (link) {
      const a = el("a");
      a.href = link;
      const img = el("img");
      img.src = link;
      img.alt = "expected | replayed | difference";
      a.appendChild(img);
      b.appendChild(a);
    }
    banners.appendChild(b);
  }
  if (D.grade) {
    // The private grader's verdict: outcome, score, each check (its detail
    // quotes the collected files: text, never markup).
    const g = D.grade;
    const cls = g.outcome === "verified" ? "matched" : g.outcome === "infrastructure" ? "incomplete" : "diverged";
    const b = el("div", "banner " + cls, "Grade: " + g.outcome + " · score " + (+g.score).toFixed(2) + (g.message ? " — " + g.message : ""));
    b.id = "grade";
    const ul = el("ul");
    for (const c of g.checks || []) {
      const what = c.check + (c.file ? " " + c.file : "") + (c.name ? " (" + c.name + ")" : "");
      const li = el("li", "", (c.ok ? "✓ " : "✗ " + (c.class || "") + " · ") + what + (c.detail ? ": " + c.detail : "") +
        (c.weight ? " · weight " + c.weight : "") + " · " + dur(c.ms));
      ul.appendChild(li);
    }
    b.appendChild(ul);
    banners.appendChild(b);
  }
  if ((D.files && D.files.length) || (D.files_refused && D.files_refused.length)) {
    // The task's files, collected when the episode ended (docs/tasks.md).
    const b = el("div", "banner files", "Collected files (~/…, in the trace's files/):");
    b.id = "files";
    const ul = el("ul");
    for (const f of D.files || []) {
      const li = el("li");
      if (relative(f.url)) {
        const a = el("a", "", f.path);
        a.href = relative(f.url);
        li.appendChild(a);
      } else {
        li.appendChild(document.createTextNode(f.path));
      }
      li.appendChild(document.createTextNode(" " + f.size + " B, sha256 " + f.sha256.slice(0, 12)));
      ul.appendChild(li);
    }
    for (const f of D.files_refused || []) ul.appendChild(el("li", "refused", f.path + " — not collected: " + f.reason));
    b.appendChild(ul);
    banners.appendChild(b);
  }
  document.body.appendChild(banners);

  // ---- main: the step list and the selected step ----
  const main = el("main");
  const list = el("nav");
  list.id = "steps";
  list.tabIndex = 0;
  list.setAttribute("aria-label", "steps");
  const detail = el("section");
  detail.id = "detail";
  main.appendChild(list);
  main.appendChild(detail);
  document.body.appendChild(main);
  const film = el("footer");
  film.id = "film";
  document.body.appendChild(film);

  function status(s) {
    if (s.rep && s.rep.match === false) return ["st bad rep", "≠ diverged"];
    if (s.inv) return ["st bad", "invalid"];
    if (s.r) return s.r.ok ? ["st ok", "✓ " + dur(s.r.ms)] : ["st bad", "✗ " + dur(s.r.ms)];
    if (s.final) return ["st", "end"];
    return ["st", ""];
  }

  // Rows and thumbnails are built in chunks as they come near the view, so
  // a long run opens at once: the page lays out a few hundred elements, not
  // tens of thousands, and only thumbnails in view load their image. Every
  // chunk keeps its place (its size is known), so the scroll bars cover the
  // whole run from the start.
  const ROWS = 100, THUMBS = 50, ROW_H = 46, THUMB_W = 112, GAP = 6;
  let sel = -1;
  const rows = new Array(S.length);
  const thumbs = new Array(S.length);
  const listChunks = [], filmChunks = [];
  for (let c = 0; c * ROWS < S.length; c++) {
    const d = el("div", "chunk");
    d.style.height = Math.min(ROWS, S.length - c * ROWS) * ROW_H + "px";
    d.dataset.c = c;
    listChunks.push(d);
    list.appendChild(d);
  }
  for (let c = 0; c * THUMBS < S.length; c++) {
    const d = el("div", "fchunk");
    const n = Math.min(THUMBS, S.length - c * THUMBS);
    d.style.width = n * THUMB_W + (n - 1) * GAP + "px";
    d.dataset.c = c;
    filmChunks.push(d);
    film.appendChild(d);
  }
  function buildRows(c) {
    const d = listChunks[c];
    if (!d || d.dataset.built) return;
    d.dataset.built = "1";
    const f = document.createDocumentFragment();
    for (let i = c * ROWS; i < Math.min(S.length, (c + 1) * ROWS); i++) {
      const s = S[i];
      const row = el("div", "row");
      row.id = "row-" + i;
      row.dataset.i = i;
      row.appendChild(el("span", "n", label(s)));
      row.appendChild(el("span", "t", secs(s.t)));
      row.appendChild(el("span", "a", s.final ? "final screen" : (s.who ? s.who + ": " : "") + (s.s || "")));
      if (s.who) row.classList.add("who-" + s.who);
      const st = status(s);
      row.appendChild(el("span", st[0], st[1]));
      row.appendChild(el("span", "m", s.msg || s.sum || ""));
      if (i === sel) row.classList.add("sel");
      rows[i] = row;
      f.appendChild(row);
    }
    d.appendChild(f);
  }
  function load(im) { if (im && !im.getAttribute("src") && im.dataset.src) im.src = im.dataset.src; }
  const thumbIO = "IntersectionObserver" in window ? new IntersectionObserver(function (entries) {
    for (const e of entries) {
      if (e.isIntersecting) { load(e.target.querySelector("img")); thumbIO.unobserve(e.target); }
    }
  }, { root: film, rootMargin: "0px 400px" }) : null;
  function buildThumbs(c) {
    const d = filmChunks[c];
    if (!d || d.dataset.built) return;
    d.dataset.built = "1";
    const f = document.createDocumentFragment();
    for (let i = c * THUMBS; i < Math.min(S.length, (c + 1) * THUMBS); i++) {
      const s = S[i];
      const th = el("div", "thumb");
      th.dataset.i = i;
      if (s.rep && s.rep.match === false) th.classList.add("div");
      if (i === sel) th.classList.add("sel");
      if (s.img >= 0) {
        const im = el("img");
        im.alt = label(s);
        im.decoding = "async";
        im.dataset.src = D.images[s.img];
        th.appendChild(im);
        if (thumbIO) thumbIO.observe(th); else load(im);
      }
      th.appendChild(el("span", "", label(s)));
      thumbs[i] = th;
      f.appendChild(th);
    }
    d.appendChild(f);
  }
  function ensure(i) {
    buildRows(Math.floor(i / ROWS));
    buildThumbs(Math.floor(i / THUMBS));
  }
  if ("IntersectionObserver" in window) {
    const lio = new IntersectionObserver(function (entries) {
      for (const e of entries) if (e.isIntersecting) buildRows(+e.target.dataset.c);
    }, { root: list, rootMargin: "600px 0px" });
    for (const d of listChunks) lio.observe(d);
    const fio = new IntersectionObserver(function (entries) {
      for (const e of entries) if (e.isIntersecting) buildThumbs(+e.target.dataset.c);
    }, { root: film, rootMargin: "0px 1200px" });
    for (const d of filmChunks) fio.observe(d);
  } else {
    for (let c = 0; c < listChunks.length; c++) buildRows(c);
    for (let c = 0; c < filmChunks.length; c++) buildThumbs(c);
  }

  list.addEventListener("click", function (e) {
    const r = e.target.closest(".row");
    if (r) select(+r.dataset.i);
  });
  film.addEventListener("click", function (e) {
    const t = e.target.closest(".thumb");
    if (t) select(+t.dataset.i);
  });

  // ---- the selected step ----
  let preload = null;
  function render(i) {
    const s = S[i];
    detail.textContent = "";
    const fig = el("figure");
    fig.id = "shot-box";
    if (s.img >= 0) {
      const im = el("img");
      im.id = "shot";
      im.alt = "screen at " + label(s);
      im.width = s.w;
      im.height = s.h;
      im.src = D.images[s.img];
      fit(im);
      fig.appendChild(im);
      agentboxDraw(fig, s);
    } else {
      fig.appendChild(el("div", "noimg", "no screenshot recorded for this step"));
    }
    detail.appendChild(fig);

    const info = el("div", "info");
    info.appendChild(el("h2", "", (s.final ? "Final screen" : "Step " + s.n) + (s.s ? " · " + s.s : "")));
    let when = "observed at " + secs(s.t);
    if (!s.final) when += " · decided in " + dur(s.lat) + (s.queue ? " (" + dur(s.queue) + " of it queued for the model)" : "") + " · sent at " + secs(s.sent);
    if (s.focus) when += " · focus: " + s.focus;
    if (!s.running) when += " · app not running";
    if (s.stl && !s.cap) when += " · settled in " + dur(s.stl);
    info.appendChild(el("div", "when", when));
    if (s.cap) info.appendChild(el("div", "res bad capped", "⚠ the screen did not settle: it was still changing when the settle gave up after " + dur(s.stl) + " (its cap); this screenshot may show it mid-change"));
    if (s.rep) {
      info.appendChild(el("h3", "", "Replay comparison"));
      const r = s.rep;
      let t = r.match === false ? "✗ differs from the recording" : "✓ matches the recording";
      if (r.pixels !== undefined) t += " · " + r.pixels + " of " + r.compared + " pixels differ (" + (100 * r.fraction).toFixed(3) + "%)";
      if (r.note) t += " · " + r.note;
      info.appendChild(el("div", "rep res " + (r.match === false ? "bad" : "ok"), t));
    }
    if (s.who) info.appendChild(el("div", "when who", "chosen by: " + s.who + (s.who === "human" ? " (a person at the live page)" : "")));
    if (s.iv) {
      info.appendChild(el("h3", "", "A person had control before this step"));
      info.appendChild(el("blockquote", "", s.iv));
    }
    if (s.msg) {
      info.appendChild(el("h3", "", "Agent's message"));
      info.appendChild(el("blockquote", "", s.msg));
    }
    if (s.a) {
      info.appendChild(el("h3", "", "Action"));
      info.appendChild(el("pre", "", JSON.stringify(s.a)));
      if (s.inv) info.appendChild(el("div", "res bad", "rejected: " + s.inv));
      if (s.r) info.appendChild(el("div", "res " + (s.r.ok ? "ok" : "bad"), (s.r.ok ? "✓ ok" : "✗ " + (s.r.error || "failed")) + (s.r.ms ? " in " + dur(s.r.ms) : "") + (s.r.cms ? " (input confirmed in " + dur(s.r.cms) + ")" : "")));
    }
    if (s.tree) info.appendChild(treeView(s.tree, fig));
    const next = S[i + 1];
    info.appendChild(el("h3", "", "App output and events " + (next ? secs(s.t) + " – " + secs(next.t) : "from " + secs(s.t))));
    const out = el("div", "out");
    if (!s.out || !s.out.length) out.appendChild(el("div", "none", "(nothing)"));
    for (const l of s.out || []) {
      const d = el("div", l.k === "e" ? "e" : l.k === "v" ? "v" : l.k === "a" ? "a" : "");
      d.appendChild(el("span", "tt", secs(l.t)));
      d.appendChild(document.createTextNode((l.k === "e" ? "stderr: " : "") + l.x));
      out.appendChild(d);
    }
    if (s.more) out.appendChild(el("div", "none", "… " + s.more + (s.more === 1 ? " more line" : " more lines") + ": see stdout.log and stderr.log"));
    info.appendChild(out);
    if (s.meta) {
      const det = el("details");
      det.appendChild(el("summary", "", "Decision meta"));
      det.appendChild(el("pre", "", s.meta));
      info.appendChild(det);
    }
    if (s.wins && s.wins.length) info.appendChild(el("div", "when", "windows: " + s.wins.join(", ")));
    if (s.hash) info.appendChild(el("div", "when", "frame " + s.hash));
    detail.appendChild(info);
  }

  // The accessibility tree read with the step, beside its screenshot; with
  // marks, a switch between the raw screenshot and the agent's marked one.
  function treeView(t, fig) {
    const box = el("div", "tree");
    box.appendChild(el("h3", "", "Accessibility tree"));
    let sum = t.err ? "not read: " + t.err : t.n + (t.n === 1 ? " element" : " elements") + ", read in " + dur(t.ms);
    if (t.note) sum += " · " + t.note;
    box.appendChild(el("div", "when", sum));
    for (const c of t.cut || []) box.appendChild(el("div", "res bad", "cut: " + c));
    if (t.mi >= 0) {
      const lab = el("label", "when");
      const cb = el("input");
      cb.type = "checkbox";
      cb.addEventListener("change", function () {
        const im = fig.querySelector("img");
        const s = S[sel];
        if (im) im.src = D.images[cb.checked ? t.mi : s.img];
      });
      lab.appendChild(cb);
      lab.appendChild(document.createTextNode(" show the agent's marked screenshot"));
      box.appendChild(lab);
    }
    if (t.marks && t.marks.length) {
      const det = el("details");
      det.appendChild(el("summary", "", "Marks (" + t.marks.length + ")"));
      det.appendChild(el("pre", "", t.marks.join("\n")));
      box.appendChild(det);
    }
    if (t.l && t.l.length) {
      const det = el("details");
      det.open = true;
      det.appendChild(el("summary", "", "Elements"));
      det.appendChild(el("pre", "", t.l.join("\n") + (t.more ? "\n… " + t.more + " more" : "")));
      box.appendChild(det);
    }
    const u = relative(t.url);
    if (u) {
      const a = el("a", "", "tree as JSON");
      a.href = u;
      box.appendChild(a);
    }
    return box;
  }

  // The screenshot fits the pane's height, so the whole screen shows.
  function fit(im) {
    const h = detail.clientHeight - 32;
    if (h > 120) im.style.maxHeight = h + "px";
  }
  window.addEventListener("resize", function () {
    const im = document.getElementById("shot");
    if (im) fit(im);
  });

  function select(i, noScroll) {
    if (!S.length) return;
    i = Math.max(0, Math.min(S.length - 1, i));
    if (i === sel) return;
    if (sel >= 0) {
      if (rows[sel]) rows[sel].classList.remove("sel");
      if (thumbs[sel]) thumbs[sel].classList.remove("sel");
    }
    sel = i;
    ensure(i);
    rows[i].classList.add("sel");
    thumbs[i].classList.add("sel");
    load(thumbs[i].querySelector("img"));
    render(i);
    if (!noScroll) {
      rows[i].scrollIntoView({ block: "nearest" });
      thumbs[i].scrollIntoView({ block: "nearest", inline: "center" });
    }
    document.body.dataset.selected = String(i);
    if (history.replaceState) history.replaceState(null, "", "#" + (S[i].final ? "final" : "step-" + S[i].n));
    const n = S[i + 1];
    if (n && n.img >= 0) { preload = new Image(); preload.src = D.images[n.img]; }
  }

  document.addEventListener("keydown", function (e) {
    if (e.altKey || e.ctrlKey || e.metaKey) return;
    let to = null;
    switch (e.key) {
      case "ArrowRight": case "ArrowDown": case "j": to = sel + 1; break;
      case "ArrowLeft": case "ArrowUp": case "k": to = sel - 1; break;
      case "Home": to = 0; break;
      case "End": to = S.length - 1; break;
      case "PageDown": to = sel + 10; break;
      case "PageUp": to = sel - 10; break;
    }
    if (to !== null) { e.preventDefault(); select(to); }
  });

  // Start at the step named in the URL, else at the first.
  let start = 0;
  const m = /^#(?:step-(\d+)|(final))$/.exec(location.hash);
  if (m) {
    const k = S.findIndex(function (s) { return m[2] ? s.final : !s.final && s.n === +m[1]; });
    if (k >= 0) start = k;
  }
  if (S.length) select(start, start === 0);
  else detail.appendChild(el("div", "info", "This trace has no steps: the run ended before the first observation. " + (R.message || "")));
  window.agentboxReport = { steps: S.length, select: select, selected: function () { return sel; },
    buildMS: performance.now() - started };
  document.body.dataset.buildMs = String(Math.round(window.agentboxReport.buildMS));
  document.body.dataset.ready = "1";
})();
