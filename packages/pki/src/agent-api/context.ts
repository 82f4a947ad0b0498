import type { Clock, Compute, Logger } from '@better-compute/core';
import type { Pki } from '../pki';
import type { CommandWaiters } from './command-waiters';
import type { SessionKeeper } from './session-keeper';

/** The agent a call comes from, as its client certificate names it (never the body). */
export interface AgentCaller {
  nodeId: string;
  tenantId: string;
  siteId: string | null;
  role: string;
  serial: string;
  certificatePem: string;
}

/** What every method gets: the kernel, the PKI, the clock, the logger, the waiters and the sessions. */
export interface AgentApiContext {
  compute: Compute;
  pki: Pki;
  clock: Clock;
  log: Logger;
  longPollMaxMs: number;
  recheckMs: number;
  waiters: CommandWaiters;
  sessions: SessionKeeper;
}

/** One call: the parsed JSON body, the caller (undefined only for `join`) and the request's abort signal. */
export interface AgentCall {
  body: unknown;
  caller: AgentCaller | undefined;
  signal: AbortSignal;
}

/** A method of the agent API: whether it needs a client certificate, and what it does. */
export interface AgentMethod {
  authenticated: boolean;
  run(ctx: AgentApiContext, call: AgentCall): Promise<unknown>;
}

/**
 * The caller of an authenticated method (the dispatcher has checked the certificate before calling it).
 *
 * @example
 * ```ts
 * const { nodeId } = callerOf(call);
 * ```
 */
export function callerOf(call: AgentCall): AgentCaller {
  if (!call.caller) throw new Error('an authenticated agent API method was called without a caller');
  return call.caller;
}
