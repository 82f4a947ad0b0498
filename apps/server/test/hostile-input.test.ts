import { generateSigningKeyPair } from '@better-compute/pki';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Entries, expectDocumentedAnswer, jsonText, openRaw, RawJson, rawExchange } from './support/hostile';
import { type Answer, api, call, type ServerProcess, startServer, tempDir } from './support/server-process';

// Issue 18: bad HTTP input gets the documented error and never crashes the process. One server child process on PGlite
// over real HTTPS; fuzzed bodies (fast-check) against a sample of operator methods and the agent API (with and without
// a client certificate), then oversized, malformed, mistyped and misrouted requests. Every answer is 200 (a fuzzed
// input that happens to be valid) or a 4xx with `{ code, message, details }`, never a 5xx, and the server stays
// healthy. Slow clients are in slow-clients.test.ts, the secret scan in secret-scan.test.ts.

let server: ServerProcess;
let dir: Awaited<ReturnType<typeof tempDir>>;
let siteId: string;
let agent: { certificatePem: string; privateKeyPem: string; nodeId: string };

beforeAll(async () => {
  dir = await tempDir('bc-hostile-');
  server = await startServer({ dataDir: dir.path });
  siteId = (await api(server, 'sites.create', { tenantId: 'root', name: 'hostile' })).json().id as string;
  const token = (await api(server, 'sites.joinToken', { tenantId: 'root', siteId })).json().token as string;
  const key = generateSigningKeyPair('es256');
  const joined = await call(`${server.agentUrl}/agent/v1/join`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ token, publicKey: key.publicJwk }),
    ca: server.ca,
  });
  expect(joined.status, joined.text).toBe(200);
  agent = {
    certificatePem: joined.json().certificatePem as string,
    privateKeyPem: key.privateKeyPem,
    nodeId: joined.json().nodeId as string,
  };
}, 60_000);

afterAll(async () => {
  await server?.stop();
  await dir?.remove();
});

const post = (
  url: string,
  body: string | Buffer,
  headers: Record<string, string> = {},
  cert = false,
): Promise<Answer> =>
  call(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body,
    ca: server.ca,
    ...(cert ? { cert: agent.certificatePem, key: agent.privateKeyPem } : {}),
  });
const operator = (method: string, body: string | Buffer, headers: Record<string, string> = {}) =>
  post(`${server.apiUrl}/v1/${method}`, body, { authorization: `Bearer ${server.adminToken}`, ...headers });
const agentCall = (method: string, body: string | Buffer, cert: boolean) =>
  post(`${server.agentUrl}/agent/v1/${method}`, body, {}, cert);

async function expectHealthy(): Promise<void> {
  expect(server.child.exitCode).toBeNull();
  const health = await call(`${server.apiUrl}/healthz`, { ca: server.ca });
  expect(health.status).toBe(200);
  const ready = await call(`${server.apiUrl}/readyz`, { ca: server.ca });
  expect(ready.status, ready.text).toBe(200);
}

// ---- what the fuzzer feeds in ----

/** Numbers JSON.stringify cannot write: out of double range, beyond 2^53, negative zero, tiny. */
const hugeNumber = fc.constantFrom(
  new RawJson('1e400'),
  new RawJson('-1e400'),
  new RawJson('123456789012345678901234567890123456789'),
  new RawJson('9007199254740993'),
  new RawJson('-0'),
  new RawJson('1e-400'),
  new RawJson('0.1e1'),
  2 ** 31,
  -1,
  Number.MAX_SAFE_INTEGER,
);

/** Strings of every kind: full unicode, lone surrogates, NULs, control characters, long. */
const hostileString = fc.oneof(
  fc.string({ unit: 'binary', maxLength: 40 }),
  fc.string({ unit: fc.integer({ min: 0xd800, max: 0xdfff }).map((c) => String.fromCharCode(c)), minLength: 1 }),
  fc.constantFrom('\u0000', 'a\u0000b', '\u202e', '\ufeff', '../../etc/passwd', '%00', '{{7*7}}', "'; DROP TABLE x;--"),
  fc.integer({ min: 1_000, max: 200_000 }).map((n) => 'x'.repeat(n)),
);

