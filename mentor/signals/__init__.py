"""Learning signals: every question as a pseudonymous, PII-free row; the only writer of those rows; analyst queries."""
