export { addMs, type Clock, systemClock } from './clock';
