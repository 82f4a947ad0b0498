-- The shard of a work key, as shardOf() computes it in TypeScript: the 32-bit FNV-1a hash of the key's UTF-8 bytes,
-- modulo the shard count. A statement that queues a wake itself (a command settling) needs it in SQL.
CREATE FUNCTION work_shard_of(key text, shards integer) RETURNS integer
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
DECLARE
  bytes bytea := convert_to(key, 'UTF8');
  hash bigint := 2166136261;
BEGIN
  FOR i IN 0 .. length(bytes) - 1 LOOP
    -- hash < 2^32 and the prime < 2^25: the product fits in a bigint before the reduction.
    hash := ((hash # get_byte(bytes, i)) * 16777619) % 4294967296;
  END LOOP;
  RETURN (hash % shards)::integer;
END
$$;
