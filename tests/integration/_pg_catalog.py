"""The catalog of a PostgreSQL schema, to compare a migrated schema with a fresh one."""

from __future__ import annotations

import psycopg

CATALOG = {
    "columns": """SELECT table_name, ordinal_position, column_name, data_type, is_nullable,
                         column_default, is_identity FROM information_schema.columns
                  WHERE table_schema = %(s)s ORDER BY 1, 2""",
    "constraints": """SELECT conrelid::regclass::text, conname, pg_get_constraintdef(oid)
                      FROM pg_constraint WHERE connamespace = %(s)s::regnamespace
                      ORDER BY 1, 2""",
    "indexes": """SELECT tablename, indexname, indexdef FROM pg_indexes
                  WHERE schemaname = %(s)s ORDER BY 1, 2""",
    "functions": """SELECT proname, pg_get_function_identity_arguments(oid),
                           pg_get_functiondef(oid)
                    FROM pg_proc WHERE pronamespace = %(s)s::regnamespace ORDER BY 1, 2""",
    "storage": """SELECT relname, reloptions FROM pg_class
                  WHERE relnamespace = %(s)s::regnamespace AND reloptions IS NOT NULL
                  ORDER BY 1""",
    "triggers": """SELECT tgrelid::regclass::text, tgname, pg_get_triggerdef(oid)
                   FROM pg_trigger WHERE NOT tgisinternal AND tgrelid IN
                   (SELECT oid FROM pg_class WHERE relnamespace = %(s)s::regnamespace)
                   ORDER BY 1, 2""",
}


def catalog(dsn: str, schema: str) -> dict[str, list[tuple]]:
    """Every column, constraint, index, function, storage setting and trigger of
    ``schema``, with its name replaced by S."""
    with psycopg.connect(dsn) as conn:
        return {name: [tuple(str(v).replace(schema, "S") for v in row)
                       for row in conn.execute(query, {"s": schema}).fetchall()]
                for name, query in CATALOG.items()}
