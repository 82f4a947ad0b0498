-- Every change to an issued certificate or to the CA (a revocation, by pki or by hand, a truncation) is announced on
-- bc_pki_certificates at commit, the serial or '*' for all: the agent API keeps the certificates it has checked in
-- memory and forgets them on it.
CREATE FUNCTION "pki_certificates_changed"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_TABLE_NAME = 'pki_certificates' AND TG_LEVEL = 'ROW' THEN
    PERFORM pg_notify('bc_pki_certificates', OLD.serial);
  ELSE
    PERFORM pg_notify('bc_pki_certificates', '*');
  END IF;
  RETURN NULL;
END;
$$;--> statement-breakpoint
CREATE TRIGGER "pki_certificates_changed" AFTER UPDATE OR DELETE ON "pki_certificates"
  FOR EACH ROW EXECUTE FUNCTION "pki_certificates_changed"();--> statement-breakpoint
CREATE TRIGGER "pki_certificates_truncated" AFTER TRUNCATE ON "pki_certificates"
  FOR EACH STATEMENT EXECUTE FUNCTION "pki_certificates_changed"();--> statement-breakpoint
CREATE TRIGGER "pki_ca_changed" AFTER UPDATE OR DELETE OR TRUNCATE ON "pki_ca"
  FOR EACH STATEMENT EXECUTE FUNCTION "pki_certificates_changed"();
