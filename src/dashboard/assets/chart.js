// Tollgate dashboard: a bar chart of a value per day, drawn as inline SVG by the script (the CSP
// allows no style attributes; SVG geometry is set as attributes, colours come from app.css).
(function () {
  'use strict';
  const TG = window.TG;

  // The last `days` days ending today (UTC), oldest first, as YYYY-MM-DD.
  TG.lastDays = (days) => {
    const out = [];
    const today = Date.UTC(new Date().getUTCFullYear(), new Date().getUTCMonth(), new Date().getUTCDate());
    for (let i = days - 1; i >= 0; i--) out.push(new Date(today - i * 86400000).toISOString().slice(0, 10));
    return out;
  };

  // points: [{day: 'YYYY-MM-DD', value: number}] over consecutive days; label: what a value is.
  TG.barChart = (points, label, id) => {
    const max = Math.max(0, ...points.map((p) => p.value));
    const tick = (f) => (max > 0 ? TG.credits(+(max * f).toPrecision(2)) : f === 0 ? '0' : '');
    // Room on the left for the longest value label, at the phone's larger label size too.
    // Taller on a phone, where the chart is a third as wide.
    const W = 800, H = window.matchMedia('(max-width: 600px)').matches ? 440 : 220, bottom = 30, top = 14, right = 8;
    const left = 16 + 14 * Math.max(...[0, 0.5, 1].map((f) => tick(f).length));
    const total = points.reduce((s, p) => s + p.value, 0);
    const scale = max > 0 ? (H - top - bottom) / max : 0;
    const slot = (W - left - right) / Math.max(points.length, 1);
    const summary = `${label} per day over the last ${points.length} days: ${TG.credits(total)} in total, at most ${TG.credits(max)} in a day.`;
    const svg = TG.svg('svg', {
      class: 'chart', viewBox: `0 0 ${W} ${H}`, role: 'img', 'aria-label': summary, id,
      preserveAspectRatio: 'xMidYMid meet', focusable: 'false',
    });
    svg.appendChild(TG.svg('title', { text: summary }));
    // Axis and two gridlines with their values.
    for (const f of [0, 0.5, 1]) {
      const y = H - bottom - f * (H - top - bottom);
      svg.appendChild(TG.svg('line', { class: f === 0 ? 'axis' : 'grid', x1: left, x2: W - right, y1: y, y2: y }));
      svg.appendChild(TG.svg('text', { class: 'tick', x: left - 6, y: y + 4, 'text-anchor': 'end', text: tick(f) }));
    }
    points.forEach((p, i) => {
      const h = Math.max(p.value > 0 ? 1.5 : 0, p.value * scale);
      const x = left + i * slot + slot * 0.15;
      const bar = TG.svg('rect', { class: 'bar', x: x.toFixed(2), y: (H - bottom - h).toFixed(2), width: (slot * 0.7).toFixed(2), height: h.toFixed(2) });
      bar.appendChild(TG.svg('title', { text: `${p.day}: ${TG.credits(p.value)}` }));
      svg.appendChild(bar);
      // A date under every seventh bar, counted back from today's.
      if ((points.length - 1 - i) % 7 === 0) {
        const last = i === points.length - 1;
        svg.appendChild(TG.svg('text', { class: 'tick', x: (last ? x + slot * 0.7 : x + slot * 0.35).toFixed(2), y: H - 6,
          'text-anchor': last ? 'end' : 'middle', text: p.day.slice(5) }));
      }
    });
    return TG.h('figure', { class: 'chart-box' }, svg, TG.h('figcaption', { class: 'muted', text: summary }));
  };

  // Sums values by day over the last `days` days: rows of {day: 'YYYY-MM-DD', value}.
  TG.perDay = (rows, days) => {
    const by = new Map(TG.lastDays(days).map((d) => [d, 0]));
    for (const r of rows) if (by.has(r.day) && TG.num(r.value) !== null) by.set(r.day, by.get(r.day) + r.value);
    return [...by.entries()].map(([day, value]) => ({ day, value: +value.toFixed(6) }));
  };
})();
