import { type ComputeModule, manifest } from '@better-compute/core';

/** The bench's command kind, registered by the engine's compute and by the agents' own (in a process of their own). */
export const benchModule: ComputeModule = {
  id: 'bench',
  commandKinds: [{ name: 'bench.ping', payload: manifest({}) }],
};
