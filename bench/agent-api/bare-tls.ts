// The memory reference of bench/agent-api: a bare Node.js HTTPS server that requests client certificates (from a CA it
// is given, as the agent port does) and holds every request it receives, with the same number of clients, each on its
// own keep-alive connection with a CA-signed client certificate and one request held: what Node and OpenSSL alone cost
// per connected agent, under the server's own figure. The certificates come from the openssl command.
// Run by run.ts (measureBareTls); this file is also the server (`server` argv) and the clients (`clients` argv).
import { execFileSync, fork } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { Agent, createServer, request } from 'node:https';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** RSS (KB) and V8 heap in use (KB) of this process after a full GC. */
function memory(): { rssKb: number; heapUsedKb: number } {
  (globalThis as { gc?: () => void }).gc?.();
  const rssKb = Number(/VmRSS:\s+(\d+)/.exec(readFileSync('/proc/self/status', 'utf8'))?.[1] ?? Number.NaN);
  return { rssKb, heapUsedKb: process.memoryUsage().heapUsed / 1024 };
}

function openssl(args: string[]): void {
  execFileSync('openssl', args, { stdio: 'ignore' });
}

/** A CA, a server certificate for 127.0.0.1 and a client certificate, all ECDSA P-256 as the control plane's are. */
function makeCertificates(dir: string): void {
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes'];
  const f = (name: string) => join(dir, name);
  openssl(['req', '-x509', ...ec, '-keyout', f('ca.key'), '-out', f('ca.crt'), '-subj', '/CN=bench-ca', '-days', '1']);
  writeFileSync(f('server.ext'), 'subjectAltName=IP:127.0.0.1\n');
  for (const [name, subject] of [
    ['server', '/CN=127.0.0.1'],
    ['client', '/CN=node_bench'],
  ] as const) {
    openssl(['req', ...ec, '-keyout', f(`${name}.key`), '-out', f(`${name}.csr`), '-subj', subject]);
    openssl([
      'x509',
      '-req',
      '-in',
      f(`${name}.csr`),
      '-CA',
      f('ca.crt'),
      '-CAkey',
      f('ca.key'),
      '-CAcreateserial',
      '-out',
      f(`${name}.crt`),
      '-days',
      '1',
      ...(name === 'server' ? ['-extfile', f('server.ext')] : []),
    ]);
  }
}

/**
 * The bare server's RSS and heap with no client, then with `clients` connected and each holding one request.
 *
 * @example
 * ```ts
 * const { none, connected } = await measureBareTls(1000, mkdtempSync(join(tmpdir(), 'bare-')));
 * ```
 */
export async function measureBareTls(
  clients: number,
  dir: string,
): Promise<{
  none: { rssKb: number; heapUsedKb: number };
  connected: { rssKb: number; heapUsedKb: number };
  held: number;
}> {
  makeCertificates(dir);
  const file = fileURLToPath(import.meta.url);
  const server = fork(file, ['server', dir], { execArgv: [...process.execArgv, '--expose-gc'], stdio: 'inherit' });
  const messages: unknown[] = [];
  const waiting: ((message: unknown) => void)[] = [];
  server.on('message', (message) => {
    const waiter = waiting.shift();
    if (waiter) waiter(message);
    else messages.push(message);
  });
  const next = async <T>() =>
    (messages.shift() ?? (await new Promise<unknown>((resolve) => waiting.push(resolve)))) as T;
  const port = await next<number>();
  const run = async (count: number) => {
    const child = fork(file, ['clients', dir, String(port), String(count)], { stdio: 'inherit' });
    await new Promise((resolve) => child.once('message', resolve));
    return child;
  };
  try {
    // Warm up with a few clients, answered and gone, so the baseline is a server that has served.
    const warm = await run(20);
    await sleep(1_000);
    server.send('release');
    await sleep(500);
    warm.kill();
    await sleep(1_500);
    server.send('memory');
    const none = await next<{ rssKb: number; heapUsedKb: number; held: number }>();
    const all = await run(clients);
    await sleep(3_000);
    server.send('memory');
    const connected = await next<{ rssKb: number; heapUsedKb: number; held: number }>();
    all.kill();
    return { none, connected, held: connected.held };
  } finally {
    server.kill();
  }
}

const [role, dir, portArg, countArg] = process.argv.slice(2);
if (role === 'server' && dir) {
  const held: { end(body: string): void }[] = [];
  const server = createServer(
    {
      key: readFileSync(join(dir, 'server.key')),
      cert: readFileSync(join(dir, 'server.crt')),
      ca: readFileSync(join(dir, 'ca.crt')),
      requestCert: true,
      rejectUnauthorized: false,
    },
    (req, res) => {
      req.resume();
      req.on('end', () => held.push(res));
    },
  );
  server.listen(0, '127.0.0.1', () => process.send?.((server.address() as AddressInfo).port));
  process.on('message', (message) => {
    if (message === 'memory') process.send?.({ ...memory(), held: held.length });
    if (message === 'release') for (const res of held.splice(0)) res.end('{"commands":[]}');
  });
} else if (role === 'clients' && dir) {
  const key = readFileSync(join(dir, 'client.key'));
  const cert = readFileSync(join(dir, 'client.crt'));
  const ca = readFileSync(join(dir, 'ca.crt'));
  for (let i = 0; i < Number(countArg); i++) {
    const agent = new Agent({ keepAlive: true, key, cert, ca });
    const body = '{"waitMs":25000,"limit":1}';
    const req = request(
      {
        host: '127.0.0.1',
        port: Number(portArg),
        method: 'POST',
        path: '/agent/v1/commands.poll',
        agent,
        headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
      },
      (res) => res.resume(),
    );
    req.on('error', () => undefined);
    req.end(body);
    if (i % 50 === 49) await sleep(50);
  }
  process.send?.('sent');
  setInterval(() => undefined, 60_000);
}
