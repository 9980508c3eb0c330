"use strict";
// The action drawn on a screenshot, shared by the report (agentbox view)
// and the live page (agentbox run --live): agentboxDraw(box, s) adds to
// box an SVG overlay sized s.w × s.h (the screen's pixels) and a caption.
// s holds the step: a (the action, as in actions.jsonl), s (the action in
// words), cur (the cursor when the screen was observed), tp (where an
// action on a target went), inv (why it was rejected), held (keys held),
// final (the last screen).
const agentboxDraw = (function () {
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
  function point(s, a) {
    if (a.x !== undefined && a.y !== undefined) return [a.x, a.y];
    if (s.tp) return s.tp; // a target found in the accessibility tree
    return s.cur;
  }
  function marker(g, x, y, text, filled) {
    svg("circle", { cx: x, cy: y, r: 16, fill: "none", stroke: "#fff", "stroke-width": 6, opacity: 0.8 }, g);
    svg("circle", { cx: x, cy: y, r: 16, fill: filled ? "rgba(255,45,85,.35)" : "none", stroke: "#ff2d55", "stroke-width": 3 }, g);
    svg("circle", { cx: x, cy: y, r: 3, fill: "#ff2d55" }, g);
    if (text) tag(g, x + 22, y - 12, text);
  }
  function tag(g, x, y, text) {
    const t = svg("text", { x: x, y: y, fill: "#fff", stroke: "#000", "stroke-width": 3, "paint-order": "stroke",
      "font-size": 15, "font-family": "DejaVu Sans, sans-serif", "font-weight": 700 }, g);
    t.textContent = text;
  }
  function arrow(g, pts, dashed) {
    const d = pts.map(function (p) { return p[0] + "," + p[1]; }).join(" ");
    svg("polyline", { points: d, fill: "none", stroke: "#fff", "stroke-width": 6, opacity: 0.8, "stroke-linejoin": "round" }, g);
    const line = svg("polyline", { points: d, fill: "none", stroke: "#ff2d55", "stroke-width": 3,
      "stroke-linejoin": "round", "marker-end": "url(#ab-arrow)" }, g);
    if (dashed) line.setAttribute("stroke-dasharray", "8 6");
  }
  function draw(box, s) {
    const a = s.a;
    const o = svg("svg", { viewBox: "0 0 " + s.w + " " + s.h, preserveAspectRatio: "none" });
    const defs = svg("defs", {}, o);
    const mk = svg("marker", { id: "ab-arrow", viewBox: "0 0 10 10", refX: 8, refY: 5, markerWidth: 5, markerHeight: 5, orient: "auto-start-reverse" }, defs);
    svg("path", { d: "M0,0 L10,5 L0,10 z", fill: "#ff2d55" }, mk);
    const g = svg("g", {}, o);
    let caption = a ? (s.s || a.action) : "";
    if (a) {
      switch (a.action) {
        case "click": {
          const p = point(s, a);
          let t = "click";
          if (a.button && a.button !== "left") t += " " + a.button;
          if (a.count > 1) t += " ×" + a.count;
          if (a.keys) t = a.keys + "+" + t;
          marker(g, p[0], p[1], t, true);
          break;
        }
        case "mouse_down": case "mouse_up": {
          const p = point(s, a);
          marker(g, p[0], p[1], a.action === "mouse_down" ? "press" : "release", a.action === "mouse_down");
          break;
        }
        case "mouse_move": {
          const to = a.x !== undefined ? [a.x, a.y] : [s.cur[0] + (a.dx || 0), s.cur[1] + (a.dy || 0)];
          arrow(g, [s.cur, to], true);
          marker(g, to[0], to[1], "", false);
          break;
        }
        case "drag": {
          const pts = (a.path || []).map(function (p) { return [p[0], p[1]]; });
          if (pts.length) {
            arrow(g, pts, false);
            marker(g, pts[0][0], pts[0][1], "drag", true);
          }
          break;
        }
        case "scroll": {
          const p = point(s, a);
          const dx = a.dx || 0, dy = a.dy || 0;
          const k = 24, cap = 96;
          const ex = p[0] + Math.max(-cap, Math.min(cap, dx * k));
          const ey = p[1] + Math.max(-cap, Math.min(cap, dy * k));
          marker(g, p[0], p[1], "", false);
          arrow(g, [p, [ex, ey]], false);
          break;
        }
        case "screenshot":
          if (a.region) {
            const r = a.region;
            svg("rect", { x: r[0], y: r[1], width: r[2] - r[0], height: r[3] - r[1], fill: "none", stroke: "#ffd33d", "stroke-width": 3, "stroke-dasharray": "10 6" }, g);
          }
          break;
        case "type":
          caption = "type “" + (a.text.length > 160 ? a.text.slice(0, 160) + "…" : a.text) + "”";
          break;
        case "type_secret":
          caption = "type secret " + a.secret + " (its value is not recorded)";
          break;
        case "done":
          caption = (a.success === false ? "✗ done (gave up)" : "✓ done") + (a.message ? " — " + a.message : "");
          break;
      }
    } else if (s.final) {
      caption = "final screen";
    }
    if (s.inv) caption += "\n(rejected: " + s.inv + ")";
    box.appendChild(o);
    if (caption) box.appendChild(el("div", "caption", caption));
    if (s.held && s.held.length) box.appendChild(el("div", "held", "held: " + s.held.join(" + ")));
  }
  return draw;
})();
