export { isId, newId, ulid } from './ids';
