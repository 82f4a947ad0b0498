export { DOCTOR_LIMITS, provisionFindings } from './findings';
