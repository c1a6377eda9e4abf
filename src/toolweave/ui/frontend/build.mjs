// Bundles src/main.js and the npm packages it imports into ../static/app.js: one script, no network at run time.
// Run from this folder: `npm ci && node build.mjs` (or `make ui-assets` from the repository root).
import { build } from 'esbuild';

await build({
  entryPoints: ['src/main.js'],
  bundle: true,
  minify: true,
  format: 'iife',
  target: ['chrome100', 'firefox100', 'safari15'],
  legalComments: 'eof', // the licences of the bundled packages stay in the file
  outfile: '../static/app.js',
  logLevel: 'info',
});
