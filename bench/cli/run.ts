import { execFileSync, spawnSync } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

// A cold `better-compute --help`: a new node process running the built bin (tsup's dist, as users install it), beside
// the same for `node -e 0` (the floor: node's own start) in the same run. Issue 19's budget is 300 ms.

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const cliDir = join(root, 'packages', 'cli');
const runs = Number(process.env.BENCH_RUNS ?? 20);

execFileSync('pnpm', ['exec', 'tsup'], { cwd: cliDir, stdio: 'ignore' });
const bin = join(cliDir, 'dist', 'bin.js');

function measure(args: string[]): number[] {
  const times: number[] = [];
  for (let i = 0; i < runs; i += 1) {
    const started = performance.now();
    const result = spawnSync(process.execPath, args, { stdio: 'ignore' });
    if (result.status !== 0) throw new Error(`${args.join(' ')} exited ${result.status}`);
    times.push(performance.now() - started);
  }
  return times.sort((a, b) => a - b);
}

const at = (sorted: number[], q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? 0;
const line = (name: string, sorted: number[]) =>
  `${name.padEnd(28)} p50 ${at(sorted, 0.5).toFixed(0).padStart(4)} ms   p90 ${at(sorted, 0.9).toFixed(0).padStart(4)} ms   min ${(sorted[0] ?? 0).toFixed(0).padStart(4)} ms`;

const help = measure([bin, '--help']);
const metalHelp = measure([bin, 'metal', 'deploy', '--help']);
const floor = measure(['-e', '0']);
console.log(`cold starts, ${runs} runs each, node ${process.version}`);
console.log(line('better-compute --help', help));
console.log(line('better-compute metal deploy --help', metalHelp));
console.log(line('node -e 0 (reference)', floor));
console.log(`target: p90 of a cold --help ≤ 300 ms: ${at(help, 0.9) <= 300 ? 'met' : 'missed'}`);
