import { afterAll, beforeAll, beforeEach, describe } from 'vitest';
import { agentStepScenarios } from './provision-engine/agent-steps';
import { controlPlaneScenarios } from './provision-engine/control-plane';
import { eventScenarios } from './provision-engine/events';
import { failureScenarios } from './provision-engine/failures';
import { profileStoreScenarios } from './provision-engine/profile-store';
import { startScenarios } from './provision-engine/start';
import { verbScenarios } from './provision-engine/verbs';
import { BACKENDS, type ScratchDatabase } from './support/databases';
import { createEngineLab, type EngineLab } from './support/engine-lab';

// Every rule of the engine (workflows.md, steps-and-profiles.md), one behaviour per test, on PGlite and on PostgreSQL.
describe.each(BACKENDS)('the workflow engine on $name', ({ create }) => {
  let scratch: ScratchDatabase;
  let lab: EngineLab;
  beforeAll(async () => {
    scratch = await create();
    lab = await createEngineLab(scratch.db);
  });
  afterAll(async () => {
    await lab?.close();
    await scratch?.drop();
  });
  beforeEach(async () => {
    await lab.reset();
  });
  const getLab = () => lab;
  profileStoreScenarios(getLab);
  startScenarios(getLab);
  controlPlaneScenarios(getLab);
  agentStepScenarios(getLab);
  failureScenarios(getLab);
  verbScenarios(getLab);
  eventScenarios(getLab);
});
