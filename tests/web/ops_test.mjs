// The op catalogue in the page: tests/test_ops.cpp with its case files, compiled to WebAssembly
// (build-web/edgetrain_op_tests.*), runs every op's WebGPU kernels through the page's navigator.gpu binding
// against the CPU reference, in headless chromium. A browser-only WGSL or binding bug fails here.
//   node tests/web/ops_test.mjs --site build-web/site [--filter 'Catalogue/*webgpu_*']
import { parseArgs, serve, launch, openPage } from './browser.mjs';

const args = parseArgs(process.argv.slice(2));
const server = await serve(args.site);
const browser = await launch();
let code = 1;
try {
  const filter = args.filter || 'Catalogue/*webgpu_*';
  const page = await openPage(browser.context, `${server.url}ops.html?filter=${encodeURIComponent(filter)}`);
  await page.waitForFunction(() => document.body.dataset.phase === 'done', null, { timeout: 1500_000, polling: 1000 });
  console.log(await page.textContent('#log'));
  const exit = await page.evaluate(() => document.body.dataset.exit);
  console.log(`op tests in the page: exit status ${exit}`);
  code = exit === '0' ? 0 : 1;
} finally {
  await browser.close();
  server.close();
}
process.exit(code);
