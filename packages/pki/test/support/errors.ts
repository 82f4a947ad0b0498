import { type ComputeErrorCode, isComputeError } from '@better-compute/core';
import { expect } from 'vitest';

/** Awaits `promise` (or calls `fn`) and returns the ComputeError it failed with, asserting its code. */
export async function computeErrorOf(
  action: Promise<unknown> | (() => unknown),
  code: ComputeErrorCode,
): Promise<{ code: string; message: string; details: Record<string, unknown> }> {
  try {
    await (typeof action === 'function' ? action() : action);
  } catch (error) {
    if (!isComputeError(error)) throw error;
    expect(error.code).toBe(code);
    return error;
  }
  throw new Error(`expected a ComputeError ${code}, but nothing was thrown`);
}
