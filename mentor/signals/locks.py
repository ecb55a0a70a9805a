"""One lock per learner, held by a transaction that writes their rows or erases them.

An erasure and a signal writer on other replicas must not interleave: the writer could check the
tombstones just before the erasure sets one and insert just after the erasure deleted, bringing the
learner back; or insert a question while the erasure deletes the learner row it references (a foreign-key
error, a failed erasure). Both take this lock first, so one waits for the other to commit, and the writer
checks the tombstones only once it holds it (the erasure sets its tombstone before taking the lock).

PostgreSQL: transaction-scoped advisory locks, taken in sorted order so two writers cannot deadlock.
SQLite has one writer at a time: a write statement that changes nothing takes the database's write lock
for the rest of the transaction.
"""

from __future__ import annotations

from collections.abc import Collection

from sqlalchemy import Connection, text

# The advisory-lock key space is shared by everything in the database: mentor's learner locks use this seed.
SEED = 0x6D656E746F72  # "mentor"


def lock_learners(connection: Connection, keys: Collection[str]) -> None:
    """Hold, until `connection`'s transaction ends, the lock of every learner in `keys`."""
    if connection.dialect.name == "postgresql":
        statement = text("SELECT pg_advisory_xact_lock(hashtextextended(:key, :seed))")
        for key in sorted(set(keys)):
            connection.execute(statement, {"key": key, "seed": SEED})
    elif connection.dialect.name == "sqlite":
        connection.exec_driver_sql("UPDATE learners SET id = id WHERE 0")
