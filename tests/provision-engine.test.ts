import { describe } from 'vitest';
import { agentStepScenarios } from './provision-engine/agent-steps';
import { claimAnswerScenarios } from './provision-engine/claim-answers';
import { controlPlaneScenarios } from './provision-engine/control-plane';
import { databaseFaultScenarios } from './provision-engine/database-faults';
import { deferredStartScenarios } from './provision-engine/deferred-start';
import { eventScenarios } from './provision-engine/events';
import { failureScenarios } from './provision-engine/failures';
import { ownRequeueScenarios } from './provision-engine/own-requeue';
import { preloadScenarios } from './provision-engine/preload';
import { profileStoreScenarios } from './provision-engine/profile-store';
import { settleGuardScenarios } from './provision-engine/settle-guard';
import { startScenarios } from './provision-engine/start';
import { transitionScenarios } from './provision-engine/transitions';
import { verbScenarios } from './provision-engine/verbs';
import { labelsWrittenByARunScenarios, writeWithResultScenarios } from './provision-engine/write-with-result';
import { BACKENDS } from './support/databases';
import { useEngineLab } from './support/use-engine-lab';

// Every rule of the engine (workflows.md, steps-and-profiles.md), one behaviour per test, on PGlite and on PostgreSQL.
describe.each(BACKENDS)('the workflow engine on $name', ({ name, create }) => {
  const getLab = useEngineLab(create);
  profileStoreScenarios(getLab);
  startScenarios(getLab);
  controlPlaneScenarios(getLab);
  agentStepScenarios(getLab);
  failureScenarios(getLab);
  databaseFaultScenarios(getLab, name);
  verbScenarios(getLab);
  eventScenarios(getLab);
  transitionScenarios(getLab);
  settleGuardScenarios(getLab);
  preloadScenarios(getLab);
  claimAnswerScenarios(getLab);
  ownRequeueScenarios(getLab);
  deferredStartScenarios(getLab);
  writeWithResultScenarios(getLab);
  labelsWrittenByARunScenarios(getLab);
});
