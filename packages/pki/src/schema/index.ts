export * from './batches';
export * from './ca';
export * from './certificates';
export * from './image-signers';
export * from './join-tokens';
export * from './secrets';
