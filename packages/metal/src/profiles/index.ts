import type { Profile } from '@better-compute/provision';

// Placeholder until metal's shipped profiles land: the engine borrows these from the module.
export const metalProfiles: readonly Profile[] = [];