/** Objects carrying prototype-pollution keys, written as JSON text (an object literal would drop `__proto__`). */
const pollutingObject = fc
  .tuple(fc.jsonValue({ maxDepth: 2 }), fc.constantFrom('__proto__', 'constructor', 'prototype', 'toString'))
  .map(
    ([value, key]) =>
      new Entries([
        [key, key === 'constructor' ? new Entries([['prototype', new Entries([['polluted', value]])]]) : value],
        [
          '__proto__',
          new Entries([
            ['isAdmin', true],
            ['tenantId', 'other'],
          ]),
        ],
      ]),
  );

/** Nesting far deeper than anything legitimate: arrays or objects, up to 100,000 levels (under the 1 MiB limit). */
const deepNesting = fc
  .tuple(fc.integer({ min: 10, max: 100_000 }), fc.boolean(), fc.constantFrom('1', '"\\u0000"', '"\\ud800"', 'null'))
  .map(([depth, arrays, leaf]) =>
    arrays
      ? new RawJson(`${'['.repeat(depth)}${leaf}${']'.repeat(depth)}`)
      : new RawJson(`${'{"a":'.repeat(depth)}${leaf}${'}'.repeat(depth)}`),
  );

/** Any hostile value for one field. */
const hostileValue: fc.Arbitrary<unknown> = fc.oneof(
  fc.jsonValue({ maxDepth: 3 }),
  hugeNumber,
  hostileString,
  pollutingObject,
  deepNesting,
  fc.constantFrom(null, true, [], {}, [null], { $ref: '#' }),
);

/** A valid-looking body with one field replaced by, or one field added with, a hostile value. */
function mutatedBody(base: Record<string, unknown>): fc.Arbitrary<string> {
  const keys = Object.keys(base);
  return fc
    .tuple(
      fc.oneof(fc.constantFrom(...keys), fc.constantFrom('__proto__', 'constructor', 'unknownField'), fc.string()),
      hostileValue,
      fc.boolean(),
    )
    .map(([key, value, drop]) => {
      const entries: [string, unknown][] = Object.entries(base).filter(([k]) => k !== key || !drop);
      const at = entries.findIndex(([k]) => k === key);
      if (at >= 0) entries[at] = [key, value];
      else if (!drop) entries.push([key, value]);
      return jsonText(new Entries(entries));
    });
}

/** Any body: a mutated valid one, random JSON, random bytes, a deep nest, a bare number or string. */
function anyBody(base: Record<string, unknown>): fc.Arbitrary<string | Buffer> {
  return fc.oneof(
    { weight: 5, arbitrary: mutatedBody(base) },
    { weight: 2, arbitrary: fc.jsonValue({ maxDepth: 4 }).map((v) => JSON.stringify(v)) },
    { weight: 1, arbitrary: fc.uint8Array({ maxLength: 256 }).map((bytes) => Buffer.from(bytes)) },
    { weight: 1, arbitrary: fc.oneof(deepNesting, hugeNumber, pollutingObject).map((v) => jsonText(v)) },
    { weight: 1, arbitrary: hostileString.map((s) => JSON.stringify(s)) },
  );
}

const describeBody = (body: string | Buffer) =>
  typeof body === 'string' ? body.slice(0, 200) : `bytes ${body.toString('hex').slice(0, 200)}`;

// ---- the tests ----

