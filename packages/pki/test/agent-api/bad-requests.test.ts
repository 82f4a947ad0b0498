import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAgentApi } from '../../src/agent-api';
import { type AgentHarness, createAgentHarness, type JoinedAgent } from './agent-harness';

let h: AgentHarness;
let agent: JoinedAgent;

beforeAll(async () => {
  h = await createAgentHarness();
  agent = await h.join();
});
afterAll(() => h.close());

const as = (method: string, body: unknown) => h.call(method, body, agent.certificatePem);

describe('agent API requests that are wrong', () => {
  it('answers an unknown method 404 and another HTTP method 405', async () => {
    const unknown = await as('commands.explode', {});
    expect(unknown.status).toBe(404);
    expect(unknown.body).toMatchObject({ code: 'NOT_FOUND', details: { path: ['method'] } });
    expect((await h.api.handle(new Request('https://cp.test/v1/commands.poll', { method: 'POST' }), {})).status).toBe(
      404,
    );
    const get = await h.api.handle(new Request('https://cp.test/agent/v1/commands.poll'), {
      certificatePem: agent.certificatePem,
    });
    expect(get.status).toBe(405);
    expect(get.headers.get('allow')).toBe('POST');
  });

  it('answers malformed JSON 400 INVALID_INPUT at the body, without quoting it', async () => {
    const { status, body } = await as('commands.poll', '{"waitMs": 1, "token": "tok_secret_in_a_broken_body"');
    expect(status).toBe(400);
    expect(body).toMatchObject({ code: 'INVALID_INPUT', details: { path: [], reason: 'malformed-json' } });
    expect(JSON.stringify(body)).not.toContain('tok_secret');
    const array = await as('commands.poll', '[1, 2]');
    expect(array.status).toBe(400);
    expect(array.body.details).toMatchObject({ path: [] });
  });

  it.each([
    ['join', { token: 42, publicKey: 'x' }, ['token']],
    ['join', { token: 'tok_1.abc', publicKey: 7 }, ['publicKey']],
    ['join', { token: 'tok_1.abc', publicKey: 'not a pem' }, ['publicKey']],
    ['join', { token: 'tok_1.abc', publicKey: {}, claims: 'mac' }, ['claims']],
    ['sessions.open', { role: 'admin', bootId: 'b' }, ['role']],
    ['sessions.open', { role: 'node', bootId: '' }, ['bootId']],
    ['commands.poll', { waitMs: -1 }, ['waitMs']],
    ['commands.poll', { waitMs: 1.5 }, ['waitMs']],
    ['commands.poll', { limit: 0 }, ['limit']],
    ['commands.poll', { limit: '5' }, ['limit']],
    ['commands.ack', { commandId: 5 }, ['commandId']],
    ['commands.ack', {}, ['commandId']],
    ['commands.complete', { commandId: 'cmd_1', result: '%%%' }, ['result']],
    ['commands.complete', { commandId: 'cmd_1', result: 'AAEC', attested: 'yes' }, ['attested']],
    [
      'commands.complete',
      { commandId: 'cmd_1', result: 'AAEC', attested: { alg: 'rsa', signature: 'AA', certificateSerial: '01' } },
      ['attested', 'alg'],
    ],
    [
      'commands.complete',
      { commandId: 'cmd_1', attested: { alg: 'es256', signature: 'AA', certificateSerial: '01' } },
      ['result'],
    ],
    ['commands.fail', { commandId: 'cmd_1' }, ['reason']],
    ['commands.reject', { commandId: 'cmd_1', reason: 'x'.repeat(5000) }, ['reason']],
    ['secrets.fetch', { ref: ['sec_1'] }, ['ref']],
    ['inventory.report', { inventory: [1, 2] }, ['inventory']],
    ['inventory.report', { inventory: { bad: 'nul\u0000here' } }, ['inventory', 'bad']],
    ['spec.report', { observedGeneration: -1 }, ['observedGeneration']],
    ['spec.report', {}, ['observedGeneration']],
    ['certificates.renew', { publicKey: 12 }, ['publicKey']],
    ['spec.get', { extra: true }, ['extra']],
  ])('answers %s with %j 400 INVALID_INPUT at the field', async (method, body, path) => {
    const answer = await as(method, body);
    expect(answer.status).toBe(400);
    expect(answer.body).toMatchObject({ code: 'INVALID_INPUT', details: { path } });
  });

  it('refuses a body over the limit, declared or streamed, and an inventory over 64 KiB', async () => {
    const small = createAgentApi({ compute: h.compute, pki: h.security, maxBodyBytes: 1024 });
    try {
      const big = JSON.stringify({ inventory: { blob: 'x'.repeat(4096) } });
      const declared = await h.call('inventory.report', big, agent.certificatePem, { api: small });
      expect(declared.status).toBe(400);
      expect(declared.body.details).toMatchObject({ path: [], reason: 'body-too-large' });
      const bytes = new TextEncoder().encode(big);
      const stream = new ReadableStream<Uint8Array>({
        start(controller) {
          for (let at = 0; at < bytes.length; at += 500) controller.enqueue(bytes.slice(at, at + 500));
          controller.close();
        },
      });
      const streamed = await small.handle(
        new Request('https://cp.test/agent/v1/inventory.report', {
          method: 'POST',
          body: stream,
          duplex: 'half',
        } as RequestInit),
        { certificatePem: agent.certificatePem },
      );
      expect(streamed.status).toBe(400);
    } finally {
      await small.close();
    }
    const inventory = await as('inventory.report', { inventory: { blob: 'x'.repeat(70_000) } });
    expect(inventory.status).toBe(400);
    expect(inventory.body.details).toMatchObject({ path: ['inventory'], reason: 'body-too-large' });
  });

  it('refuses a bad configuration with INVALID_CONFIG', () => {
    expect(() => createAgentApi({ compute: h.compute, pki: h.security, longPollMaxMs: 120_000 })).toThrow(
      /longPollMaxMs/,
    );
    expect(() => createAgentApi({ compute: h.compute, pki: h.security, maxBodyBytes: 0 })).toThrow(/maxBodyBytes/);
  });
});
