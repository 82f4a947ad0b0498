import { afterAll, beforeAll, beforeEach } from 'vitest';
import type { ScratchDatabase } from './databases';
import { createEngineLab, type EngineLab, type EngineLabOptions } from './engine-lab';

/**
 * One lab for the enclosing `describe`: a scratch database and a compute made before its tests, reset before each
 * test, closed and dropped after them. Returns a getter, since the lab exists only once the hooks ran.
 */
export function useEngineLab(create: () => Promise<ScratchDatabase>, options?: EngineLabOptions): () => EngineLab {
  let scratch: ScratchDatabase | undefined;
  let lab: EngineLab | undefined;
  beforeAll(async () => {
    scratch = await create();
    lab = await createEngineLab(scratch.db, options);
  });
  afterAll(async () => {
    await lab?.close();
    await scratch?.drop();
  });
  beforeEach(async () => {
    await lab?.reset();
  });
  return () => lab as EngineLab;
}