describe('fuzzed bodies on the operator API', () => {
  const bmc = { address: '10.0.0.7', driver: 'redfish', username: 'admin', password: 'fuzz-bmc-password' };
  const bases: Record<string, () => Record<string, unknown>> = {
    'metal.enroll': () => ({ tenantId: 'root', siteId, name: 'fuzz', bmc, macs: ['0c:42:a1:00:00:01'] }),
    'metal.list': () => ({ tenantId: 'root', state: 'enrolling', limit: 10 }),
    'profiles.create': () => ({
      tenantId: 'root',
      profile: { id: 'fuzz.profile', version: 1, steps: [{ id: 'a', action: 'metal.powerOn' }] },
    }),
    'workflows.list': () => ({ tenantId: 'root', nodeId: agent.nodeId, limit: 5 }),
    'images.register': () => ({
      tenantId: 'root',
      name: 'fuzz/image',
      version: '1.0.0',
      digest: `sha256:${'0'.repeat(64)}`,
      signature: 'AAAA',
      url: 'https://images.example.com/fuzz.img',
    }),
    'credentials.create': () => ({ tenantId: 'root', name: 'fuzz', permissions: ['compute:metal:read'] }),
    'sites.create': () => ({ tenantId: 'root', name: 'fuzz-site' }),
  };

  for (const [method, base] of Object.entries(bases)) {
    it(`${method}: every answer is 200 or a documented 4xx error`, async () => {
      await fc.assert(
        fc.asyncProperty(anyBody(base()), async (body) => {
          const answer = await operator(method, body);
          expectDocumentedAnswer(answer, `${method} ${describeBody(body)}`);
        }),
        { numRuns: 30 },
      );
    });
  }

  it('refuses unauthenticated fuzzed calls with 401 before reading the body', async () => {
    await fc.assert(
      fc.asyncProperty(
        anyBody(bases['sites.create']?.() ?? {}),
        fc.constantFrom(
          '',
          'Bearer',
          'Bearer ',
          'Basic YWRtaW46YWRtaW4=',
          `Bearer ${'a'.repeat(8_000)}`,
          'Bearer bc_x_y',
        ),
        async (body, authorization) => {
          const answer = await post(`${server.apiUrl}/v1/sites.create`, body, authorization ? { authorization } : {});
          const error = expectDocumentedAnswer(
            answer,
            `${authorization.slice(0, 20)} ${describeBody(body)}`,
            [401],
            false,
          );
          expect(error?.code).toBe('UNAUTHENTICATED');
        },
      ),
      { numRuns: 20 },
    );
  });

  it('refuses text PostgreSQL cannot store, and pollution keys change nothing', async () => {
    const surrogate = await operator('sites.create', '{"tenantId":"root","name":"a\\ud800b"}');
    expect(expectDocumentedAnswer(surrogate, 'lone surrogate', [400], false)?.details.path).toEqual(['name']);
    const nul = await operator('sites.create', '{"tenantId":"root","name":"a\\u0000b"}');
    expect(expectDocumentedAnswer(nul, 'NUL', [400], false)?.details.path).toEqual(['name']);
    const key = await operator('metal.list', '{"tenantId":"root","selector":{"a\\u0000":"b"}}');
    expect(expectDocumentedAnswer(key, 'NUL key', [400], false)?.details.path).toEqual(['selector', 'a\u0000']);

    // `__proto__` in the body is a plain key, not the prototype: it neither supplies tenantId nor changes the tenant.
    const proto = await operator('metal.list', '{"__proto__":{"tenantId":"root"}}');
    expect(expectDocumentedAnswer(proto, '__proto__ tenantId', [400], false)?.details.path).toEqual(['tenantId']);
    const created = await operator(
      'sites.create',
      '{"tenantId":"root","name":"proto-site","__proto__":{"tenantId":"other","isAdmin":true},"constructor":{"prototype":{"polluted":true}}}',
    );
    expect(created.status, created.text).toBe(200);
    expect(created.json()).toMatchObject({ tenantId: 'root', name: 'proto-site' });
    expect(created.json()).not.toHaveProperty('isAdmin');
    expect(created.json()).not.toHaveProperty('polluted');
    const listed = await api(server, 'sites.list', { tenantId: 'root' });
    expect(listed.text).not.toContain('polluted');
    expect(listed.text).not.toContain('isAdmin');
  });

  it('survives numbers out of range and deep nesting in fields that take any JSON', async () => {
    for (const leaf of ['1e400', '123456789012345678901234567890', '-0']) {
      const answer = await operator('metal.list', `{"tenantId":"root","limit":${leaf}}`);
      expect(expectDocumentedAnswer(answer, leaf, [400], false)?.details.path).toEqual(['limit']);
    }
    for (const depth of [65, 1_000, 100_000]) {
      const nest = `${'{"a":'.repeat(depth)}"\\ud800"${'}'.repeat(depth)}`;
      for (const [method, body] of [
        ['metal.list', `{"tenantId":"root","selector":${nest}}`],
        ['profiles.create', `{"tenantId":"root","profile":${nest}}`],
        ['profiles.validate', `{"tenantId":"root","profile":{"id":"deep","version":1,"steps":[],"params":${nest}}}`],
        ['metal.setLabels', `{"tenantId":"root","nodeId":"${agent.nodeId}","labels":${nest}}`],
      ] as const) {
        expectDocumentedAnswer(await operator(method, body), `${method} depth ${depth}`);
      }
    }
    await expectHealthy();
  });

  it('stays healthy after the fuzzing', async () => {
    await expectHealthy();
    const listed = await api(server, 'metal.list', { tenantId: 'root' });
    expect(listed.status).toBe(200);
  });
});

