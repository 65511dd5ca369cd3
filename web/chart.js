// The live loss curve: train loss per step (line) and validation loss (dots) on one canvas.
export function drawChart(canvas, train, val) {
  const ctx = canvas.getContext('2d'), W = canvas.width, H = canvas.height;
  const css = getComputedStyle(document.documentElement);
  const fg = css.getPropertyValue('--muted').trim() || '#666';
  const accent = css.getPropertyValue('--accent').trim() || '#2f6fde';
  const valColour = css.getPropertyValue('--val').trim() || '#d9480f';
  ctx.clearRect(0, 0, W, H);
  const L = 56, R = 16, T = 16, B = 36;
  const pts = train.concat(val);
  ctx.font = '12px system-ui, sans-serif';
  ctx.fillStyle = fg;
  if (!pts.length) {
    ctx.fillText('the loss curve appears here while training', L, H / 2);
    return;
  }
  const xmax = Math.max(1, ...pts.map((p) => p[0]));
  let ymin = Math.min(...pts.map((p) => p[1])), ymax = Math.max(...pts.map((p) => p[1]));
  if (ymax - ymin < 1e-3) { ymin -= 0.5; ymax += 0.5; }
  const pad = (ymax - ymin) * 0.05;
  ymin -= pad; ymax += pad;
  const x = (s) => L + (W - L - R) * s / xmax, y = (v) => T + (H - T - B) * (ymax - v) / (ymax - ymin);
  ctx.strokeStyle = fg;
  ctx.globalAlpha = 0.3;
  ctx.beginPath();
  for (let i = 0; i <= 4; ++i) {
    const v = ymin + (ymax - ymin) * i / 4;
    ctx.moveTo(L, y(v)); ctx.lineTo(W - R, y(v));
  }
  ctx.stroke();
  ctx.globalAlpha = 1;
  ctx.textAlign = 'right';
  for (let i = 0; i <= 4; ++i) {
    const v = ymin + (ymax - ymin) * i / 4;
    ctx.fillText(v.toFixed(2), L - 6, y(v) + 4);
  }
  ctx.textAlign = 'center';
  for (let i = 0; i <= 4; ++i) {
    const s = Math.round(xmax * i / 4);
    ctx.fillText(String(s), x(s), H - B + 16);
  }
  ctx.fillText('step', (L + W - R) / 2, H - 4);
  ctx.save();
  ctx.translate(14, (T + H - B) / 2); ctx.rotate(-Math.PI / 2); ctx.fillText('loss (nats/token)', 0, 0);
  ctx.restore();
  ctx.strokeStyle = accent;
  ctx.lineWidth = 1.5;
  ctx.beginPath();
  train.forEach((p, i) => (i ? ctx.lineTo(x(p[0]), y(p[1])) : ctx.moveTo(x(p[0]), y(p[1]))));
  ctx.stroke();
  ctx.fillStyle = valColour;
  for (const p of val) { ctx.beginPath(); ctx.arc(x(p[0]), y(p[1]), 4, 0, 2 * Math.PI); ctx.fill(); }
  ctx.textAlign = 'left';
  ctx.fillStyle = accent; ctx.fillText('train', W - R - 110, T + 12);
  ctx.fillStyle = valColour; ctx.fillText('● validation', W - R - 70, T + 12);
}
