export type { Json } from './types';