describe('fuzzed bodies on the agent API', () => {
  const bases: Record<string, () => Record<string, unknown>> = {
    join: () => ({ token: 'bcj_not_a_token', publicKey: generateSigningKeyPair('es256').publicJwk }),
    'sessions.open': () => ({ role: 'site', bootId: 'boot-fuzz' }),
    'commands.poll': () => ({ limit: 5 }),
    'commands.complete': () => ({ commandId: 'cmd_01', result: 'eyJvayI6dHJ1ZX0=' }),
    'commands.fail': () => ({ commandId: 'cmd_01', reason: 'fuzz' }),
    'inventory.report': () => ({ inventory: { cpu: { cores: 64 }, disks: [{ name: 'nvme0n1' }] } }),
    'spec.report': () => ({ observedGeneration: 1 }),
    'secrets.fetch': () => ({ commandId: 'cmd_01', ref: 'sec_01' }),
  };

  for (const [method, base] of Object.entries(bases)) {
    for (const cert of [true, false]) {
      it(`${method} ${cert ? 'with' : 'without'} a client certificate: 200 or a documented 4xx error`, async () => {
        await fc.assert(
          fc.asyncProperty(anyBody(base()), async (body) => {
            const answer = await agentCall(method, body, cert);
            const error = expectDocumentedAnswer(answer, `${method} ${describeBody(body)}`);
            if (!cert && method !== 'join') expect(error?.code).toBe('UNAUTHENTICATED');
          }),
          { numRuns: cert ? 20 : 8 },
        );
      });
    }
  }

  it('refuses deep and huge inventories with INVALID_INPUT', async () => {
    for (const depth of [65, 1_000, 100_000]) {
      const nest = `${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}`;
      const answer = await agentCall('inventory.report', `{"inventory":${nest}}`, true);
      expectDocumentedAnswer(answer, `inventory depth ${depth}`, [400], false);
    }
    const big = await agentCall('inventory.report', JSON.stringify({ inventory: { blob: 'x'.repeat(70_000) } }), true);
    expect(expectDocumentedAnswer(big, 'big inventory', [400], false)?.details).toMatchObject({
      path: ['inventory'],
      reason: 'body-too-large',
    });
  });

  it('the agent is still served after the fuzzing', async () => {
    await expectHealthy();
    const session = await agentCall('sessions.open', JSON.stringify({ role: 'site', bootId: 'boot-after' }), true);
    expect([200, 401], session.text).toContain(session.status);
  });
});

