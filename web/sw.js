// Offline use: the page's files are kept in the Cache API once loaded, and served from there when the
// network is gone. Network first, so a rebuilt page is picked up at the next online load.
const CACHE = 'edgetrain-page-v1';
const FILES = ['./', 'index.html', 'style.css', 'app.js', 'runner.js', 'store.js', 'chart.js', 'edgetrain.js',
  'edgetrain.wasm', 'kjv-excerpt.txt'];

self.addEventListener('install', (e) => {
  e.waitUntil(caches.open(CACHE).then((c) => c.addAll(FILES)).then(() => self.skipWaiting()));
});
self.addEventListener('activate', (e) => e.waitUntil(self.clients.claim()));
self.addEventListener('fetch', (e) => {
  if (e.request.method !== 'GET') return;
  e.respondWith(fetch(e.request).then((r) => {
    if (r.ok) { const copy = r.clone(); caches.open(CACHE).then((c) => c.put(e.request, copy)); }
    return r;
  }).catch(() => caches.match(e.request, { ignoreSearch: true }).then((r) => r || Response.error())));
});
