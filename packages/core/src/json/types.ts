/** A JSON value: what can be stored in jsonb and sent over the wire unchanged. */
export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