describe('malformed, oversized and misrouted requests', () => {
  const auth = () => ({ authorization: `Bearer ${server.adminToken}`, 'content-type': 'application/json' });
  const rawRequest = (path: string, headers: Record<string, string>, body: string | Buffer = '', method = 'POST') => {
    const bytes = Buffer.isBuffer(body) ? body : Buffer.from(body, 'utf8');
    if (bytes.length > 0 && !headers['content-length'] && !headers['transfer-encoding']) {
      headers = { ...headers, 'content-length': String(bytes.length) };
    }
    const head = `${method} ${path} HTTP/1.1\r\nhost: localhost\r\nconnection: close\r\n${Object.entries(headers)
      .map(([k, v]) => `${k}: ${v}\r\n`)
      .join('')}\r\n`;
    return Buffer.concat([Buffer.from(head, 'latin1'), bytes]);
  };
  const agentTls = () => ({ ca: server.ca, cert: agent.certificatePem, key: agent.privateKeyPem });

  it('malformed JSON, invalid UTF-8 and a wrong content-type', async () => {
    for (const body of [
      '{"tenantId":',
      '{tenantId:"root"}',
      "{'a':1}",
      '[1,2,',
      '{"a":1}}',
      'NaN',
      'undefined',
      '\u0000',
    ]) {
      const answer = await operator('sites.list', body);
      const error = expectDocumentedAnswer(answer, body, [400], false);
      expect(error?.details, body).toEqual({ path: [], reason: 'malformed-json' });
      expect(answer.text, 'the parser message quotes the body').not.toContain('Unexpected');
      const agentAnswer = await agentCall('commands.poll', body, true);
      expect(expectDocumentedAnswer(agentAnswer, body, [400], false)?.details).toEqual({
        path: [],
        reason: 'malformed-json',
      });
    }
    for (const bytes of [
      Buffer.from([0x7b, 0x22, 0x61, 0x22, 0x3a, 0x22, 0xff, 0xfe, 0x22, 0x7d]),
      Buffer.from([0xc0, 0xaf]),
      Buffer.from([0xed, 0xa0, 0x80]),
      Buffer.from('{"tenantId":"root"}', 'utf16le'),
    ]) {
      const answer = await operator('sites.list', bytes);
      expect(expectDocumentedAnswer(answer, bytes.toString('hex'), [400], false)?.details.reason).toBe(
        'malformed-json',
      );
      const agentAnswer = await agentCall('join', bytes, false);
      expect(expectDocumentedAnswer(agentAnswer, bytes.toString('hex'), [400], false)?.details.reason).toBe(
        'malformed-json',
      );
    }
    // Content-Type is not enforced (core's api.md): the body is JSON whatever the header says.
    for (const type of ['text/plain', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x', '']) {
      const answer = await operator('sites.list', '{"tenantId":"root"}', { 'content-type': type });
      expect(answer.status, type).toBe(200);
      const wrong = await operator('sites.list', 'tenantId=root', { 'content-type': type });
      expect(expectDocumentedAnswer(wrong, type, [400], false)?.details.reason).toBe('malformed-json');
    }
  });

  it('oversized bodies: declared, undeclared (chunked) and streamed past the limit', async () => {
    const limit = 1024 * 1024;
    const tooLarge = { path: [], reason: 'body-too-large', limitBytes: limit };
    // Declared: refused from the header, before the body arrives (only a little of it is sent).
    for (const [url, path, status, headers] of [
      [server.apiUrl, '/v1/sites.list', 413, auth()],
      [server.agentUrl as string, '/agent/v1/commands.poll', 400, { 'content-type': 'application/json' }],
      [server.agentUrl as string, '/agent/v1/join', 400, { 'content-type': 'application/json' }],
    ] as const) {
      const answer = await rawExchange(
        url,
        agentTls(),
        rawRequest(path, { ...headers, 'content-length': String(10 * limit) }, '{"tenantId":"root"'),
      );
      expect(answer.status, `${path} ${answer.raw.slice(0, 200)}`).toBe(status);
      expect(JSON.parse(answer.text)).toEqual({
        code: 'INVALID_INPUT',
        message: expect.any(String),
        details: tooLarge,
      });
      // Chunked, no length declared: refused once the limit is passed.
      const chunked = await rawExchange(url, agentTls(), [
        rawRequest(path, { ...headers, 'transfer-encoding': 'chunked' }),
        ...Array.from({ length: 5 }, () => `40000\r\n${' '.repeat(0x40000)}\r\n`),
        '0\r\n\r\n',
      ]);
      expect(chunked.status, `${path} chunked ${chunked.raw.slice(0, 200)}`).toBe(status);
      expect(JSON.parse(chunked.text)).toMatchObject({ code: 'INVALID_INPUT', details: tooLarge });
    }
    // A body exactly at the limit is read (and is valid JSON padded with spaces).
    const padded = `{"tenantId":"root"}${' '.repeat(limit - 19)}`;
    expect((await operator('sites.list', padded)).status).toBe(200);
    const over = await operator('sites.list', `${padded} `);
    expect(over.status).toBe(413);
    await expectHealthy();
  });

  it('wrong HTTP methods on API methods are 405 with Allow: POST and details.path', async () => {
    for (const method of ['GET', 'PUT', 'DELETE', 'PATCH', 'OPTIONS']) {
      for (const url of [`${server.apiUrl}/v1/metal.list`, `${server.agentUrl}/agent/v1/commands.poll`]) {
        const answer = await call(url, {
          method,
          // Node frames a body of DELETE and OPTIONS only with a declared length.
          headers: method === 'GET' ? auth() : { ...auth(), 'content-length': '2' },
          ca: server.ca,
          ...(method === 'GET' ? {} : { body: '{}' }),
        });
        expect(answer.headers.allow, `${method} ${url}`).toBe('POST');
        const error = expectDocumentedAnswer(answer, `${method} ${url}`, [405], false);
        expect(error?.details, `${method} ${url}`).toMatchObject({ reason: 'method-not-allowed', path: [] });
      }
    }
    const head = await call(`${server.apiUrl}/v1/metal.list`, { method: 'HEAD', ca: server.ca });
    expect(head.status).toBe(405);
    // A method Node does not know is Node's own 400, and the connection ends.
    const unknown = await rawExchange(
      server.apiUrl,
      { ca: server.ca },
      rawRequest('/v1/metal.list', auth(), '', 'BREW'),
    );
    expect(unknown.status).toBe(400);
  });

  it('unknown paths are 404 NOT_FOUND with details.path', async () => {
    const operatorPaths = [
      '/',
      '/v1',
      '/v1/',
      '/v1/metal',
      '/v1/metal.list/extra',
      '/v1/metal.nothing',
      '/v1/__proto__.x',
      '/v1/constructor.name',
      '/v1/hasOwnProperty.call',
      '/v1/metal.__proto__',
      '/v1/%00',
      '/v1/%E0%A4%A',
      '/v1/%ZZ',
      '/v1/..%2F..%2Fhealthz',
      `/v1/${'a'.repeat(4_000)}.b`,
      '/v2/metal.list',
      '/agent/v1/join',
    ];
    for (const path of operatorPaths) {
      const answer = await rawExchange(server.apiUrl, { ca: server.ca }, rawRequest(path, auth(), '{}'));
      const error = expectDocumentedAnswer(answer, path, [404], false);
      expect(error?.code, path).toBe('NOT_FOUND');
      expect(error?.details.path, path).toEqual(expect.any(Array));
    }
    const agentPaths = [
      '/',
      '/agent/v1/',
      '/agent/v1/__proto__',
      '/agent/v1/constructor',
      '/agent/v1/hasOwnProperty',
      '/agent/v1/toString',
      '/agent/v1/commands',
      '/agent/v1/%ZZ',
      '/agent/v2/join',
      '/v1/metal.list',
      `/agent/v1/${'a'.repeat(4_000)}`,
    ];
    for (const path of agentPaths) {
      for (const cert of [true, false]) {
        const answer = await rawExchange(
          server.agentUrl as string,
          cert ? agentTls() : { ca: server.ca },
          rawRequest(path, { 'content-type': 'application/json' }, '{}'),
        );
        expect(expectDocumentedAnswer(answer, `${path} cert ${cert}`, [404], false)?.details.path).toEqual(['method']);
      }
    }
  });

  it('requests that are not HTTP, or whose headers are too large, end the connection and nothing else', async () => {
    for (const garbage of [
      'GARBAGE\r\n\r\n',
      'POST /v1/metal.list HTTP/9.9\r\n\r\n',
      'POST /v1/metal.list HTTP/1.1\r\nhost: x\r\ncontent-length: 5\r\ncontent-length: 7\r\n\r\n{}',
      'POST /v1/metal.list HTTP/1.1\r\nhost: x\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n',
      `POST /v1/metal.list HTTP/1.1\r\nhost: x\r\nx-big: ${'a'.repeat(20_000)}\r\n\r\n`,
      Buffer.from([0x16, 0x03, 0x01, 0x00, 0xff, 0x00]),
    ]) {
      for (const url of [server.apiUrl, server.agentUrl as string]) {
        const answer = await rawExchange(url, { ca: server.ca }, garbage);
        expect([0, 400, 413, 431], answer.raw.slice(0, 100)).toContain(answer.status);
      }
    }
    await expectHealthy();
  });

  it('a client that goes away mid-body, or breaks its chunked encoding, is a 400 in the log and nothing else', async () => {
    const partial = (headers: Record<string, string>): Record<string, string>[] => [
      { ...headers, 'content-length': '100' },
      { ...headers, 'transfer-encoding': 'chunked' },
    ];
    for (const [url, path, headers, tls] of [
      [server.apiUrl, '/v1/sites.list', auth(), { ca: server.ca }],
      [server.apiUrl, '/v1/sites.list', { 'content-type': 'application/json' }, { ca: server.ca }],
      [server.agentUrl as string, '/agent/v1/join', { 'content-type': 'application/json' }, { ca: server.ca }],
      [server.agentUrl as string, '/agent/v1/commands.poll', { 'content-type': 'application/json' }, agentTls()],
    ] as const) {
      for (const head of partial(headers)) {
        const connection = await openRaw(url, tls);
        const chunked = head['transfer-encoding'] === 'chunked';
        connection.write(rawRequest(path, head, chunked ? '20\r\n{"tenantId":' : '{"tenantId":"ro'));
        await new Promise((resolve) => setTimeout(resolve, 100));
        connection.destroy();
        await connection.closed;
      }
      // Broken chunked encoding: Node answers 400 and ends the connection.
      const broken = await rawExchange(
        url,
        tls,
        rawRequest(path, { ...headers, 'transfer-encoding': 'chunked' }, '5\r\n{"ten\r\nzz\r\n'),
      );
      expect(broken.status).toBe(400);
    }
    await new Promise((resolve) => setTimeout(resolve, 200));
    await expectHealthy();
  });

  it('logged no 5xx and no unhandled error through all of this', () => {
    const lines = server
      .stderr()
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as Record<string, unknown>);
    const bad = lines.filter(
      (entry) =>
        (typeof entry.status === 'number' && entry.status >= 500) ||
        entry.level === 'fatal' ||
        entry.msg === 'unhandled error' ||
        entry.msg === 'API handler failed' ||
        entry.msg === 'agent API: a call failed',
    );
    expect(bad).toEqual([]);
  });
});
