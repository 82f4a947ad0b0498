export {
  DURATION_PATTERN,
  type Duration,
  formatDuration,
  isDuration,
  MAX_DURATION_MS,
  parseDuration,
} from './duration';
