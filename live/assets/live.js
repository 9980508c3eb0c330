"use strict";
// The live page (agentbox run --live): a view of one run, or a grid of
// several. Everything arrives over one WebSocket: the run's events as
// JSON, its screen as PNG rectangles drawn onto a canvas. A viewer in
// control sends the keyboard and mouse as actions of agentbox's
// vocabulary; the server validates and records them as the person's.
(function () {
  const B = document.body;

  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = text;
    return e;
  }
  function wsURL(path) {
    return (location.protocol === "https:" ? "wss://" : "ws://") + location.host + path;
  }
  // A binary message: u32 header length, header JSON, PNG.
  function unpack(buf) {
    const n = new DataView(buf).getUint32(0);
    const head = JSON.parse(new TextDecoder().decode(new Uint8Array(buf, 4, n)));
    return [head, new Blob([new Uint8Array(buf, 4 + n)], { type: "image/png" })];
  }
  function secs(ns) { return (ns / 1e9).toFixed(2) + " s"; }
  function outcomeText(end) {
    return end ? end.outcome + (end.reason ? " (" + end.reason + ")" : "") + (end.message ? ": " + end.message : "") : "ended";
  }

  if (B.dataset.page === "grid") grid(); else view(B.dataset.id);

  // ---- a grid of every run ----
  function grid() {
    const header = el("header");
    header.appendChild(el("h1", "", B.dataset.title));
    const count = el("span", "count");
    header.appendChild(count);
    B.appendChild(header);
    const main = el("main", "grid");
    main.id = "grid";
    B.appendChild(main);
    const cards = {};
    const ws = new WebSocket(wsURL("/ws/grid"));
    ws.binaryType = "arraybuffer";
    ws.onmessage = function (m) {
      if (typeof m.data !== "string") {
        const [h, blob] = unpack(m.data);
        const c = cards[h.id];
        if (!c) return;
        createImageBitmap(blob).then(function (bmp) {
          c.canvas.width = bmp.width;
          c.canvas.height = bmp.height;
          c.canvas.getContext("2d").drawImage(bmp, 0, 0);
          c.card.dataset.thumb = "1";
        });
        return;
      }
      const msg = JSON.parse(m.data);
      if (msg.t === "hello") B.dataset.ready = "1";
      if (msg.t === "views") {
        let running = 0;
        for (const v of msg.views) {
          let c = cards[v.id];
          if (!c) {
            const a = el("a", "card");
            a.href = "/v/" + encodeURIComponent(v.id);
            a.dataset.id = v.id;
            const canvas = el("canvas");
            canvas.width = 320;
            canvas.height = 240;
            a.appendChild(canvas);
            const name = el("div", "name");
            const badge = el("span", "badge");
            const meta = el("div", "meta");
            a.appendChild(name);
            a.appendChild(badge);
            a.appendChild(meta);
            main.appendChild(a);
            c = cards[v.id] = { card: a, canvas: canvas, name: name, badge: badge, meta: meta };
          }
          c.name.textContent = v.info.name;
          const st = v.state === "ended" && v.end ? v.end.outcome : v.state;
          c.badge.textContent = st;
          c.badge.className = "badge " + st;
          c.card.dataset.state = v.state;
          c.meta.textContent = v.steps + (v.steps === 1 ? " step" : " steps") + (v.by ? " · " + v.by + " has control" : "") + (v.info.task ? " · " + v.info.task : "");
          if (v.state !== "ended") running++;
        }
        for (const id in cards) {
          if (!msg.views.some(function (v) { return v.id === id; })) {
            cards[id].card.remove();
            delete cards[id];
          }
        }
        count.textContent = running + " running · " + msg.views.length + " in all";
      }
      if (msg.t === "closed") {
        B.dataset.closed = "1";
        header.appendChild(el("div", "banner", msg.message));
      }
    };
    ws.onclose = function () { B.dataset.closed = "1"; };
  }

  // ---- one run ----
  function view(id) {
    // The layout.
    const header = el("header");
    const home = el("a", "home", "agentbox live");
    home.href = "/";
    header.appendChild(home);
    const title = el("h1", "", "");
    header.appendChild(title);
    const badge = el("span", "badge starting", "starting");
    badge.id = "state";
    header.appendChild(badge);
    const who = el("span", "who", "");
    who.id = "who";
    header.appendChild(who);
    const take = el("button", "", "Take control");
    take.id = "take";
    const back = el("button", "", "Hand back");
    back.id = "back";
    const finish = el("button", "", "Finish ✓");
    finish.id = "finish";
    const giveup = el("button", "", "Give up");
    giveup.id = "giveup";
    for (const b of [take, back, finish, giveup]) { b.type = "button"; b.hidden = true; header.appendChild(b); }
    B.appendChild(header);
    const banner = el("div", "banner");
    banner.id = "banner";
    banner.hidden = true;
    B.appendChild(banner);
    // The policy's asks waiting for an answer here (--approve live).
    const asks = el("div", "asks");
    B.appendChild(asks);
    const askCards = {};

    const main = el("main");
    const stage = el("section", "stage");
    const box = el("div");
    box.id = "screen-box";
    const canvas = el("canvas");
    canvas.id = "screen";
    canvas.width = 640;
    canvas.height = 480;
    const overlay = el("div");
    overlay.id = "overlay";
    const NS = "http://www.w3.org/2000/svg";
    const dragSvg = document.createElementNS(NS, "svg");
    dragSvg.id = "drag";
    box.appendChild(canvas);
    box.appendChild(overlay);
    box.appendChild(dragSvg);
    stage.appendChild(box);
    const hint = el("div", "hint", "");
    hint.id = "hint";
    stage.appendChild(hint);
    main.appendChild(stage);
    const side = el("aside");
    side.appendChild(el("h2", "", "Steps"));
    const steps = el("ol", "steps");
    steps.id = "steps";
    side.appendChild(steps);
    side.appendChild(el("h2", "", "App output and events"));
    const out = el("pre", "out");
    out.id = "out";
    side.appendChild(out);
    main.appendChild(side);
    B.appendChild(main);
    // Keys go to a text area out of sight, so typed text (dead keys,
    // input methods, any script) arrives as the browser composed it.
    const keys = el("textarea");
    keys.id = "keys";
    keys.setAttribute("aria-label", "keyboard input for the app");
    keys.autocomplete = "off";
    keys.spellcheck = false;
    B.appendChild(keys);

    const g = canvas.getContext("2d");
    let role = "", me = "", state = null, holder = "", control = false, closed = false;
    let cursor = [0, 0];
    const rows = {};
    let nextID = 1;

    // What the page measures (for people and for the tests): each frame's
    // time from the change in the sandbox to its paint.
    const stats = { frames: 0, bytes: 0, lat: [], acted: [], errors: [] };
    window.agentboxLive = {
      stats: stats,
      control: function () { return control; },
      state: function () { return state; },
    };

    const ws = new WebSocket(wsURL("/ws/v/" + encodeURIComponent(id)));
    ws.binaryType = "arraybuffer";
    function send(m) { if (ws.readyState === 1) ws.send(JSON.stringify(m)); }

    // ---- state ----
    function show(st) {
      if (st) state = st;
      if (!state) return;
      title.textContent = state.info.name + (state.info.task ? " — " + state.info.task : "");
      document.title = state.info.name + " · agentbox live";
      let label = state.state;
      if (state.state === "ended") label = state.end ? state.end.outcome : "ended";
      if (state.state === "paused") label = "paused: " + (state.by || "a person") + " has control";
      badge.textContent = label;
      badge.className = "badge " + (state.state === "ended" && state.end ? state.end.outcome : state.state);
      B.dataset.state = state.state;
      const running = state.state === "running" || state.state === "paused";
      control = running && holder === "you" && !closed;
      B.dataset.control = control ? "1" : "";
      take.hidden = !(running && role === "control" && holder === "" && !closed);
      back.hidden = !(control && !state.no_agent);
      finish.hidden = giveup.hidden = !(control && state.no_agent);
      if (closed) who.textContent = "";
      else if (role !== "control") who.textContent = "read-only: you watch";
      else if (control) who.textContent = "you have control: your keyboard and mouse go to the app";
      else if (holder) who.textContent = holder + " has control";
      else if (state.no_agent && running) who.textContent = "no agent: take control to drive the app";
      else who.textContent = "";
      hint.textContent = control ? "Click the screen to give it the keyboard. Clicks, drags, the wheel and keys become actions, recorded as yours." : "";
      box.classList.toggle("live", control);
      if (state.state === "ended" && state.end) {
        banner.hidden = false;
        banner.textContent = "The run has ended: " + outcomeText(state.end) + (state.finished ? " · the trace is written" : "");
      }
    }

    // ---- asks (--approve live) ----
    // A card per ask: what would run, on what, and allow / deny (and
    // always, unless the rule is sensitive). The server takes the answer
    // of the person who holds control (or anyone with the control address
    // while nobody does); an ask nobody answers in time is denied.
    function askCard(e, words) {
      const a = e.approval, id = a.id;
      if (askCards[id]) return;
      const card = el("div", "ask");
      card.appendChild(el("div", "", "Policy rule " + (a.rule || "") + (a.sensitive ? " (sensitive)" : "") + ": may the " + (e.actor || "agent") +
        " " + (words || "act") + (a.element ? " on " + a.element : "") + "? The app waits."));
      const buttons = el("div", "buttons");
      function answer(allow, always) {
        send({ t: "answer", a: { approval: id, allow: allow, always: always } });
      }
      const yes = el("button", "allow", "Allow"), no = el("button", "deny", "Deny");
      yes.addEventListener("click", function () { answer(true, false); });
      no.addEventListener("click", function () { answer(false, false); });
      buttons.appendChild(yes);
      if (!a.sensitive) {
        const always = el("button", "always", "Allow always");
        always.addEventListener("click", function () { answer(true, true); });
        buttons.appendChild(always);
      }
      buttons.appendChild(no);
      card.appendChild(buttons);
      askCards[id] = card;
      asks.appendChild(card);
    }
    function dropAsk(id) {
      const card = askCards[id];
      if (card) { card.remove(); delete askCards[id]; }
    }

    // ---- events ----
    function line(text, cls) {
      const d = el("div", cls || "", text);
      out.appendChild(d);
      while (out.childNodes.length > 2000) out.removeChild(out.firstChild);
      out.scrollTop = out.scrollHeight;
    }
    function onEvent(e, words) {
      switch (e.kind) {
        case "output":
          if (e.text) line(e.text.replace(/\n$/, ""), e.stream === "stderr" ? "e" : "");
          if (e.dropped) line("… " + e.dropped + " bytes of output dropped at the cap", "v");
          break;
        case "window":
          line("window " + e.change + " “" + (e.window ? e.window.title : "") + "”", "v");
          break;
        case "exit":
          line("the app ended", "v");
          break;
        case "step": {
          const li = el("li", "step " + (e.actor || "agent"));
          li.appendChild(el("span", "n", "#" + e.step));
          li.appendChild(el("span", "who", e.actor || "agent"));
          li.appendChild(el("span", "a", words || ""));
          if (e.invalid) li.appendChild(el("span", "bad", "rejected: " + e.invalid));
          steps.appendChild(li);
          rows[e.step] = li;
          while (steps.childNodes.length > 500) steps.removeChild(steps.firstChild);
          steps.scrollTop = steps.scrollHeight;
          if (state) state.steps = Math.max(state.steps, e.step);
          // The action drawn on the screen as the report draws it.
          overlay.textContent = "";
          agentboxDraw(overlay, { a: e.action, s: (e.actor && e.actor !== "agent" ? e.actor + ": " : "") + (words || ""),
            cur: cursor, w: canvas.width, h: canvas.height, inv: e.invalid });
          break;
        }
        case "result": {
          const li = rows[e.step];
          if (li && e.result) {
            li.classList.add(e.result.ok ? "ok" : "failed");
            if (!e.result.ok && e.result.error) li.appendChild(el("span", "bad", e.result.error));
          }
          break;
        }
        case "takeover":
          line((e.by || "a person") + " took control", "v");
          if (state) { state.state = state.state === "ended" ? "ended" : "paused"; state.by = e.by; }
          show();
          break;
        case "hand_back":
          line((e.by || "a person") + " handed control back (" + (e.reason || "") + ")", "v");
          if (state && state.state === "paused") { state.state = "running"; state.by = ""; }
          show();
          break;
        case "approval":
          if (e.approval && e.approval.id) {
            if (!e.answer) askCard(e, words); else dropAsk(e.approval.id);
          }
          if (!e.answer) {
            line("policy rule " + ((e.approval && e.approval.rule) || "") + " asks whether the " + (e.actor || "agent") + " may " + (words || "act") + (e.approval && e.approval.element ? " on " + e.approval.element : "") + " (the app waits)", "v");
          } else {
            line("policy rule " + ((e.approval && e.approval.rule) || "") + ": " + e.answer + (e.by ? " by " + e.by : "") + (e.reason ? " (" + e.reason + ")" : ""), "v");
          }
          break;
        case "action_not_applied":
          line("the " + (e.actor || "agent") + "'s action " + (words || "") + " was not performed: a person had taken control", "v");
          break;
        case "dropped":
          line("… " + e.dropped + " " + (e.change || "") + " events of the app discarded beyond their bound", "v");
          break;
        case "episode":
          line("episode " + e.episode + " started", "v");
          break;
        case "end":
          if (state) { state.state = "ended"; state.end = e.end; }
          line("the run ended: " + outcomeText(e.end), "v");
          show();
          break;
      }
    }

    // ---- frames ----
    let drawing = Promise.resolve();
    function onFrame(buf) {
      const [h, blob] = unpack(buf);
      stats.bytes += buf.byteLength;
      drawing = drawing.then(function () { return createImageBitmap(blob); }).then(function (bmp) {
        if (h.full && (canvas.width !== h.sw || canvas.height !== h.sh)) {
          canvas.width = h.sw;
          canvas.height = h.sh;
        }
        g.drawImage(bmp, h.x, h.y);
        bmp.close();
        cursor = h.cur;
        requestAnimationFrame(function (ts) {
          const painted = performance.timeOrigin + ts;
          stats.frames++;
          stats.painted = painted;
          stats.lat.push({ seq: h.seq, full: h.full, bytes: buf.byteLength, enc: h.enc_ms, look: h.look_ms, upper: painted - h.before, lower: painted - h.seen });
          if (stats.lat.length > 1000) stats.lat.shift();
          B.dataset.frames = String(stats.frames);
        });
      }).catch(function (err) { stats.errors.push(String(err)); });
    }

    ws.onmessage = function (m) {
      if (typeof m.data !== "string") { onFrame(m.data); return; }
      const msg = JSON.parse(m.data);
      switch (msg.t) {
        case "hello":
          role = msg.role; me = msg.you;
          show(msg.state);
          B.dataset.ready = "1";
          B.dataset.role = role;
          break;
        case "ev": onEvent(msg.ev, msg.s); break;
        case "lease":
          holder = msg.holder;
          show(msg.state);
          if (!control) releaseAll();
          break;
        case "state": case "finished": show(msg.state); break;
        case "acted":
          stats.acted.push(msg);
          if (!msg.ok) line("your action: " + (msg.invalid ? "rejected: " : "") + msg.error, "e");
          break;
        case "error":
          stats.errors.push(msg.message);
          line(msg.message, "e");
          break;
        case "closed":
          closed = true;
          banner.hidden = false;
          banner.textContent = msg.message;
          B.dataset.closed = "1";
          show();
          break;
      }
    };
    ws.onclose = function () {
      closed = true;
      B.dataset.closed = "1";
      if (banner.hidden) { banner.hidden = false; banner.textContent = "The live page's connection has closed."; }
      show();
    };

    take.addEventListener("click", function () { send({ t: "take" }); });
    back.addEventListener("click", function () { releaseAll(); send({ t: "back" }); });
    finish.addEventListener("click", function () { releaseAll(); act({ action: "done", success: true, message: "finished by the person at the live page" }); });
    giveup.addEventListener("click", function () { releaseAll(); act({ action: "done", success: false, message: "the person at the live page gave up" }); });
    setInterval(function () { if (control) send({ t: "ping" }); }, 5000);

    // ---- input: the person's keyboard and mouse as actions ----
    function act(a) { send({ t: "act", id: nextID++, a: a }); }
    function at(e) {
      const r = canvas.getBoundingClientRect();
      const x = Math.floor((e.clientX - r.left) * canvas.width / r.width);
      const y = Math.floor((e.clientY - r.top) * canvas.height / r.height);
      return [Math.max(0, Math.min(canvas.width - 1, x)), Math.max(0, Math.min(canvas.height - 1, y))];
    }
    function mods(e, withShift) {
      const m = [];
      if (e.ctrlKey) m.push("ctrl");
      if (e.altKey) m.push("alt");
      if (withShift && e.shiftKey) m.push("shift");
      if (e.metaKey) m.push("super");
      return m;
    }
    const BUTTONS = ["left", "middle", "right", "back", "forward"];

    // Typed text: what the browser composed, sent as one type action
    // after a short pause (or before any other action, keeping order).
    let text = "", textTimer = 0, echo = "";
    function flushText() {
      clearTimeout(textTimer);
      if (text) { const t = text; text = ""; act({ action: "type", text: t }); }
    }
    function queueText(t) {
      text += t;
      if (text.length > 4000) { flushText(); return; }
      clearTimeout(textTimer);
      textTimer = setTimeout(flushText, 120);
    }
    // Clicks: a second or third click at the same place within 250 ms
    // makes one click with a count.
    let click = null, clickTimer = 0;
    function flushClick() {
      clearTimeout(clickTimer);
      if (!click) return;
      const c = click;
      click = null;
      const a = { action: "click", x: c.x, y: c.y };
      if (c.button !== "left") a.button = c.button;
      if (c.count > 1) a.count = c.count;
      if (c.keys) a.keys = c.keys;
      act(a);
    }
    function flushAll() { flushText(); flushClick(); }

    const NAMED = { Enter: "Return", Backspace: "BackSpace", Tab: "Tab", Escape: "Escape", Delete: "Delete", Insert: "Insert",
      Home: "Home", End: "End", PageUp: "Page_Up", PageDown: "Page_Down", ArrowLeft: "Left", ArrowRight: "Right",
      ArrowUp: "Up", ArrowDown: "Down", ContextMenu: "Menu", PrintScreen: "Print", Pause: "Pause", ScrollLock: "Scroll_Lock" };
    for (let i = 1; i <= 24; i++) NAMED["F" + i] = "F" + i;
    const MODIFIERS = new Set(["Shift", "Control", "Alt", "Meta", "AltGraph", "CapsLock", "NumLock", "OS", "Hyper", "Super", "Fn"]);
    // Keys a game holds: down and up separately.
    const HOLD = new Set(["Left", "Right", "Up", "Down"]);
    const held = new Set();
    function releaseAll() {
      flushAll();
      for (const k of held) act({ action: "key_up", key: k });
      held.clear();
    }
    // The key of a chord: its name, else the unshifted key of its place.
    function chordKey(e) {
      if (NAMED[e.key]) return NAMED[e.key];
      const c = e.code || "";
      if (/^Key[A-Z]$/.test(c)) return c.slice(3).toLowerCase();
      if (/^Digit[0-9]$/.test(c)) return c.slice(5);
      if (c === "Space" || e.key === " ") return "space";
      return e.key.length === 1 ? e.key.toLowerCase() : e.key;
    }

    keys.addEventListener("keydown", function (e) {
      if (!control) return;
      if (e.isComposing || e.key === "Process" || e.key === "Dead" || e.key === "Unidentified" || MODIFIERS.has(e.key)) return;
      const altGr = e.getModifierState && e.getModifierState("AltGraph");
      if ((e.ctrlKey || e.altKey || e.metaKey) && !altGr) {
        e.preventDefault();
        flushAll();
        act({ action: "key", keys: mods(e, true).concat([chordKey(e)]).join("+") });
        return;
      }
      const name = NAMED[e.key];
      if (!name) return; // text: the input event brings it
      e.preventDefault();
      flushAll();
      // A browser driven over the DevTools protocol sends a key's text as
      // a separate event that preventDefault does not stop: the line
      // break or tab that may follow this key is its echo, not input.
      echo = name === "Return" ? "\n" : name === "Tab" ? "\t" : "";
      if (HOLD.has(name) && !e.shiftKey) {
        if (!held.has(name)) { held.add(name); act({ action: "key_down", key: name }); }
        return;
      }
      act({ action: "key", keys: (e.shiftKey ? "shift+" : "") + name });
    });
    keys.addEventListener("keyup", function (e) {
      echo = "";
      const name = NAMED[e.key];
      if (name && held.has(name)) {
        e.preventDefault();
        held.delete(name);
        flushAll();
        act({ action: "key_up", key: name });
      }
    });
    keys.addEventListener("input", function (e) {
      if (e.isComposing) return;
      let t = keys.value.replace(/\r\n?/g, "\n");
      keys.value = "";
      const ech = echo;
      echo = "";
      if (e.inputType === "insertLineBreak" || e.inputType === "insertParagraph") {
        // The echo of an Enter sent already, else an Enter whose keydown
        // did not name it (an on-screen keyboard): Return.
        if (ech !== "\n" && control) { flushAll(); act({ action: "key", keys: "Return" }); }
        return;
      }
      if (ech && t.startsWith(ech)) t = t.slice(ech.length);
      if (control && t) queueText(t); // pasted lines and tabs type as Return and Tab
    });
    keys.addEventListener("compositionend", function (e) {
      keys.value = "";
      if (control && e.data) queueText(e.data);
    });
    keys.addEventListener("blur", function () { if (control) releaseAll(); });

    let down = null;
    function drawDrag(pts) {
      dragSvg.textContent = "";
      dragSvg.setAttribute("viewBox", "0 0 " + canvas.width + " " + canvas.height);
      if (!pts) return;
      const pl = document.createElementNS(NS, "polyline");
      pl.setAttribute("points", pts.map(function (p) { return p[0] + "," + p[1]; }).join(" "));
      pl.setAttribute("fill", "none");
      pl.setAttribute("stroke", "#8a3ffc");
      pl.setAttribute("stroke-width", "3");
      dragSvg.appendChild(pl);
    }
    box.addEventListener("mousedown", function (e) {
      if (!control) return;
      e.preventDefault();
      keys.focus({ preventScroll: true });
      flushText();
      const p = at(e);
      down = { button: BUTTONS[e.button] || "left", pts: [p], keys: mods(e, true).join("+") };
    });
    window.addEventListener("mousemove", function (e) {
      if (!down || !control) return;
      const p = at(e), last = down.pts[down.pts.length - 1];
      if (Math.abs(p[0] - last[0]) + Math.abs(p[1] - last[1]) >= 6 && down.pts.length < 200) {
        down.pts.push(p);
        drawDrag(down.pts);
      }
    });
    window.addEventListener("mouseup", function (e) {
      if (!down || !control) { down = null; return; }
      const d = down;
      down = null;
      drawDrag(null);
      const p = at(e), s = d.pts[0];
      let far = 0;
      for (const q of d.pts.concat([p])) far = Math.max(far, Math.abs(q[0] - s[0]), Math.abs(q[1] - s[1]));
      if (far < 5) {
        if (click && click.button === d.button && Math.abs(click.x - s[0]) <= 5 && Math.abs(click.y - s[1]) <= 5 && click.count < 3) {
          click.count++;
        } else {
          flushClick();
          click = { x: s[0], y: s[1], button: d.button, count: 1, keys: d.keys };
        }
        clearTimeout(clickTimer);
        clickTimer = setTimeout(flushClick, 250);
        return;
      }
      flushClick();
      const path = d.pts.concat([p]);
      const a = { action: "drag", path: path };
      if (d.button !== "left") a.button = d.button;
      act(a);
    });
    box.addEventListener("contextmenu", function (e) { if (control) e.preventDefault(); });
    let wheel = null, wheelTimer = 0;
    box.addEventListener("wheel", function (e) {
      if (!control) return;
      e.preventDefault();
      flushAll();
      const unit = e.deltaMode === 1 ? 3 : e.deltaMode === 2 ? 0.1 : 100;
      const p = at(e);
      if (!wheel) wheel = { x: p[0], y: p[1], dx: 0, dy: 0, keys: mods(e, true).join("+") };
      wheel.dx += e.deltaX / unit;
      wheel.dy += e.deltaY / unit;
      clearTimeout(wheelTimer);
      wheelTimer = setTimeout(function () {
        const w = wheel;
        wheel = null;
        const r = function (v) { return Math.max(-100, Math.min(100, v < 0 ? Math.floor(v) : Math.ceil(v))); };
        const a = { action: "scroll", x: w.x, y: w.y };
        if (r(w.dx)) a.dx = r(w.dx);
        if (r(w.dy)) a.dy = r(w.dy);
        if (w.keys) a.keys = w.keys;
        if (a.dx || a.dy) act(a);
      }, 100);
    }, { passive: false });
  }
})();
