// Placeholder until metal's steps land: the module registers these as its extensions.
export const metalSteps = [] as const;
