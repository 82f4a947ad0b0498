import * as scopedCore from '@better-compute/core';
import * as scopedConformance from '@better-compute/core/conformance';
import * as scopedNodes from '@better-compute/core/nodes';
import * as core from 'better-compute/core';
import * as conformance from 'better-compute/core/conformance';
import * as nodes from 'better-compute/core/nodes';
import * as pglite from 'better-compute/core/pglite';
import * as postgres from 'better-compute/core/postgres';
import * as pki from 'better-compute/pki';
import { describe, expect, it } from 'vitest';

describe('the better-compute umbrella', () => {
  it('re-exports the scoped packages unchanged, so there is one ComputeError class', () => {
    expect(core.ComputeError).toBe(scopedCore.ComputeError);
    expect(core.betterCompute).toBe(scopedCore.betterCompute);
  });

  it('exposes both database backends and the pki under their subpaths', () => {
    expect(typeof pglite.createPgliteDatabase).toBe('function');
    expect(typeof postgres.createPostgresDatabase).toBe('function');
    expect(typeof pki.pki).toBe('function');
  });

  it('exposes the node repository under core/nodes, the same module as the scoped subpath', () => {
    expect(nodes.createNode).toBe(scopedNodes.createNode);
    expect(typeof nodes.setNodeHostSection).toBe('function');
  });

  it('exposes the queue behaviour suites under core/conformance, the same module as the scoped subpath', () => {
    expect(conformance.defineCommandQueueBehaviour).toBe(scopedConformance.defineCommandQueueBehaviour);
    expect(typeof conformance.defineWorkQueueBehaviour).toBe('function');
  });
});
