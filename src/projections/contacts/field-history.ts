// The bounded field history of the contacts read model (review 22, docs/contacts.md, "Field history"): the part of
// the statements of src/projections/contacts/projection.ts that writes `field_history`, in a file of its own.

/**
 * Versions of a field kept in `field_history`: the field's last FIELD_HISTORY_KEPT (its current one included). The
 * whole history is the event log's (CustomFieldValueSet/Cleared, kept for good, `events export`); this copy grew by
 * every change for good (about 10 GB a year at 200,000 changes a day) with no reader (review 22, docs/contacts.md,
 * "Field history"). A constant, not a setting: a rebuild must leave the rows the live model has.
 */
export const FIELD_HISTORY_KEPT = 10;

/**
 * The history part of a statement whose CTE `e` holds custom-field versions (company_id, contact_id, field_id,
 * version, value, expires_at, set_at, actor), for `apply` and `applyBatch` alike: `tops` is each field's highest
 * version once applied (the statement's or the one stored in field_values, which the statement's snapshot shows as it
 * was before), `h` inserts the versions among that field's last FIELD_HISTORY_KEPT (a redelivered older one is not
 * inserted again), and `trimmed` deletes the stored ones below them. Versions count from 1 without gaps, so what is left
 * depends only on the events applied, not on how they were batched: the live model and a rebuild have the same rows.
 * `companyIds`, `contactIds`: arrays of the rows' keys, so the delete looks rows up by primary key whatever the
 * statistics say (as the contacts update does).
 */
export const HISTORY_CTES = (companyIds: string, contactIds: string) => `, tops AS (
    SELECT k.company_id, k.contact_id, k.field_id,
           GREATEST(k.top, (SELECT fv.version FROM field_values fv
                             WHERE fv.company_id = k.company_id AND fv.contact_id = k.contact_id AND fv.field_id = k.field_id)) AS top
      FROM (SELECT company_id, contact_id, field_id, max(version) AS top FROM e GROUP BY company_id, contact_id, field_id) k
  ), h AS (
    INSERT INTO field_history (company_id, contact_id, field_id, version, value, expires_at, set_at, actor)
    SELECT e.company_id, e.contact_id, e.field_id, e.version, e.value, e.expires_at, e.set_at, e.actor
      FROM e JOIN tops t ON t.company_id = e.company_id AND t.contact_id = e.contact_id AND t.field_id = e.field_id
     WHERE e.version > t.top - ${FIELD_HISTORY_KEPT}
    ON CONFLICT DO NOTHING
  ), trimmed AS (
    DELETE FROM field_history fh USING tops t
     WHERE fh.company_id = t.company_id AND fh.contact_id = t.contact_id AND fh.field_id = t.field_id
       AND fh.version <= t.top - ${FIELD_HISTORY_KEPT}
       AND fh.company_id = ANY(${companyIds}) AND fh.contact_id = ANY(${contactIds})
  )`;
